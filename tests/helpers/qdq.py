"""A hand-built QDQ residual block (int8 activations, as onnxruntime.quantization writes
them) and its parts, shared by the uint8-form and output-check tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.ir import Graph
from taso.pipeline._canonical_qdq import UNSIGNED_ACTIVATIONS, unsigned_activations
from taso.pipeline._export import export
from tests.helpers.graphs import make_graph

INPUT = (1, 4, 6, 6)


def point(name: str, value: int, dtype: type = np.int8, shape: tuple[int, ...] = ()) -> onnx.TensorProto:
    return nh.from_array(np.full(shape, value, dtype=dtype), name)


def scale(name: str, value: float, shape: tuple[int, ...] = ()) -> onnx.TensorProto:
    return nh.from_array(np.full(shape, value, dtype=np.float32), name)


def qdq(value: str, tag: str, step: float, zero: int) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """value -> Q -> DQ -> `value`_dq, int8 per tensor."""
    nodes = [h.make_node("QuantizeLinear", [value, f"s{tag}", f"z{tag}"], [f"{value}_q"]),
             h.make_node("DequantizeLinear", [f"{value}_q", f"s{tag}", f"z{tag}"], [f"{value}_dq"])]
    return nodes, [scale(f"s{tag}", step), point(f"z{tag}", zero)]


def int8_weight(name: str, shape: tuple[int, ...], seed: int) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """An int8 weight and its DequantizeLinear (what a QDQ export writes)."""
    values = np.random.default_rng(seed).integers(-127, 128, shape).astype(np.int8)
    node = h.make_node("DequantizeLinear", [f"{name}_i8", f"{name}_s", f"{name}_z"], [name])
    return node, [nh.from_array(values, f"{name}_i8"), scale(f"{name}_s", 0.01), point(f"{name}_z", 0)]


def residual_block() -> Graph:
    """x -> QDQ -> Conv -> QDQ -> (Conv -> QDQ) + itself -> QDQ: the second Conv's input DQ
    has two readers (the Conv and the Add), as at every residual or SE block."""
    nodes, inits = [], []
    for part in (qdq("x", "0", 0.02, -3), qdq("a", "1", 0.05, 7), qdq("b", "2", 0.04, -11), qdq("y", "3", 0.08, 2)):
        nodes += part[0]
        inits += part[1]
    for name, seed in (("w1", 1), ("w2", 2)):
        node, tensors = int8_weight(name, (4, 4, 3, 3), seed)
        nodes.append(node)
        inits += tensors
    nodes += [h.make_node("Conv", ["x_dq", "w1"], ["a"], pads=[1, 1, 1, 1]),
              h.make_node("Conv", ["a_dq", "w2"], ["b"], pads=[1, 1, 1, 1]),
              h.make_node("Add", ["a_dq", "b_dq"], ["y"])]
    return make_graph(nodes, {"x": INPUT}, ["y_dq"], inits)


def qdq_pair() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """`residual_block` and the same written with uint8 activations: the same values, bit
    for bit, when each op runs as the spec writes it. A pair that is not that fails here,
    where it is built, rather than looking like a failure of the check it feeds."""
    uint8, counts = unsigned_activations(residual_block())
    assert counts == {UNSIGNED_ACTIVATIONS: 4}, counts  # all four activations, weights untouched
    return export(residual_block()), export(uint8)
