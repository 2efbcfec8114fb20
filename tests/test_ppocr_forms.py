"""The normal form of paddle2onnx 2.1's PP-LCNetV3 block, and the folds written against it.

paddle2onnx 2.1 writes a conv's bias as an Add of a (1, C, 1, 1) constant after a bias-free
Conv, a LearnableAffineBlock as a Mul then an Add of (1,)-shaped constants (scalars once
the canonical stage has run), and HardSwish as ``x * hardsigmoid(x)``:

    conv(x, w) + c -> * s -> + t -> hardsigmoid, * -> * s2 -> + t2 -> conv(., w2)

ORT fuses a Conv with its bias, the HardSigmoid and the Mul into one kernel only when
nothing stands between them: the three elementwise nodes after the conv fold in one step
(folding the bias Add alone changes nothing, ORT folds it itself), and the affine after the
activation folds into the next conv when that conv is unpadded.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.opspecs.axioms.converter import conv_params, reshape_1d, reshape_4d
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.pipeline._rewriting import default_rules
from taso.substitutions.generate._converter_forms import CONVERTER_FORMS
from taso.substitutions.generate._converter_rules import _candidates
from taso.substitutions.generate._prove import prove
from taso.substitutions.generate._witness import check_witness
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import ProofStatus
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

RULES = {r.id: r for r in default_rules()}


def _scalar(name: str, value: float) -> onnx.TensorProto:
    """A learnable scalar as paddle2onnx writes it: shape (1,)."""
    return nh.from_array(np.full((1,), value, dtype=np.float32), name)


def _lcnet_block(*, bias: bool = False, bias_shape: tuple[int, ...] = (1, 16, 1, 1)):
    """conv -> Add(c) -> Mul(s) -> Add(t) -> x * hardsigmoid(x) -> Mul(s2) -> Add(t2) -> 1x1 conv."""
    conv_inputs = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [h.make_node("Conv", conv_inputs, ["conv"], pads=[1, 1, 1, 1], group=8),
             h.make_node("Add", ["conv", "c"], ["biased"]),
             h.make_node("Mul", ["s", "biased"], ["scaled"]),  # paddle2onnx puts the scalar first
             h.make_node("Add", ["scaled", "t"], ["shifted"]),
             h.make_node("HardSigmoid", ["shifted"], ["hs"], alpha=1 / 6, beta=0.5),
             h.make_node("Mul", ["hs", "shifted"], ["act"]),
             h.make_node("Mul", ["s2", "act"], ["act_scaled"]),
             h.make_node("Add", ["act_scaled", "t2"], ["act_shifted"]),
             h.make_node("Conv", ["act_shifted", "w2"], ["y"])]
    inits = [weight("w", (16, 2, 3, 3), 1), weight("c", bias_shape, 2), weight("w2", (32, 16, 1, 1), 3),
             _scalar("s", 1.1), _scalar("t", -0.05), _scalar("s2", 0.9), _scalar("t2", 0.08)]
    if bias:
        inits.append(weight("b", (16,), 4))
    return make_graph(nodes, {"x": (1, 16, 8, 10)}, ["y"], inits)


def _apply_once(graph, rule_id: str):
    matches = find_matches(graph, RULES[rule_id])
    assert matches, f"{rule_id} does not match"
    result = apply(graph, RULES[rule_id], matches[0])
    assert result is not None, f"{rule_id} matched but was not applied"
    return result


def _ops(graph) -> list[str]:
    return [n.op_type for n in export(graph).graph.node if n.op_type != "Constant"]


@pytest.mark.parametrize("bias", [False, True])
def test_the_bias_and_the_affine_after_a_conv_fold_in_one_step(bias):
    graph = canonicalize(_lcnet_block(bias=bias)).graph
    rule = "cv-fold_add_mul_add_conv_bias" if bias else "cv-fold_add_mul_add_conv"
    folded = _apply_once(graph, rule)
    assert _ops(folded) == ["Conv", "HardSigmoid", "Mul", "Mul", "Add", "Conv"]
    assert_same_outputs(graph, folded)


def test_the_whole_block_becomes_conv_hardswish_conv():
    graph = canonicalize(_lcnet_block()).graph
    folded = _apply_once(_apply_once(graph, "cv-fold_add_mul_add_conv"), "cv-conv_affine_input_nobias")
    assert _ops(folded) == ["Conv", "HardSigmoid", "Mul", "Conv"]
    assert_same_outputs(graph, folded)


def test_a_scalar_shift_never_becomes_a_missing_bias():
    """conv(x, w) + c with c one value: no (M,) bias to become, so the bias-free fold stays off."""
    graph = canonicalize(_lcnet_block(bias_shape=(1,))).graph
    assert not find_matches(graph, RULES["cv-fold_add_mul_add_conv"])


def test_a_shift_of_another_channel_count_never_folds():
    graph = canonicalize(_lcnet_block(bias=True, bias_shape=(1, 1, 8, 10))).graph
    assert not find_matches(graph, RULES["cv-fold_add_mul_add_conv_bias"])


def _bias_left_unscaled(a, v, p):  # noqa: ANN001, ANN202
    """WRONG: (conv(x, w) + c) * s + t = conv(x, w * s, c + t)  (the bias not scaled)."""
    bias = a("Add", reshape_1d(a, v["c"]), reshape_1d(a, v["t"]))
    return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, v["s"])), bias, **conv_params(p))


def test_the_fold_with_its_bias_left_unscaled_is_neither_proved_nor_witnessed():
    form = next(f for f in CONVERTER_FORMS if f.name == "fold_add_mul_add_conv")
    (wrong,) = _candidates(replace(form, rhs=_bias_left_unscaled))
    assert prove(wrong, rlimit=2_000_000).status is not ProofStatus.PROVED
    assert not check_witness(wrong).ok
