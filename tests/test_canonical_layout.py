"""Transposes sunk through layout-blind ops until inverse pairs cancel (pipeline/_canonical_layout.py).

tf2onnx writes a Keras (NHWC) model with ``T(0,3,1,2) -> Conv -> T(0,2,3,1)`` and the batch
norm, activations and SE gating in NHWC between them. Flipping each such region to the
Conv's layout cancels the pairs and leaves the NCHW forms the rules are written for; every
value stays the same bit for bit (reductions only when asked, as real numbers).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.ir import Graph
from taso.pipeline._canonical_layout import (
    _UNARY,
    TRANSPOSES_CANCELLED,
    Reductions,
    sink_transposes,
)
from taso.pipeline._export import export
from tests.helpers.graphs import make_graph, weight

C = 6
NCHW = (1, C, 5, 7)  # odd sizes: a layout bug cannot hide behind symmetry
TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def _channel(name: str, seed: int, shape: tuple[int, ...] = (C,)) -> onnx.TensorProto:
    return nh.from_array(np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(np.float32), name)


def _bounds() -> list[onnx.TensorProto]:
    return [nh.from_array(np.float32(0.0), "lo"), nh.from_array(np.float32(6.0), "hi")]


def _conv(source: str, target: str, seed: int) -> tuple[onnx.NodeProto, onnx.TensorProto]:
    """A 1x1 Conv in NCHW, as tf2onnx writes between its Transposes."""
    return h.make_node("Conv", [source, f"w{seed}"], [target]), weight(f"w{seed}", (C, C, 1, 1), seed)


def _sandwich(*, scale: onnx.TensorProto | None = None) -> Graph:
    """Conv -> T(NHWC) -> x*s + b -> Relu -> Clip -> Pad (H, W) -> T(NCHW) -> Conv."""
    conv1, w1 = _conv("x", "c1", 1)
    conv2, w2 = _conv("back", "y", 2)
    nodes = [conv1, h.make_node("Transpose", ["c1"], ["t"], perm=TO_NHWC),
             h.make_node("Mul", ["t", "s"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
             h.make_node("Relu", ["a"], ["r"]), h.make_node("Clip", ["r", "lo", "hi"], ["k"]),
             h.make_node("Pad", ["k", "pads"], ["p"]),
             h.make_node("Transpose", ["p"], ["back"], perm=TO_NCHW), conv2]
    pads = nh.from_array(np.asarray([0, 1, 2, 0, 0, 3, 1, 0], dtype=np.int64), "pads")
    inits = [w1, w2, scale if scale is not None else _channel("s", 3), _channel("b", 4, (1, 1, C)), pads, *_bounds()]
    return make_graph(nodes, {"x": NCHW}, ["y"], inits)


def _se_block() -> Graph:
    """A Keras SE block: r = relu(T(conv)); gate = hardsigmoid(conv(mean(r, (1, 2)))); r * gate."""
    conv1, w1 = _conv("x", "c1", 1)
    conv2, w2 = _conv("squeezed", "g", 2)
    conv3, w3 = _conv("gated", "y", 3)
    nodes = [conv1, h.make_node("Transpose", ["c1"], ["t"], perm=TO_NHWC), h.make_node("Relu", ["t"], ["r"]),
             h.make_node("ReduceMean", ["r"], ["mean"], axes=[1, 2], keepdims=1),
             h.make_node("Transpose", ["mean"], ["squeezed"], perm=TO_NCHW), conv2,
             h.make_node("Transpose", ["g"], ["g_nhwc"], perm=TO_NHWC),
             h.make_node("HardSigmoid", ["g_nhwc"], ["gate"]), h.make_node("Mul", ["r", "gate"], ["m"]),
             h.make_node("Transpose", ["m"], ["gated"], perm=TO_NCHW), conv3]
    return make_graph(nodes, {"x": NCHW}, ["y"], [w1, w2, w3])


def _transposes(graph: Graph) -> int:
    return sum(node.op_type == "Transpose" for node in graph.nodes.values())


def _run(graph: Graph, x: np.ndarray) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # each op as written
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(export(graph).SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def _input() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(NCHW).astype(np.float32) * 4


# ----- the form ---------------------------------------------------------------------------------
def test_a_sandwich_cancels_and_its_ops_run_in_the_convs_layout() -> None:
    graph, counts = sink_transposes(_sandwich())
    assert counts == {TRANSPOSES_CANCELLED: 2}
    assert _transposes(graph) == 0
    model = export(graph)
    onnx.checker.check_model(model, full_check=True)
    inits = {t.name: nh.to_array(t) for t in model.graph.initializer}
    mul = next(n for n in model.graph.node if n.op_type == "Mul")
    assert inits[mul.input[1]].shape == (1, C, 1, 1)  # the per-channel constant follows the channels
    pad = next(n for n in model.graph.node if n.op_type == "Pad")
    assert inits[pad.input[1]].tolist() == [0, 0, 1, 2, 0, 0, 3, 1]  # NHWC pads as NCHW


def test_an_se_block_reaches_the_nchw_form_only_with_remapped_reductions() -> None:
    border, border_counts = sink_transposes(_se_block())
    remapped, counts = sink_transposes(_se_block(), reductions=Reductions.REMAPPED)
    assert counts == {TRANSPOSES_CANCELLED: 4} and _transposes(remapped) == 0
    mean = next(n for n in remapped.nodes.values() if n.op_type == "ReduceMean")
    assert mean.attr("axes") == (2, 3)
    # a border reduction reads the NHWC form: one Transpose restores it, the pair over it stays
    assert border_counts == {TRANSPOSES_CANCELLED: 2} and _transposes(border) == 2


@pytest.mark.ort
@pytest.mark.parametrize("build", [_sandwich, _se_block], ids=["sandwich", "se-block"])
def test_values_are_unchanged_bit_for_bit(build) -> None:  # type: ignore[no-untyped-def]
    graph = build()
    sunk, counts = sink_transposes(graph)
    assert counts
    x = _input()
    expected, got = _run(graph, x), _run(sunk, x)
    assert [e.tobytes() for e in expected] == [g.tobytes() for g in got]


@pytest.mark.ort
def test_remapped_reductions_are_equal_as_reals() -> None:
    graph = _se_block()
    sunk, counts = sink_transposes(graph, reductions=Reductions.REMAPPED)
    assert counts
    x = _input()
    np.testing.assert_allclose(_run(sunk, x)[0], _run(graph, x)[0], rtol=1e-5, atol=1e-5)


_FLOAT_UNARY = sorted(_UNARY - {"Cast", "Identity", "IsInf", "IsNaN", "Not"})


@pytest.mark.ort
def test_every_moved_unary_op_is_blind_to_where_an_element_sits() -> None:
    """Each op the regions take, in either layout, at a size with a ragged vector tail: the
    same bits (ORT computes Log, Softplus or Elu at a buffer's tail another way: left out)."""
    x = (np.random.default_rng(1).standard_normal((1, 37, 23, 29)) * 4).astype(np.float32)
    for op in _FLOAT_UNARY:
        nhwc = [h.make_node("Transpose", ["x"], ["t"], perm=TO_NHWC), h.make_node(op, ["t"], ["u"]),
                h.make_node("Transpose", ["u"], ["y"], perm=TO_NCHW)]
        in_nhwc = make_graph(nhwc, {"x": x.shape}, ["y"], opset=20)
        in_nchw = make_graph([h.make_node(op, ["x"], ["y"])], {"x": x.shape}, ["y"], opset=20)
        assert _run(in_nhwc, x)[0].tobytes() == _run(in_nchw, x)[0].tobytes(), op


# ----- what stays -------------------------------------------------------------------------------
def _chain(*, reader: str = "Transpose", extra_output: bool = False, rank_one_operand: bool = False) -> Graph:
    """x -> T(NHWC) -> Mul(s) -> Relu -> reader (a T(NCHW) back, or another op)."""
    operand = "v" if rank_one_operand else "s"
    nodes = [h.make_node("Transpose", ["x"], ["t"], perm=TO_NHWC), h.make_node("Mul", ["t", operand], ["m"]),
             h.make_node("Relu", ["m"], ["r"])]
    if reader == "Transpose":
        nodes.append(h.make_node("Transpose", ["r"], ["y"], perm=TO_NCHW))
    else:
        nodes.append(h.make_node(reader, ["r"], ["y"], axis=-1))
    inputs = {"x": NCHW, **({"v": (C,)} if rank_one_operand else {})}
    return make_graph(nodes, inputs, ["y", "r"] if extra_output else ["y"], [_channel("s", 3)])


@pytest.mark.parametrize("obstacle", [
    pytest.param({"reader": "Softmax"}, id="reader-needs-the-layout"),
    pytest.param({"rank_one_operand": True}, id="computed-operand-of-lower-rank"),
])
def test_a_region_behind_an_obstacle_stays(obstacle: dict[str, object]) -> None:
    control, control_counts = sink_transposes(_chain())
    assert control_counts == {TRANSPOSES_CANCELLED: 2}  # without the obstacle the pair cancels
    graph = _chain(**obstacle)  # type: ignore[arg-type]
    rewritten, counts = sink_transposes(graph)
    assert counts == {} and rewritten is graph


def test_a_graph_output_keeps_its_layout() -> None:
    """r is a graph output: one Transpose writes it in NHWC; the pair around it still cancels."""
    graph, counts = sink_transposes(_chain(extra_output=True))
    assert counts == {TRANSPOSES_CANCELLED: 1}
    producer = graph.nodes[graph.producers["r"][0]]
    assert producer.op_type == "Transpose" and producer.attr("perm") == tuple(TO_NHWC)
    assert graph.types["r"].shape == (1, 5, 7, C)


@pytest.mark.ort
def test_a_graph_output_keeps_its_values() -> None:
    graph = _chain(extra_output=True)
    sunk, counts = sink_transposes(graph)
    assert counts
    x = _input()
    assert [v.tobytes() for v in _run(graph, x)] == [v.tobytes() for v in _run(sunk, x)]


def test_a_flip_that_adds_as_much_as_it_removes_is_not_made() -> None:
    """x (NHWC input) -> Mul -> T(NCHW): moving the Transpose to the input removes nothing."""
    nodes = [h.make_node("Mul", ["x", "s"], ["m"]), h.make_node("Transpose", ["m"], ["y"], perm=TO_NCHW)]
    graph = make_graph(nodes, {"x": (1, 5, 7, C)}, ["y"], [_channel("s", 3)])
    control, control_counts = sink_transposes(_chain())
    assert control_counts  # a pair does cancel
    rewritten, counts = sink_transposes(graph)
    assert counts == {} and rewritten is graph
