"""Squeeze-and-excitation blocks as torch.onnx writes them, and the gating rules for them.

TorchScript (timm) writes the squeeze as ReduceMean(axes (2, 3)), dynamo (torchvision) as
ReduceMean(axes (-1, -2)), and the excite as a broadcast ``x * g`` with g of shape
(N, C, 1, 1). ORT's CPU provider runs that Mul outside its blocked NCHWc layout; the rules
rewrite the squeeze as GlobalAveragePool and the gate as ``x * resize(g; (1, 1, H, W))``,
both of which ORT keeps blocked.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from taso.opspecs import spec_by_name
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.pipeline._rewriting import default_rules
from taso.substitutions.generate._gating_families import channel_gate_rules
from taso.substitutions.matching import apply, find_matches
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

RULES = {r.id: r for r in default_rules()}
SQUEEZE = "ax-reduce_mean_spatial_as_gap"
GATE = "ax-mul_channel_gate_upsampled"


def _se_block(*, axes: tuple[int, ...] = (-1, -2), plane: tuple = (8, 6), gate_first: bool = False):
    """x -> reducemean -> 1x1 conv -> relu -> 1x1 conv -> sigmoid -> x * gate."""
    mul_inputs = ["gate", "x"] if gate_first else ["x", "gate"]
    nodes = [h.make_node("ReduceMean", ["x", "axes"], ["squeezed"], keepdims=1),
             h.make_node("Conv", ["squeezed", "w1", "b1"], ["fc1"]),
             h.make_node("Relu", ["fc1"], ["act"]),
             h.make_node("Conv", ["act", "w2", "b2"], ["fc2"]),
             h.make_node("Sigmoid", ["fc2"], ["gate"]),
             h.make_node("Mul", mul_inputs, ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(axes, np.int64), "axes"),
             weight("w1", (4, 16, 1, 1), 1), weight("b1", (4,), 2),
             weight("w2", (16, 4, 1, 1), 3), weight("b2", (16,), 4)]
    return make_graph(nodes, {"x": (1, 16, *plane)}, ["y"], inits, opset=18)


def _apply_everywhere(graph, rule_id: str):
    while matches := find_matches(graph, RULES[rule_id]):
        graph = apply(graph, RULES[rule_id], matches[0])
        assert graph is not None, f"{rule_id} matched but was not applied"
    return graph


def _ops(graph) -> list[str]:
    return [n.op_type for n in export(graph).graph.node if n.op_type != "Constant"]


@pytest.mark.parametrize("axes", [(-1, -2), (2, 3), (3, -2)])
def test_the_squeeze_becomes_global_average_pool_for_every_spelling_of_the_plane(axes):
    graph = canonicalize(_se_block(axes=axes)).graph
    assert len(find_matches(graph, RULES[SQUEEZE])) == 1
    rewritten = _apply_everywhere(graph, SQUEEZE)
    assert "ReduceMean" not in _ops(rewritten) and "GlobalAveragePool" in _ops(rewritten)


def _mean_over(axes: tuple[int, ...]):
    node = h.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)
    inits = [onnx.numpy_helper.from_array(np.array(axes, np.int64), "axes")]
    return canonicalize(make_graph([node], {"x": (1, 4, 3, 5)}, ["y"], inits, opset=18)).graph


@pytest.mark.parametrize("axes", [(1, 2), (2,), (1, 2, 3), (2, 2)])
def test_a_mean_over_other_axes_is_left_alone(axes):
    assert not find_matches(_mean_over(axes), RULES[SQUEEZE])


@pytest.mark.parametrize("gate_first", [False, True])
def test_the_gate_is_upsampled_to_the_plane_on_either_side_of_the_mul(gate_first):
    graph = canonicalize(_se_block(gate_first=gate_first)).graph
    rewritten = _apply_everywhere(graph, GATE)
    resize = [n for n in export(rewritten).graph.node if n.op_type == "Resize"]
    assert len(resize) == 1
    attrs = {a.name: h.get_attribute_value(a) for a in resize[0].attribute}
    assert attrs["coordinate_transformation_mode"] == b"asymmetric" and attrs["nearest_mode"] == b"floor"


def test_a_gate_that_is_not_per_channel_is_left_alone():
    nodes = [h.make_node("Mul", ["x", "g"], ["y"])]
    for g in ((1, 1, 1, 1), (1, 16, 1, 6), (1, 16, 8, 6)):
        graph = canonicalize(make_graph(nodes, {"x": (1, 16, 8, 6), "g": g}, ["y"])).graph
        assert not find_matches(graph, RULES[GATE]), g


def test_a_constant_per_channel_scale_is_not_a_gate():
    """A batch norm's scale after a bias-free conv (tf2onnx: conv, x * s, + t) is a constant
    (1, C, 1, 1): ORT folds it into the conv. Upsampled, it would be exported as a constant
    of x's full shape and read by a Mul of its own (Keras EfficientNet-B0: 0.77x). The rule
    as generated matches a gate computed at run time only, the SE block's still."""
    rule = channel_gate_rules()[0]
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], group=16), h.make_node("Mul", ["c", "s"], ["y"])]
    inits = [weight("w", (16, 1, 3, 3), 1), weight("s", (1, 16, 1, 1), 2)]
    graph = canonicalize(make_graph(nodes, {"x": (1, 16, 8, 6)}, ["y"], inits, opset=18)).graph
    assert not find_matches(graph, rule)
    assert len(find_matches(canonicalize(_se_block()).graph, rule)) == 1


