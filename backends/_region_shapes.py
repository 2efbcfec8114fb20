"""Concrete shapes for every value of a graph under a `ShapeProfile`.

Region models need static input shapes. `ConcreteShapes.of(graph, profile)` resolves the
graph inputs with `resolve_shapes` (the profile, then the defaults), binds the symbolic
dims of the inputs to those sizes, and runs onnx shape inference once on a weight-free
copy of the whole graph. Values that rewrites create later are looked up by name
(rewrites keep value names and types stable) or, for new names, by substituting the
bound symbols into their declared type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from taso.backends.analytical import infer_shapes
from taso.backends.profiles import Shape, ShapeProfile, resolve_shapes
from taso.ir import Graph, TensorType


@dataclass(frozen=True)
class ConcreteShapes:
    """Static shapes by value name, plus symbol values for types of new values."""

    inferred: Mapping[str, Shape]
    symbols: Mapping[str, int]

    @classmethod
    def of(cls, graph: Graph, profile: ShapeProfile | None, whole: onnx.ModelProto) -> ConcreteShapes:
        """`whole` is `graph` as a model (any input shapes); inference reads no weights."""
        declared = _inputs_model(graph)
        inputs = resolve_shapes(declared, profile)
        symbols: dict[str, int] = {}
        for name, sizes in inputs.items():
            shape = graph.types[name].shape if name in graph.types else None
            for dim, size in zip(shape or (), sizes, strict=False):
                if isinstance(dim, str):
                    symbols.setdefault(dim, size)
        inferred = dict(infer_shapes(whole, inputs).shapes)
        inferred.update(inputs)
        return cls(inferred, symbols)

    def shape(self, name: str, declared: TensorType | None) -> Shape | None:
        """The static shape of `name`, or None if it cannot be known."""
        known = self.inferred.get(name)
        if known is not None:
            return known
        if declared is None or declared.shape is None:
            return None
        dims = [d if isinstance(d, int) else self.symbols.get(d) if isinstance(d, str) else None for d in declared.shape]
        return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[misc]


def _inputs_model(graph: Graph) -> onnx.ModelProto:
    """A node-less model that only declares `graph`'s inputs (what resolve_shapes reads)."""
    values = []
    for name in graph.inputs:
        declared = graph.types.get(name)
        elem = declared.elem_type if declared else onnx.TensorProto.FLOAT
        shape = list(declared.shape) if declared and declared.shape is not None else None
        values.append(onnx.helper.make_tensor_value_info(name, elem, shape))
    return onnx.helper.make_model(onnx.helper.make_graph([], "inputs", values, []))
