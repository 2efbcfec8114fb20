"""Canonical step 7: Transposes sunk through layout-blind ops until they cancel.

tf2onnx writes a Keras squeeze-and-excitation block on NHWC tensors, with a Transpose
before and after each NCHW conv; the rules are written against the NCHW form. The stage
moves the Transposes down until pairs cancel, every value unchanged, and keeps the result
only when fewer Transposes are left.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.pipeline._canonical import canonicalize
from taso.pipeline._canonical_transpose import SUNK, sink_transposes
from taso.pipeline._export import export
from taso.pipeline._rewriting import default_rules
from taso.substitutions.matching import find_matches
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import run_on_ort

RULES = {r.id: r for r in default_rules()}
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def _const(name: str, array: np.ndarray):
    return nh.from_array(np.asarray(array, dtype=np.float32), name)


def _t(source: str, out: str, perm: tuple[int, ...]):
    return h.make_node("Transpose", [source], [out], perm=list(perm))


def _keras_se_block(opset: int = 15):
    """conv -> NHWC -> hardswish -> SE (ReduceMean over H, W; NCHW convs between
    Transposes; hard sigmoid) -> gate -> NCHW -> conv, as tf2onnx writes MobileNetV3."""
    nodes = [h.make_node("Conv", ["x", "w0"], ["c0"]), _t("c0", "c0t", TO_NHWC),
             h.make_node("Mul", ["c0t", "scale"], ["bn"]),  # a per-channel (C,) constant, NHWC
             h.make_node("Add", ["bn", "three"], ["p"]), h.make_node("Clip", ["p", "lo", "hi"], ["cl"]),
             h.make_node("Mul", ["cl", "sixth"], ["hs6"]), h.make_node("Mul", ["bn", "hs6"], ["a"]),
             _reduce_mean("a", "m", opset), _t("m", "mt", TO_NCHW),
             h.make_node("Conv", ["mt", "w1"], ["s1"]), _t("s1", "s1t", TO_NHWC),
             h.make_node("Relu", ["s1t"], ["r"]), _t("r", "rt", TO_NCHW),
             h.make_node("Conv", ["rt", "w2"], ["s2"]), _t("s2", "s2t", TO_NHWC),
             h.make_node("Add", ["s2t", "three"], ["q"]), h.make_node("Clip", ["q", "lo", "hi"], ["qc"]),
             h.make_node("Mul", ["qc", "sixth"], ["gate"]), h.make_node("Mul", ["a", "gate"], ["g"]),
             _t("g", "gt", TO_NCHW), h.make_node("Conv", ["gt", "w3"], ["y"])]
    rng = np.random.default_rng(0)
    axes = [nh.from_array(np.array([1, 2], dtype=np.int64), "axes")] if opset >= 18 else []
    inits = [*axes, weight("w0", (16, 8, 1, 1), 1), weight("w1", (4, 16, 1, 1), 2), weight("w2", (16, 4, 1, 1), 3),
             weight("w3", (8, 16, 1, 1), 4), _const("scale", rng.uniform(0.5, 1.5, 16)),
             _const("three", 3.0), _const("lo", 0.0), _const("hi", 6.0), _const("sixth", np.float32(1 / 6))]
    return make_graph(nodes, {"x": (1, 8, 6, 6)}, ["y"], inits, opset=opset)


def _reduce_mean(source: str, out: str, opset: int):
    """ReduceMean over axes 1 and 2, kept: an attribute below opset 18, an input from it."""
    if opset >= 18:
        return h.make_node("ReduceMean", [source, "axes"], [out], keepdims=1)
    return h.make_node("ReduceMean", [source], [out], axes=[1, 2], keepdims=1)


def _ops(graph) -> Counter:
    return Counter(node.op_type for node in graph.nodes.values())


def _same_bits(before, after, shape=(1, 8, 6, 6)) -> None:
    feeds = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    for a, b in zip(run_on_ort(export(before), feeds), run_on_ort(export(after), feeds), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_tf2onnx_se_block_loses_every_transpose_and_its_values_stay_bit_for_bit():
    graph = _keras_se_block()
    canonical = canonicalize(graph)
    assert _ops(graph)["Transpose"] == 6 and _ops(canonical.graph)["Transpose"] == 0
    assert canonical.counts[SUNK] == 6
    reduce_mean = next(n for n in canonical.graph.nodes.values() if n.op_type == "ReduceMean")
    assert tuple(reduce_mean.attr("axes")) == (2, 3)
    _same_bits(graph, canonical.graph)


def test_the_se_rules_match_only_once_the_transposes_are_gone():
    graph = _keras_se_block()
    canonical = canonicalize(graph).graph
    for rule_id in ("ax-reduce_mean_spatial_as_gap", "ax-mul_channel_gate_upsampled"):
        assert not find_matches(graph, RULES[rule_id]), rule_id
        assert find_matches(canonical, RULES[rule_id]), rule_id


def test_reduce_axes_given_as_an_input_are_moved_too():
    graph = _keras_se_block(opset=18)  # ReduceMean's axes an input from opset 18
    assert _ops(canonicalize(graph).graph)["Transpose"] == 0
    _same_bits(graph, canonicalize(graph).graph)


def test_a_pad_between_transposes_is_moved_with_its_pads():
    nodes = [_t("x", "xt", TO_NHWC), h.make_node("Relu", ["xt"], ["r"]),
             h.make_node("Pad", ["r", "pads"], ["p"]), _t("p", "pt", TO_NCHW),
             h.make_node("Conv", ["pt", "w"], ["y"])]
    pads = nh.from_array(np.array([0, 1, 2, 0, 0, 3, 0, 0], dtype=np.int64), "pads")  # H by 1/3, W by 2/0
    graph = make_graph(nodes, {"x": (1, 8, 5, 7)}, ["y"], [pads, weight("w", (4, 8, 3, 3), 1)], opset=13)
    sunk = canonicalize(graph).graph
    assert _ops(sunk)["Transpose"] == 0
    _same_bits(graph, sunk, (1, 8, 5, 7))


def test_two_transposes_that_do_not_cancel_become_one():
    nodes = [_t("x", "a", (0, 2, 3, 1)), h.make_node("Sigmoid", ["a"], ["s"]), _t("s", "y", (0, 2, 1, 3))]
    graph = make_graph(nodes, {"x": (1, 2, 3, 4)}, ["y"], opset=13)
    sunk = canonicalize(graph).graph
    transposes = [n for n in sunk.nodes.values() if n.op_type == "Transpose"]
    assert len(transposes) == 1 and tuple(transposes[0].attr("perm")) == (0, 3, 2, 1)
    _same_bits(graph, sunk, (1, 2, 3, 4))


def test_nothing_changes_where_sinking_leaves_as_many_transposes():
    """A Transpose before a conv cannot pass it, one before a graph output must stay, a
    reduction dropping its axes cannot take one: each graph is returned as it was."""
    cases = [
        ([_t("x", "a", TO_NHWC), h.make_node("Relu", ["a"], ["y"])], {}),
        ([_t("x", "a", TO_NCHW), h.make_node("Conv", ["a", "w"], ["y"])], {"w": (4, 5, 1, 1)}),
        ([_t("x", "a", TO_NHWC), h.make_node("ReduceMean", ["a"], ["m"], axes=[1, 2], keepdims=0),
          h.make_node("Relu", ["m"], ["y"])], {}),
    ]
    for nodes, weights in cases:
        inits = [weight(name, shape, 1) for name, shape in weights.items()]
        graph = make_graph(nodes, {"x": (1, 8, 5, 5)}, ["y"], inits, opset=13)
        counts: Counter[str] = Counter()
        assert sink_transposes(graph, counts) is graph and not counts


def test_a_binary_op_with_an_operand_transposed_otherwise_keeps_it():
    """Add(T_P(x), T_Q(z)) with Q != P: T_P moves only where T_Q can follow, so nothing moves."""
    nodes = [_t("x", "a", TO_NHWC), _t("z", "b", (0, 3, 2, 1)), h.make_node("Add", ["a", "b"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 4, 4, 4), "z": (1, 4, 4, 4)}, ["y"], opset=13)
    assert sink_transposes(graph, Counter()) is graph
