"""Toy graphs and rewrites for the search tests: chains of unary ops in a "toy" domain.

Nothing here runs on ONNX Runtime; a fake cost model prices a graph as the sum of
per-op weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType

from taso.ir import Graph, Node, TensorType
from taso.search import Rewrite, WholeGraphCost, apply_rewrite

FLOAT = TensorType(1, (4,))


def chain(*ops: str) -> Graph:
    """x -> ops[0] -> ops[1] -> ... -> y."""
    assert ops, "a chain needs at least one op (its output y must have a producer)"
    names = ["x"] + [f"v{i}" for i in range(len(ops) - 1)] + ["y"]
    nodes = {
        i: Node(op, "toy", (names[i],), (names[i + 1],), name=f"n{i}") for i, op in enumerate(ops)
    }
    return Graph(
        inputs=("x",),
        outputs=("y",),
        nodes=MappingProxyType(nodes),
        types=MappingProxyType(dict.fromkeys(names, FLOAT)),
        initializers=MappingProxyType({}),
    )


def ops_of(graph: Graph) -> list[str]:
    return [graph.nodes[i].op_type for i in graph.topological_order]


@dataclasses.dataclass(frozen=True)
class OpWeights(WholeGraphCost):
    """Fake cost: sum of per-op weights; counts its calls."""

    weights: Mapping[str, float]
    calls: list[str] = dataclasses.field(default_factory=list)

    def cost(self, graph: Graph) -> float:
        self.calls.append("cost")
        return float(sum(self.weights[node.op_type] for node in graph.nodes.values()))


Matcher = Callable[[Graph, int], Rewrite | None]


def swap(source: str, target: str) -> Matcher:
    """`source(x) = target(x)`: replace one node's op."""

    def match(graph: Graph, node_id: int) -> Rewrite | None:
        node = graph.nodes[node_id]
        if node.op_type != source:
            return None
        new = dataclasses.replace(node, op_type=target)
        return apply_rewrite(graph, f"{source}->{target}", remove=[node_id], add=[new])

    return match


def drop_identity(graph: Graph, node_id: int) -> Rewrite | None:
    """`c(Id(x)) = c(x)`: remove an Id and rewire its only consumer."""
    node = graph.nodes[node_id]
    consumers = graph.consumers.get(node.outputs[0], ())
    if node.op_type != "Id" or len(consumers) != 1 or node.outputs[0] in graph.outputs:
        return None
    consumer = graph.nodes[consumers[0]]
    rewired = dataclasses.replace(consumer, inputs=node.inputs)
    return apply_rewrite(graph, "drop-id", remove=[node_id, consumers[0]], add=[rewired])


def add_identity(graph: Graph, node_id: int) -> Rewrite | None:
    """`c(x) = c(Id(x))` for a node fed by another node; with the same fresh-name hint
    everywhere, so two such rewrites of one graph pick the same new value name."""
    node = graph.nodes[node_id]
    if node.inputs[0] not in graph.producers or node.op_type == "Id":
        return None
    fresh = graph.fresh_name("t")
    identity = Node("Id", "toy", node.inputs, (fresh,))
    rewired = dataclasses.replace(node, inputs=(fresh,))
    return apply_rewrite(
        graph, "add-id", remove=[node_id], add=[identity, rewired], types={fresh: FLOAT}
    )


@dataclasses.dataclass
class Expander:
    """An `expand` from matchers, honouring `near`; records what it was asked."""

    matchers: tuple[Matcher, ...]
    honour_near: bool = True
    nears: list[frozenset[int] | None] = dataclasses.field(default_factory=list)
    visited: int = 0

    def __call__(self, graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
        self.nears.append(near)
        ids = sorted(graph.nodes) if near is None or not self.honour_near else _anchors(graph, near)
        for node_id in ids:
            self.visited += 1
            for matcher in self.matchers:
                rewrite = matcher(graph, node_id)
                if rewrite is not None:
                    yield rewrite


def _anchors(graph: Graph, near: frozenset[int]) -> list[int]:
    """Patterns here are anchored at their first node and span at most two nodes, so a
    match that touches `near` is anchored in `near` or at a producer of a node in it."""
    anchors = set(near)
    for node_id in near:
        for name in graph.nodes[node_id].inputs:
            if name in graph.producers:
                anchors.add(graph.producers[name][0])
    return sorted(anchors)
