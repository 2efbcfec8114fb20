"""Which values of a graph are constants: one definition for the whole project.

A value is a constant when export can know it: a non-overridable initializer, the output
of a `Constant` node, or the output of an internal weight transform (domain
`taso.internal`) whose inputs are all constants. An initializer is *overridable* when the
model also lists it as a graph input (a caller may feed it) or when its `training_info`
assigns it (a training step rewrites it): its value may change, so it is not a constant.

This is what rules mean by `is_const`, what folding may evaluate, and what the cost
models may treat as a weight.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from taso._onnx_import import training_bound
from taso.ir import INTERNAL_DOMAIN, Graph, Node

_STANDARD = ("", "ai.onnx")
_CONSTANT_ATTRIBUTES = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}


def overridable_initializers(graph: Graph) -> frozenset[str]:
    """Initializers whose value may change (see the module docstring)."""
    template = getattr(graph.context, "template", None)
    if template is None:
        return frozenset()
    names = {v.name for v in template.graph.input} | training_bound(template)
    return frozenset(names & graph.initializers.keys())


class Constness:
    """Memoized `is_constant` over one graph (graphs are immutable)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.overridable = overridable_initializers(graph)
        self._known: dict[str, bool] = {}

    def is_constant(self, name: str) -> bool:
        known = self._known.get(name)
        if known is None:
            known = self._compute(name)
            self._known[name] = known
        return known

    def _compute(self, name: str) -> bool:
        graph = self.graph
        if name in graph.initializers:
            return name not in self.overridable and name not in graph.inputs
        producer = graph.producers.get(name)
        if producer is None:
            return False
        node = graph.nodes[producer[0]]
        if node.op_type == "Constant" and node.domain in _STANDARD:
            return True
        if node.domain == INTERNAL_DOMAIN:
            self._known[name] = False  # guards against (invalid) cycles while recursing
            return all(self.is_constant(i) for i in node.inputs if i)
        return False

    def small_value(self, name: str, max_elements: int) -> np.ndarray | None:
        """The value of a constant initializer or `Constant` node with at most `max_elements`
        elements; None otherwise (an internal weight transform's value exists only after
        folding)."""
        if not self.is_constant(name):
            return None
        init = self.graph.initializers.get(name)
        if init is not None:
            size = int(np.prod(init.type.shape or (), dtype=np.int64))
            return None if size > max_elements else init.array()
        producer = self.graph.producers.get(name)
        node = self.graph.nodes[producer[0]] if producer else None
        if node is None or node.op_type != "Constant":
            return None
        return _constant_node_value(node, max_elements)


def _constant_node_value(node: Node, max_elements: int) -> np.ndarray | None:
    for name, value in node.attributes:
        if name == "value" and isinstance(value, onnx.AttributeProto) and value.type == onnx.AttributeProto.TENSOR:
            if int(np.prod(tuple(value.t.dims), dtype=np.int64)) > max_elements:
                return None
            return numpy_helper.to_array(value.t)
        if name in _CONSTANT_ATTRIBUTES:
            return np.asarray(value, dtype=_CONSTANT_ATTRIBUTES[name])
    return None
