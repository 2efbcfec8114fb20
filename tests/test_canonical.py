"""The canonical stage and the rules written against its normal form.

Real exports write a learnable scalar as a (1,)-shaped initializer or Constant node, put an
Identity after most ops (paddle2onnx), and at opsets below 14 write HardSwish decomposed.
The canonical stage makes every one-element constant operand a scalar and bypasses
Identity nodes, values unchanged; the scalar folds, the input-side folds and HardSwish's
legal form below opset 14 then apply.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.pipeline._rewriting import default_rules
from taso.substitutions.matching import apply, find_matches, node_view
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs, run_on_ort
from tests.helpers.strategies import Recipe, build, recipes

RULES = {r.id: r for r in default_rules()}


def _const(name: str, value: object, shape: tuple[int, ...]) -> onnx.TensorProto:
    return nh.from_array(np.full(shape, value, dtype=np.float32), name)


def _constant_node(name: str, value: float, shape: tuple[int, ...]) -> onnx.NodeProto:
    return h.make_node("Constant", [], [name], value=_const(name + "_t", value, shape))


def _affine_block(shape: tuple[int, ...], *, constant_nodes: bool):
    """conv -> Identity -> Mul(s) -> Identity -> Add(t) -> relu, s and t one-element."""
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"]),
             h.make_node("Identity", ["c"], ["c1"]),
             h.make_node("Mul", ["s", "c1"], ["m"]),
             h.make_node("Identity", ["m"], ["m1"]),
             h.make_node("Add", ["m1", "t"], ["a"]),
             h.make_node("Relu", ["a"], ["y"])]
    inits = [weight("w", (16, 8, 3, 3), 1), weight("b", (16,), 2)]
    if constant_nodes:
        nodes = [_constant_node("s", 1.5, shape), _constant_node("t", -0.25, shape), *nodes]
    else:
        inits += [_const("s", 1.5, shape), _const("t", -0.25, shape)]
    return make_graph(nodes, {"x": (1, 8, 10, 10)}, ["y"], inits)


def _ops(model: onnx.ModelProto) -> list[str]:
    """The model's ops, less Constant nodes a rewrite left unread (ORT drops them on load)."""
    return sorted(n.op_type for n in model.graph.node if n.op_type != "Constant")


def _shapes_read_by(graph, op: str) -> list[tuple]:
    out = []
    for node in graph.nodes.values():
        if node.op_type == op:
            out += [graph.types[name].shape for name in node.inputs if name in graph.initializers]
    return out


@pytest.mark.parametrize("shape", [(1,), (1, 1, 1, 1), (1, 1, 1)])
@pytest.mark.parametrize("constant_nodes", [False, True])
def test_one_element_constants_become_scalars_and_identities_are_bypassed(shape, constant_nodes):
    graph = _affine_block(shape, constant_nodes=constant_nodes)
    canonical = canonicalize(graph)
    ops = [n.op_type for n in canonical.graph.nodes.values()]
    assert "Identity" not in ops and "Constant" not in ops  # the (1,)-shaped ones are unread
    assert _shapes_read_by(canonical.graph, "Mul") == [()] and _shapes_read_by(canonical.graph, "Add") == [()]
    assert canonical.counts == {"Identity bypassed": 2, "one-element constant made a scalar": 2}
    assert_same_outputs(graph, canonical.graph, rtol=0)


def test_a_constant_of_higher_rank_than_the_other_operand_is_left_alone():
    nodes = [h.make_node("Mul", ["x", "s"], ["y"])]
    graph = make_graph(nodes, {"x": (4, 5)}, ["y"], [_const("s", 2.0, (1, 1, 1))])
    assert canonicalize(graph).counts == {}


def test_an_identity_that_is_a_graph_output_stays():
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Identity", ["r"], ["y"])]
    graph = make_graph(nodes, {"x": (2, 3)}, ["y"])
    assert canonicalize(graph).graph.nodes == graph.nodes


def _apply_everywhere(graph, rule_id: str):
    matches = find_matches(graph, RULES[rule_id])
    assert matches, f"{rule_id} does not match"
    result = apply(graph, RULES[rule_id], matches[0])
    assert result is not None, f"{rule_id} matched but was not applied"
    return result


def test_a_scalar_scale_and_shift_after_a_conv_fold_into_it():
    graph = canonicalize(_affine_block((1,), constant_nodes=True)).graph
    folded = _apply_everywhere(graph, "cv-fold_mul_conv_bias")
    folded = _apply_everywhere(folded, "cv-fold_add_conv_bias")
    assert _ops(export(folded)) == ["Conv", "Relu"]
    assert_same_outputs(graph, folded)


