"""A positive scalar affine after a Relu is a Clip bounded below by the shift:
``relu(y) * s + t = clip(y * s + t; min t)`` for 0 < s (PP-HGNetV2's Conv -> BN -> Relu ->
Mul(s) -> Add(t), paddle2onnx, opset 10), alone or folded into the Conv (and BN) before it.

The sign of s is a value condition, checked here each way it is carried: the axioms hold
with s drawn positive and fail without; the prover's bank leaves them out; the rules carry
``0 < value('s')`` and the refuter (which draws a value for every input a constraint or a
target parameter reads) finds a counterexample once it is removed; the witness runner
evaluates the Clip's bound ``value('t')``. On an opset-10 model the rewrite runs on ORT.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms.validate import Status, check_symbolic, validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._axiom_bank import axiom_bank
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._refute import refute
from taso.substitutions.generate._witness import WitnessOutcome, check_witness, type_error
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import Rule
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

NAMES = ("relu_affine_as_clip", "conv_relu_affine_as_clip", "conv_bn_relu_affine_as_clip")


def _rule(name: str) -> Rule:
    (rule,) = rules_from_axiom(find_axiom(name))
    return rule


def _unsigned(rule: Rule) -> Rule:
    kept = tuple(c for c in rule.constraints if not c.startswith("0 < value('s')"))
    assert kept != rule.constraints
    return replace(rule, id=f"{rule.id}-unsigned", constraints=kept)


@pytest.mark.parametrize("name", NAMES)
def test_the_axiom_holds_for_a_positive_scale_and_not_for_any_scale(name: str) -> None:
    axiom = find_axiom(name)
    report = validate_axiom(axiom, draws=1)
    assert report.ok, report.failures
    unsigned = replace(axiom, positive=axiom.positive - {"s"})
    assert check_symbolic(unsigned, 0).status is Status.FAILED


def test_the_prover_does_not_assume_the_sign() -> None:
    assert not set(NAMES) & {b.name for b in axiom_bank()}


@pytest.mark.parametrize("name", NAMES)
def test_the_rule_passes_its_witnesses_and_the_refuter_needs_the_sign(name: str) -> None:
    rule = _rule(name)
    assert type_error(rule) == ""
    assert check_witness(rule).outcome is WitnessOutcome.AGREE
    assert refute(rule) is None
    assert refute(_unsigned(rule)) is not None


def _hgnet_block(scale: float, shift: float = -0.0625, *, opset: int = 10):  # noqa: ANN202
    """Conv -> BN (momentum 0.75, as paddle2onnx writes) -> Relu -> s * r -> t + m, with s and
    t (1,)-shaped and written first (the canonical stage makes them scalars)."""
    rng = np.random.default_rng(3)
    stats = [nh.from_array(v.astype(np.float32), n) for n, v in (
        ("g", rng.uniform(0.5, 1.5, 4)), ("beta", rng.uniform(-1, 1, 4)),
        ("mean", rng.uniform(-1, 1, 4)), ("var", rng.uniform(0.5, 2, 4)))]
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["b"], momentum=0.75),
             h.make_node("Relu", ["b"], ["r"]), h.make_node("Mul", ["s", "r"], ["m"]),
             h.make_node("Add", ["t", "m"], ["y"])]
    inits = [weight("w", (4, 3, 3, 3)), *stats, nh.from_array(np.array([scale], np.float32), "s"),
             nh.from_array(np.array([shift], np.float32), "t")]
    return canonicalize(make_graph(nodes, {"x": (1, 3, 6, 6)}, ["y"], inits, opset=opset)).graph


@pytest.mark.parametrize(("scale", "matches"), [(0.75, 1), (1e-30, 1), (-0.75, 0), (0.0, 0), (np.inf, 0)])
@pytest.mark.parametrize("name", ["relu_affine_as_clip", "conv_bn_relu_affine_as_clip"])
def test_only_a_finite_positive_scale_matches_either_operand_order(name: str, scale: float, matches: int) -> None:
    assert len(find_matches(_hgnet_block(scale), _rule(name))) == matches


@pytest.mark.ort
@pytest.mark.parametrize("opset", [10, 13])
def test_the_folded_block_is_one_conv_and_a_clip_on_ort(opset: int) -> None:
    graph = _hgnet_block(0.875, opset=opset)
    rule = _rule("conv_bn_relu_affine_as_clip")
    (match,) = find_matches(graph, rule)
    rewritten = apply(graph, rule, match)
    assert rewritten is not None
    model = export(rewritten)
    assert [n.op_type for n in model.graph.node] == ["Conv", "Clip"]
    clip = model.graph.node[1]
    bound = {a.name: a.f for a in clip.attribute}.get("min") if opset < 11 else None
    assert (bound == np.float32(-0.0625)) if opset < 11 else len(clip.input) == 2
    assert_same_outputs(graph, rewritten)