def test_a_plane_of_unknown_size_is_left_alone():
    graph = canonicalize(_se_block(plane=("H", "W"))).graph
    assert not find_matches(graph, RULES[GATE])


@pytest.mark.ort
def test_both_rewrites_keep_the_block_s_outputs():
    graph = canonicalize(_se_block()).graph
    rewritten = _apply_everywhere(_apply_everywhere(graph, SQUEEZE), GATE)
    assert _ops(rewritten).count("Resize") == 1 and "ReduceMean" not in _ops(rewritten)
    assert_same_outputs(graph, rewritten)


def _one_node(op: str, x: np.ndarray, attrs: dict, const: dict[int, np.ndarray]) -> np.ndarray:
    inputs = ["x"] + [""] * max(const, default=0)
    inits = []
    for index, value in const.items():
        inputs[index] = f"c{index}"
        inits.append(onnx.numpy_helper.from_array(value, f"c{index}"))
    graph = h.make_graph([h.make_node(op, inputs, ["y"], **attrs)], "g",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=10)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.ort
@pytest.mark.parametrize(("op", "params", "shape"), [
    ("Resize", {"scales": (1.0, 1.0, 3.0, 2.0), "mode": "nearest",
                "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, (1, 3, 1, 1)),
    ("Resize", {"scales": (1.0, 1.0, 2.0, 3.0), "mode": "nearest",
                "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, (2, 2, 3, 2)),
    ("ReduceMean", {"axes": (-1, -2), "keepdims": 1}, (2, 3, 4, 5)),
    ("ReduceMean", {"axes": (1,), "keepdims": 0}, (2, 3, 4)),
])
def test_the_new_specs_compute_what_onnxruntime_computes(op, params, shape):
    spec = spec_by_name(op)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    form = spec.params_to_onnx(params)
    expected = _one_node(form.op_type, x, form.attrs, form.const_inputs)
    np.testing.assert_allclose(spec.evaluate([x], params)[0], expected, rtol=1e-6, atol=1e-6)
    assert spec.infer_shapes([shape], params)[0] == expected.shape


def test_a_resize_the_spec_does_not_model_fails_its_check():
    spec = spec_by_name("Resize")
    for params in ({"scales": (1.0, 1.0, 2.0, 2.0)},  # half_pixel, round_prefer_floor
                   {"scales": (1.0, 1.0, 1.5, 2.0), "coordinate_transformation_mode": "asymmetric",
                    "nearest_mode": "floor"},
                   {"scales": (1.0, 1.0, 2.0, 2.0), "mode": "linear",
                    "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}):
        assert not spec.check([(1, 2, 3, 3)], params).ok, params