def test_before_the_canonical_stage_the_one_element_scale_does_not_fold():
    assert not find_matches(_affine_block((1,), constant_nodes=False), RULES["cv-fold_mul_conv_bias"])


def _input_affine(pads: tuple[int, ...], group: int):
    """relu -> Mul(s) -> Add(t) -> conv: the affine a block applies after its activation."""
    nodes = [h.make_node("Relu", ["x"], ["r"]),
             h.make_node("Mul", ["r", "s"], ["m"]),
             h.make_node("Add", ["m", "t"], ["a"]),
             h.make_node("Conv", ["a", "w", "b"], ["y"], pads=list(pads), group=group, strides=[2, 1])]
    inits = [weight("w", (8, 8 // group, 3, 3), 1), weight("b", (8,), 2),
             _const("s", 0.75, (1,)), _const("t", 0.5, (1,))]
    return canonicalize(make_graph(nodes, {"x": (1, 8, 9, 9)}, ["y"], inits)).graph


@pytest.mark.parametrize("group", [1, 2, 8])
def test_a_scalar_shift_then_scale_fold_forward_into_an_unpadded_conv(group):
    graph = _input_affine((0, 0, 0, 0), group)
    folded = _apply_everywhere(graph, "cv-conv_shift_input")
    folded = _apply_everywhere(folded, "cv-conv_scale_input")
    assert _ops(export(folded)) == ["Conv", "Relu"]
    assert_same_outputs(graph, folded)


@pytest.mark.parametrize("group", [1, 8])
def test_a_scalar_affine_folds_forward_in_one_step(group):
    graph = _input_affine((0, 0, 0, 0), group)
    folded = _apply_everywhere(graph, "cv-conv_affine_input")
    assert _ops(export(folded)) == ["Conv", "Relu"]
    assert_same_outputs(graph, folded)
    assert not find_matches(_input_affine((1, 1, 1, 1), group), RULES["cv-conv_affine_input"])


def test_a_shift_never_folds_into_a_padded_conv_but_a_scale_does():
    graph = _input_affine((1, 1, 1, 1), 1)
    assert not find_matches(graph, RULES["cv-conv_shift_input"])
    nodes = [h.make_node("Mul", ["x", "s"], ["m"]), h.make_node("Conv", ["m", "w"], ["y"], pads=[1, 1, 1, 1])]
    padded = canonicalize(make_graph(nodes, {"x": (1, 8, 6, 6)}, ["y"],
                                     [weight("w", (8, 8, 3, 3)), _const("s", 3.0, (1,))])).graph
    assert_same_outputs(padded, _apply_everywhere(padded, "cv-conv_scale_input_nobias"))


def _clip_hardswish(opset: int):
    """x * clip(x + 3, 0, 6) / 6 as paddle2onnx 1.x writes it at opset 11 (Constant bounds)."""
    nodes = [_constant_node("three", 3.0, ()), _constant_node("six", 6.0, ()),
             _constant_node("lo", 0.0, ()), _constant_node("hi", 6.0, ()),
             h.make_node("Add", ["x", "three"], ["p"]),
             h.make_node("Clip", ["p", "lo", "hi"], ["c"]),
             h.make_node("Mul", ["x", "c"], ["m"]),
             h.make_node("Div", ["m", "six"], ["y"])]
    return canonicalize(make_graph(nodes, {"x": (1, 16, 5, 5)}, ["y"], opset=opset)).graph


def test_hardswish_below_opset_14_is_written_as_x_times_hardsigmoid():
    graph = _clip_hardswish(11)
    rewritten = _apply_everywhere(graph, "ax-hard_swish_decompose-rev")
    model = export(rewritten)
    assert _ops(model) == ["HardSigmoid", "Mul"]
    assert_same_outputs(graph, rewritten)


def test_hardswish_at_opset_14_stays_one_op():
    rewritten = _apply_everywhere(_clip_hardswish(14), "ax-hard_swish_decompose-rev")
    assert _ops(export(rewritten)) == ["HardSwish"]


def test_the_rounded_hardswish_form_is_guarded_like_a_reassociating_rule():
    """The legal form rounds 1/6, so it may not feed a decision (ArgMax) unguarded."""
    graph = _clip_hardswish(11)
    nodes = [*[n.proto for n in graph.nodes.values()], h.make_node("ArgMax", ["y"], ["k"], axis=1)]
    with_argmax = make_graph(nodes, {"x": (1, 16, 5, 5)}, ["k"], opset=11)
    assert not find_matches(with_argmax, RULES["ax-hard_swish_decompose-rev"])
    nodes14 = [*[n.proto for n in _clip_hardswish(14).nodes.values()], h.make_node("ArgMax", ["y"], ["k"], axis=1)]
    assert find_matches(make_graph(nodes14, {"x": (1, 16, 5, 5)}, ["k"], opset=14),
                        RULES["ax-hard_swish_decompose-rev"])


def _tf2onnx_hardswish(opset: int, sixth: float):
    """x * (clip(x + 3, 0, 6) * fl(1/6)) as tf2onnx writes Keras' hard_swish (opset 15)."""
    nodes = [h.make_node("Add", ["x", "three"], ["p"]),
             h.make_node("Clip", ["p", "lo", "hi"], ["c"]),
             h.make_node("Mul", ["c", "sixth"], ["s"]),
             h.make_node("Mul", ["x", "s"], ["y"])]
    inits = [_const("three", 3.0, ()), _const("lo", 0.0, ()), _const("hi", 6.0, ()), _const("sixth", sixth, ())]
    return make_graph(nodes, {"x": (1, 16, 5, 5)}, ["y"], inits, opset=opset)


def test_tf2onnx_hardswish_with_a_rounded_sixth_becomes_one_op():
    graph = _tf2onnx_hardswish(15, 1 / 6)
    rewritten = _apply_everywhere(graph, "ax-hard_swish_mul_sixth-rev")
    assert _ops(export(rewritten)) == ["HardSwish"]
    assert RULES["ax-hard_swish_mul_sixth-rev"].exactness.value == "rounds-constants"
    assert_same_outputs(graph, rewritten)


def test_a_multiplier_that_is_not_the_float_nearest_a_sixth_is_not_hardswish():
    assert not find_matches(_tf2onnx_hardswish(15, 0.1667), RULES["ax-hard_swish_mul_sixth-rev"])


def _hard_sigmoid_by_hand(last: str, constant: float):
    """clip(x + 3, 0, 6) * fl(1/6) (tf2onnx's Keras hard_sigmoid, an SE gate) or / 6."""
    nodes = [h.make_node("Add", ["x", "three"], ["p"]), h.make_node("Clip", ["p", "lo", "hi"], ["c"]),
             h.make_node(last, ["c", "k"], ["y"])]
    inits = [_const("three", 3.0, ()), _const("lo", 0.0, ()), _const("hi", 6.0, ()), _const("k", constant, ())]
    return make_graph(nodes, {"x": (1, 16, 1, 1)}, ["y"], inits, opset=15)


@pytest.mark.parametrize(("last", "constant", "rule_id"), [("Mul", 1 / 6, "ax-hard_sigmoid_sixth-rev"),
                                                            ("Div", 6.0, "ax-hard_sigmoid_div6-rev")])
def test_a_hard_sigmoid_written_out_becomes_one_op(last: str, constant: float, rule_id: str):
    graph = _hard_sigmoid_by_hand(last, constant)
    rewritten = _apply_everywhere(graph, rule_id)
    assert _ops(export(rewritten)) == ["HardSigmoid"]
    assert RULES[rule_id].exactness.value == "rounds-constants"
    assert_same_outputs(graph, rewritten)


def test_a_hard_sigmoid_by_another_constant_is_left_alone():
    assert not find_matches(_hard_sigmoid_by_hand("Mul", 0.1667), RULES["ax-hard_sigmoid_sixth-rev"])
    assert not find_matches(_hard_sigmoid_by_hand("Div", 5.0), RULES["ax-hard_sigmoid_div6-rev"])


def test_paddle2onnx_2_hardswish_becomes_one_op_where_the_opset_has_it():
    """x * HardSigmoid(x; fl(1/6), 1/2), HardSigmoid first, as paddle2onnx 2.x writes it."""
    nodes = [h.make_node("HardSigmoid", ["x"], ["s"], alpha=1 / 6, beta=0.5), h.make_node("Mul", ["s", "x"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 16, 5, 5)}, ["y"], opset=14)
    rewritten = _apply_everywhere(graph, "ax-hard_swish_hardsigmoid-rev")
    assert _ops(export(rewritten)) == ["HardSwish"]
    assert_same_outputs(graph, rewritten)


def test_hardswish_multiplied_by_a_sixth_last_becomes_one_op():
    """(x * clip(x + 3, 0, 6)) * fl(1/6)."""
    nodes = [h.make_node("Add", ["x", "three"], ["p"]), h.make_node("Clip", ["p", "lo", "hi"], ["c"]),
             h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Mul", ["m", "sixth"], ["y"])]
    inits = [_const("three", 3.0, ()), _const("lo", 0.0, ()), _const("hi", 6.0, ()), _const("sixth", 1 / 6, ())]
    graph = make_graph(nodes, {"x": (1, 16, 5, 5)}, ["y"], inits, opset=15)
    rewritten = _apply_everywhere(graph, "ax-hard_swish_mul_first_sixth-rev")
    assert _ops(export(rewritten)) == ["HardSwish"]
    assert_same_outputs(graph, rewritten)


def test_clip_bounds_written_as_attributes_before_opset_11_are_read():
    """Before opset 11 Clip keeps its bounds as attributes; the same hardswish is found."""
    nodes = [h.make_node("Add", ["x", "three"], ["p"]), h.make_node("Clip", ["p"], ["c"], min=0.0, max=6.0),
             h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "six"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 16, 5, 5)}, ["y"], [_const("three", 3.0, ()), _const("six", 6.0, ())], opset=10)
    rewritten = _apply_everywhere(graph, "ax-hard_swish_decompose-rev")
    assert _ops(export(rewritten)) == ["HardSigmoid", "Mul"]
    assert_same_outputs(graph, rewritten)
    lower_only = make_graph([h.make_node("Clip", ["x"], ["y"], min=-1.0)], {"x": (2, 3)}, ["y"], opset=10)
    assert node_view(lower_only, 0).params == {"min": -1.0, "max": None}


@pytest.mark.ort
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(recipes(max_steps=8))
def test_the_canonical_form_computes_the_same_bits(recipe: Recipe) -> None:
    """Whatever random valid model goes in (scalar, (1,), per-channel constants, either
    operand first), its canonical form computes bit for bit the same on ORT."""
    graph = import_model(build(recipe))
    canonical = canonicalize(graph).graph
    feeds = {name: np.random.default_rng(0).standard_normal(
        [d if isinstance(d, int) else 2 for d in graph.types[name].shape]).astype(np.float32) for name in graph.inputs}
    for got, want in zip(run_on_ort(export(canonical), feeds), run_on_ort(export(graph), feeds), strict=True):
        np.testing.assert_array_equal(got, want)


def _se_squeeze_reshape(target: tuple[int, ...]):
    """tf2onnx's SE squeeze: GlobalAveragePool -> Squeeze -> Reshape -> 1x1 Conv."""
    nodes = [h.make_node("GlobalAveragePool", ["x"], ["g"]),
             h.make_node("Squeeze", ["g", "axes"], ["s"]),
             h.make_node("Reshape", ["s", "shape"], ["r"]),
             h.make_node("Conv", ["r", "w"], ["y"])]
    inits = [nh.from_array(np.array([2, 3], dtype=np.int64), "axes"),
             nh.from_array(np.array(target, dtype=np.int64), "shape"), weight("w", (4, 8, 1, 1))]
    return make_graph(nodes, {"x": (1, 8, 5, 5)}, ["y"], inits)


def test_a_reshape_chain_back_to_its_input_shape_is_bypassed():
    graph = _se_squeeze_reshape((1, 8, 1, 1))
    canonical = canonicalize(graph)
    assert _ops(export(canonical.graph)) == ["Conv", "GlobalAveragePool"]
    assert canonical.counts == {"reshape chain back to its input's shape bypassed": 1}
    assert_same_outputs(graph, canonical.graph, rtol=0)


def test_a_reshape_chain_to_another_shape_stays():
    nodes = [h.make_node("Squeeze", ["x", "axes"], ["s"]), h.make_node("Reshape", ["s", "shape"], ["y"])]
    inits = [nh.from_array(np.array([2, 3], dtype=np.int64), "axes"),
             nh.from_array(np.array([2, 4, 1, 1], dtype=np.int64), "shape")]
    graph = make_graph(nodes, {"x": (1, 8, 1, 1)}, ["y"], inits)
    assert canonicalize(graph).counts == {}


def _pad_then_conv(pads: list[int], *, bias: bool):
    conv_inputs = ["p", "w", "b"] if bias else ["p", "w"]
    nodes = [h.make_node("Pad", ["x", "pads"], ["p"]), h.make_node("Conv", conv_inputs, ["y"], strides=[2, 2])]
    inits = [nh.from_array(np.array(pads, dtype=np.int64), "pads"), weight("w", (4, 8, 3, 3)), weight("b", (4,), 1)]
    return make_graph(nodes, {"x": (1, 8, 7, 6)}, ["y"], inits if bias else inits[:2])


@pytest.mark.parametrize("bias", [False, True])
def test_an_explicit_zero_pad_before_a_conv_becomes_its_padding(bias):
    """tf2onnx writes SAME padding of strided convs as an asymmetric Pad before the Conv."""
    graph = _pad_then_conv([0, 0, 0, 1, 0, 0, 1, 1], bias=bias)
    rule = "ax-conv_pad_into_pads_bias" if bias else "ax-conv_pad_into_pads"
    rewritten = _apply_everywhere(graph, rule)
    (conv,) = export(rewritten).graph.node
    assert [list(a.ints) for a in conv.attribute if a.name == "pads"] == [[0, 1, 1, 1]]
    assert_same_outputs(graph, rewritten, rtol=0)


def test_a_pad_of_the_channels_never_becomes_conv_padding():
    graph = _pad_then_conv([0, 1, 1, 1, 0, 0, 1, 1], bias=False)
    assert not find_matches(graph, RULES["ax-conv_pad_into_pads"])


@pytest.mark.parametrize("bias", [False, True])
def test_a_per_channel_scale_and_shift_after_a_conv_fold_in_one_step(bias):
    """BatchNorm as tf2onnx writes Keras' (conv, then Mul and Add of (1, C, 1, 1) constants)."""
    conv_inputs = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [h.make_node("Conv", conv_inputs, ["c"]), h.make_node("Mul", ["c", "k"], ["m"]),
             h.make_node("Add", ["m", "t"], ["a"]), h.make_node("Sigmoid", ["a"], ["s"]),
             h.make_node("Mul", ["a", "s"], ["y"])]
    inits = [weight("w", (16, 8, 3, 3), 1), weight("k", (1, 16, 1, 1), 2), weight("t", (1, 16, 1, 1), 3),
             weight("b", (16,), 4)]
    graph = make_graph(nodes, {"x": (1, 8, 6, 6)}, ["y"], inits if bias else inits[:3])
    rewritten = _apply_everywhere(graph, "cv-fold_mul_add_conv_bias" if bias else "cv-fold_mul_add_conv")
    assert _ops(export(rewritten)) == ["Conv", "Mul", "Sigmoid"]
    assert_same_outputs(graph, rewritten)


def test_arithmetic_that_does_nothing_is_bypassed():
    """An unadapted Keras Normalization (mean 0, variance 1) as tf2onnx writes it: x + 0, x * 1."""
    nodes = [h.make_node("Add", ["x", "zero"], ["a"]), h.make_node("Mul", ["ones", "a"], ["m"]),
             h.make_node("Div", ["m", "ones"], ["d"]), h.make_node("Relu", ["d"], ["y"])]
    inits = [_const("zero", 0.0, (1, 1, 1, 3)), _const("ones", 1.0, (1, 1, 1, 3))]
    graph = make_graph(nodes, {"x": (1, 6, 6, 3)}, ["y"], inits)
    canonical = canonicalize(graph)
    assert _ops(export(canonical.graph)) == ["Relu"]
    assert canonical.simplified == {"canonical/no-op-arithmetic": 3}
    assert_same_outputs(graph, canonical.graph, rtol=0)


def test_a_neutral_constant_that_broadcasts_its_operand_larger_is_kept():
    nodes = [h.make_node("Add", ["x", "zero"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 3)}, ["y"], [_const("zero", 0.0, (4, 3))])
    assert canonicalize(graph).counts == {}
    nodes = [h.make_node("Sub", ["zero", "x"], ["y"])]  # 0 - x is a negation
    assert canonicalize(make_graph(nodes, {"x": (1, 3)}, ["y"], [_const("zero", 0.0, (1, 3))])).counts == {}


def test_weights_written_as_constant_nodes_that_a_fold_replaced_are_not_written():
    """paddle2onnx 1.x writes every weight as a Constant node: after a fold, the old weight
    must not stay in the file beside the folded one (the model grew by 4.7 MB)."""
    nodes = [_constant_node("w", 0.5, (16, 8, 3, 3)), _constant_node("b", 0.1, (16,)), _constant_node("k", 2.0, (1,)),
             _constant_node("unread", 1.0, (4,)),
             h.make_node("Conv", ["x", "w", "b"], ["c"]), h.make_node("Mul", ["c", "k"], ["y"])]
    graph = canonicalize(make_graph(nodes, {"x": (1, 8, 6, 6)}, ["y"])).graph
    folded = _apply_everywhere(graph, "cv-fold_mul_conv_bias")
    written = export(folded)
    constants = [n.output[0] for n in written.graph.node if n.op_type == "Constant"]
    assert constants == ["unread"]  # the input's own unread Constant stays
    assert_same_outputs(graph, folded)


def _ghost_slice(starts: list[int], ends: list[int], axes: list[int] | None = None, steps: list[int] | None = None,
                 *, opset: int = 17):
    """timm GhostNet's module: Concat of a conv and its depthwise conv, then ``x[:, :c]``."""
    inits = [weight("w", (4, 8, 1, 1), 1), weight("d", (4, 1, 3, 3), 2)]
    if opset >= 10:
        args = {"starts": starts, "ends": ends, "axes": axes, "steps": steps}
        names = [k for k, v in args.items() if v is not None]
        inits += [nh.from_array(np.array(args[k], dtype=np.int64), k) for k in names]
        slice_node = h.make_node("Slice", ["cat", *names], ["s"])
    else:
        attributes = {"starts": starts, "ends": ends} | ({"axes": axes} if axes is not None else {})
        slice_node = h.make_node("Slice", ["cat"], ["s"], **attributes)
    nodes = [h.make_node("Conv", ["x", "w"], ["p"]), h.make_node("Conv", ["p", "d"], ["q"], group=4, pads=[1] * 4),
             h.make_node("Concat", ["p", "q"], ["cat"], axis=1), slice_node, h.make_node("Relu", ["s"], ["y"])]
    return make_graph(nodes, {"x": (1, 8, 6, 6)}, ["y"], inits, opset=opset)


@pytest.mark.parametrize(("starts", "ends", "axes", "steps", "opset"), [
    ([0], [8], [1], [1], 17),                    # timm's x[:, :out_chs], out_chs all there is
    ([0], [2**63 - 1], [1], None, 17),           # x[:, 0:]
    ([0, -8], [1, 99], [0, -3], None, 13),       # every axis named, a negative start and axis, ends past the size
    ([0], [8], [1], None, 9),                    # attributes, before opset 10
])
def test_a_slice_of_every_element_is_bypassed(starts, ends, axes, steps, opset):
    graph = _ghost_slice(starts, ends, axes, steps, opset=opset)
    canonical = canonicalize(graph)
    assert _ops(export(canonical.graph)) == ["Concat", "Conv", "Conv", "Relu"]
    assert canonical.simplified == {"canonical/whole-slice": 1}
    assert_same_outputs(graph, canonical.graph, rtol=0)


@pytest.mark.parametrize(("starts", "ends", "axes", "steps"), [
    ([0], [7], [1], [1]),        # drops the last channel
    ([1], [8], [1], None),       # drops the first
    ([0], [-1], [1], None),      # x[:, :-1]
    ([0], [8], [1], [2]),        # every other channel
    ([-7], [8], [1], None),      # a negative start short of the size
    ([0, 0], [8, 5], [1, 2], None),  # the channels whole, the rows not
])
def test_a_slice_that_drops_an_element_stays(starts, ends, axes, steps):
    graph = _ghost_slice(starts, ends, axes, steps)
    assert canonicalize(graph).counts == {}


def test_a_slice_with_ends_not_constant_stays():
    nodes = [h.make_node("Shape", ["x"], ["shape"]), h.make_node("Gather", ["shape", "one"], ["c"], axis=0),
             h.make_node("Unsqueeze", ["c", "zero"], ["end"]), h.make_node("Slice", ["x", "zero", "end", "one"], ["s"]),
             h.make_node("Relu", ["s"], ["y"])]
    inits = [nh.from_array(np.array([0], dtype=np.int64), "zero"), nh.from_array(np.array([1], dtype=np.int64), "one")]
    graph = make_graph(nodes, {"x": (1, "C", 6, 6)}, ["y"], inits)  # the end is the dynamic C
    assert "Slice of every element bypassed" not in canonicalize(graph).counts
