"""The cost interface the search depends on: two methods, no ONNX Runtime.

`cost(graph)` prices a whole graph (called once, for the input graph);
`cost_after(parent, parent_cost, rewrite)` prices `rewrite.graph` knowing its parent's
cost, so that a model can price only the region that changed. Costs are comparable
numbers (milliseconds for the backends' models), lower is better. Implementations live
in `taso.backends.graph_cost` (measured on ORT, analytical); tests use small fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from taso.ir import Graph
from taso.search.rewrite import Rewrite


@runtime_checkable
class CostModel(Protocol):
    """Prices graphs for the search."""

    def cost(self, graph: Graph) -> float:
        """Cost of the whole graph."""
        ...

    def cost_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        """Cost of `rewrite.graph`, the result of applying `rewrite` to `parent`."""
        ...


class WholeGraphCost:
    """Mixin giving `cost_after` the default, non-incremental meaning: `cost(rewrite.graph)`."""

    def cost(self, graph: Graph) -> float:
        raise NotImplementedError

    def cost_after(self, parent: Graph, parent_cost: float, rewrite: Rewrite) -> float:
        return self.cost(rewrite.graph)


@dataclass(frozen=True)
class FunctionCost(WholeGraphCost):
    """A cost model from a plain function of the graph (tests, quick experiments)."""

    function: Callable[[Graph], float]

    def cost(self, graph: Graph) -> float:
        return float(self.function(graph))
