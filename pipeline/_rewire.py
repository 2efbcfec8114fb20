"""Small node-level edits the graph passes share: a node rewired to other values (its ONNX
proto kept in step), fresh value names handed out without clashes, a Transpose's
permutation read, and new int64 constants (shapes, axes, pads)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import onnx
from onnx import numpy_helper

from taso.ir import Graph, Initializer, Node, TensorType

STANDARD = ("", "ai.onnx")
_INT64 = 7


def rewired(node: Node, inputs: Mapping[int, str], *, outputs: tuple[str, ...] | None = None) -> Node:
    """`node` reading `inputs` (position -> value) instead, writing `outputs` if given."""
    new_inputs = tuple(inputs.get(i, name) for i, name in enumerate(node.inputs))
    new_outputs = node.outputs if outputs is None else outputs
    proto = None
    if node.proto is not None:
        proto = onnx.NodeProto()
        proto.CopyFrom(node.proto)
        del proto.input[:]
        proto.input.extend(new_inputs)
        del proto.output[:]
        proto.output.extend(new_outputs)
    return replace(node, inputs=new_inputs, outputs=new_outputs, proto=proto)


class FreshNames:
    """Value names unused in `graph` and among those already handed out."""

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._taken: set[str] = set()

    def take(self, hint: str) -> str:
        name = self._graph.fresh_name(hint)
        while name in self._taken:
            name = self._graph.fresh_name(name)
        self._taken.add(name)
        return name


def transpose_perm(node: Node, rank: int) -> tuple[int, ...] | None:
    """A standard Transpose's permutation of `rank` axes (by default the axes reversed); None
    for any other node, or a perm that is no permutation of them (inside a function body it
    can refer to the caller's attribute)."""
    if node.op_type != "Transpose" or node.domain not in STANDARD:
        return None
    given = node.attr("perm")
    if given is not None and not isinstance(given, tuple):
        return None
    perm = tuple(range(rank))[::-1] if given is None else tuple(int(p) for p in given)  # type: ignore[arg-type]
    return perm if sorted(perm) == list(range(rank)) else None


def int64_initializer(fresh: FreshNames, hint: str, values: Sequence[int]) -> Initializer:
    """A new 1-d int64 constant (a shape, axes, pads) named after `hint`."""
    array = np.asarray(values, dtype=np.int64)
    name = fresh.take(hint)
    return Initializer(name, TensorType(_INT64, array.shape), numpy_helper.from_array(array, name))
