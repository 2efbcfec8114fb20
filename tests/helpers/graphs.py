"""Small taso Graphs built from ONNX nodes: `make_graph`, seeded `weight`s, shared nets.

`make_graph` imports a one-graph model whose output types come from onnx shape inference,
so a test writes only nodes, input shapes and output names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.ir import Graph

OPSET = 17


def weight(name: str, shape: tuple[int, ...], seed: int = 0) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return nh.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def make_graph(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Sequence[int | str]],
    outputs: Sequence[str],
    initializers: Sequence[onnx.TensorProto] = (),
    *,
    opset: int = OPSET,
) -> Graph:
    """Import a model built from nodes; output types are left to shape inference."""
    graph = h.make_graph(
        list(nodes), "g",
        [h.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [onnx.ValueInfoProto(name=n) for n in outputs],
        list(initializers),
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 10
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    untyped = [info.name for info in model.graph.output if info.name not in inferred]
    assert not untyped, f"shape inference typed no output named {untyped}: check the nodes and output names"
    for info in model.graph.output:
        info.CopyFrom(inferred[info.name])
    return import_model(model)


def grouped_net(channels: int, group: int, *, depthwise_too: bool = False, size: int = 8) -> Graph:
    """Conv(1x1) -> grouped 3x3 Conv -> Relu (-> depthwise 3x3 Conv)."""
    width = channels * group
    nodes = [h.make_node("Conv", ["x", "w0"], ["a"]),
             h.make_node("Conv", ["a", "w1"], ["b"], group=group, pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["b"], ["y"])]
    inits = [weight("w0", (width, 3, 1, 1), 1), weight("w1", (width, channels, 3, 3), 2)]
    if depthwise_too:
        nodes.append(h.make_node("Conv", ["y", "w2"], ["z"], group=width, pads=[1, 1, 1, 1]))
        inits.append(weight("w2", (width, 1, 3, 3), 3))
    return make_graph(nodes, {"x": [1, 3, size, size]}, ["z" if depthwise_too else "y"], inits)
