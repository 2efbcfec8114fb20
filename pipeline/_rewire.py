"""Small node-level edits the canonical stage's passes share: a node rewired to other
values (its ONNX proto kept in step), and fresh value names handed out without clashes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import onnx

from taso.ir import Graph, Node


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
