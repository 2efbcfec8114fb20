"""The refuter finds counterexamples of its own (issue 19, item 2): configurations drawn
from a rule's constraints (never its witness), numeric search, then element-wise Z3; a
refutation overrides a claimed proof in `verify_rule`, and right rules stay unrefuted."""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace

import numpy as np
import pytest

from taso.opspecs import spec_by_name
from taso.substitutions.generate import _verify
from taso.substitutions.generate._refute import Method, compare_sides, refute
from taso.substitutions.generate._refute_configs import choose_configs, constraints_hold
from taso.substitutions.generate._verify import Verdict, verify_rule
from taso.substitutions.rule import ParamExpr, ParamVar, ProofStatus, Rule, load_rules
from tests.helpers.rules import ANY, LIBRARY, node, relu_is_identity, rule, shipped


def _run(snippet: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(snippet, {})  # noqa: S102 - the reproducer is ours
    return out.getvalue().strip()


def _trapezoid() -> Rule:
    """clip(x, 4, 5) + 2 - clip(x, 6, 7) = x - x: wrong only for 4 < x < 7, a band the
    numeric search's draws (|x| <= 3, or uniform over +-1000) almost never hit."""
    return rule(
        "wrong-trapezoid", "clip(x, 4, 5) + 2 - clip(x, 6, 7) = 0", [("x", ANY)],
        [node("n0", "Clip", "x", min=4.0, max=5.0), node("k", "ConstFill", shape=(), value=2.0),
         node("n1", "Add", "n0", "k"), node("n2", "Clip", "x", min=6.0, max=7.0),
         node("n3", "Sub", "n1", "n2")],
        [node("t0", "Sub", "x", "x")], [("n3", "t0")])


def test_a_wrong_rule_is_refuted_numerically_with_a_reproducer() -> None:
    found = refute(relu_is_identity())
    assert found is not None and found.method is Method.NUMERIC
    assert _run(found.reproducer).startswith("output a")  # the snippet shows the difference


def test_z3_finds_what_the_numeric_search_misses() -> None:
    found = refute(_trapezoid())
    assert found is not None and found.method is Method.Z3, found
    x = found.inputs["x"]
    assert ((x > 4) & (x < 7)).any()  # the model sits in the band
    assert _run(found.reproducer)


def test_configs_follow_the_constraints_not_the_witness() -> None:
    conv_bias = shipped("ax-conv_bias_add")
    configs = choose_configs(replace(conv_bias, provenance=()), count=4)
    assert len(configs) >= 2
    for config in configs:
        assert constraints_hold(conv_bias, config)
        assert config.shapes["c"] in ((1, config.shapes["w"][0], 1, 1), (config.shapes["w"][0], 1, 1))
    assert any(s[0] > 1 for c in configs for s in (c.shapes["x"],))  # a batch above 1


def test_pinned_constants_keep_their_value() -> None:
    hard_swish = shipped("ax-hard_swish_decompose-rev")
    for config in choose_configs(hard_swish):
        assert config.values == {"k0": 3.0, "k1": 6.0}
    assert refute(hard_swish) is None


def test_shipped_rules_are_not_refuted() -> None:
    rules = load_rules(LIBRARY).rules
    sample = rules[:: max(len(rules) // 40, 1)]
    assert [r.id for r in sample if refute(r) is not None] == []


def test_a_refutation_overrides_a_claimed_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    claimed = _verify._Proof(ProofStatus.PROVED, 0.0)
    monkeypatch.setattr(_verify, "_prove", lambda rule, rlimit: claimed)
    check = verify_rule(relu_is_identity())
    assert check.verdict is Verdict.REFUTED and check.refuted_by == "numeric"
    assert "the prover claimed a proof" in check.detail
    assert _run(check.counterexample)


def test_agreeing_sides_compare_equal_within_rounding() -> None:
    x = np.array([1e3, -2.5, 0.0])
    assert compare_sides(relu_is_identity(), {"x": np.abs(x)}, {}) == ""
    assert compare_sides(relu_is_identity(), {"x": x}, {}) != ""


def _pool_as_maxpool() -> Rule:
    """conv(x, poolkernel(c, k); group c) = maxpool(x; k): wrong (the average is not the max);
    its source type-checks only where c is x's channel count, which a constraint states."""
    return rule("pool-as-max", "conv(x, poolkernel(c, k); group c) = maxpool(x; k)", [("x", ANY)],
                [node("n0", "ConstPoolKernel", channels=ParamVar("c"), kernel_shape=ParamVar("k")),
                 node("n1", "Conv", "x", "n0", group=ParamVar("c"))],
                [node("t0", "MaxPool", "x", kernel_shape=ParamVar("k"))], [("n1", "t0")],
                constraints=("shape('x')[1] == c", "rank('x') == 4"))


def test_a_rule_refuted_where_the_prover_cannot_type_it_is_refuted() -> None:
    """The prover, given no shapes, cannot bind c and raises a ShapeError; the refuter's own
    config is a counterexample, so the verdict is refuted, not ill-typed."""
    check = verify_rule(_pool_as_maxpool())
    assert check.verdict is Verdict.REFUTED and check.counterexample


@pytest.mark.parametrize("rule_id", ["ax-hard_sigmoid_sixth-rev", "ax-hard_sigmoid_div6-rev"])
def test_a_rounded_constant_is_not_a_counterexample(rule_id: str) -> None:
    """hardsigmoid(x; fl(1/6), 1/2) vs clip(x + 3, 0, 6) * fl(1/6): near x = -3 the output
    cancels to ~0.005 while fl(1/6)'s error times |x| stays, a relative gap of ~3e-6."""
    hard_sigmoid = shipped(rule_id)
    assert refute(hard_sigmoid) is None
    pinned = choose_configs(hard_sigmoid)[0].values  # k0 = 3 and the 6 or fl(1/6) the rule reads
    gap_inputs = {"x": np.full((1, 2, 1, 1), -2.9679), **{k: np.array([v]) for k, v in pinned.items()}}
    assert compare_sides(hard_sigmoid, gap_inputs, {}) == ""


def test_a_wrong_constant_is_still_refuted_with_a_rounding_slack() -> None:
    hard_sigmoid = shipped("ax-hard_sigmoid_div6-rev")
    assert hard_sigmoid.exactness.value == "rounds-constants"
    (target,) = hard_sigmoid.target.nodes
    for alpha in (0.2, 0.16666):  # 1/5; and 1/6 cut at five digits, off by 4e-6 of x
        wrong_node = replace(target, params=(("alpha", alpha), ("beta", 0.5)))
        wrong = replace(hard_sigmoid, id=f"wrong-alpha-{alpha}", target=replace(hard_sigmoid.target, nodes=(wrong_node,)))
        assert refute(wrong) is not None, alpha


def test_rules_that_need_a_run_time_input_get_configs_and_wrong_ones_are_refuted() -> None:
    """`not is_const('x')` (a constant moved towards a value known only at run time) left
    the sampler no config at all, so the refuter passed every such rule unchecked."""
    needing = [r for r in load_rules(LIBRARY).rules if "not is_const('x')" in r.constraints]
    assert len(needing) >= 8
    assert [r.id for r in needing if not choose_configs(r)] == []
    through = shipped("ax-transpose_mul_const")
    (tc,) = (n for n in through.target.nodes if n.id == "tc")
    untransposed = replace(through.target, nodes=tuple(n for n in through.target.nodes if n.id != "tc"))
    untransposed = replace(untransposed, nodes=tuple(
        replace(n, inputs=("t0", "c")) if n.id == "r" else n for n in untransposed.nodes))
    wrong = replace(through, id="wrong-constant-not-transposed", target=untransposed)
    assert tc.op == "Transpose" and refute(wrong) is not None


def test_a_nullary_constant_does_not_round_the_refuters_float64_inputs() -> None:
    """ones(C) (a float32 constant, as export makes it) times a float64 input of the
    refuter stays float64: rounded, x * s + t and its depthwise conv differed by 3e-8 near a
    cancellation and the right rule was refuted."""
    ones = spec_by_name("ConstOnes").evaluate([], {"shape": (2,)})[0]
    s = np.array(-0.6894577587329396)
    (scaled,) = spec_by_name("Mul").evaluate([ones, s], {})
    assert scaled.dtype == np.float64 and scaled[0] == s
    assert refute(shipped("ax-affine_as_depthwise_conv")) is None


def test_every_shipped_rule_gets_refutation_configs() -> None:
    """Regrouping to 16- or 32-channel groups needs 16 or 32 channels, and a spatial mean two
    axes: draws of dims 1-4 and of one axis never met those rules' constraints."""
    assert [r.id for r in load_rules(LIBRARY).rules if not choose_configs(r)] == []


def test_a_regroup_that_misplaces_the_old_groups_is_refuted() -> None:
    """regroup(w; g/k, k) puts each filter in the wrong slice; it type-checks only where k
    divides g/k (2-channel groups widened to 8 need 16 groups, 32 channels)."""
    regroup = shipped("ax-conv_regroup_bias-to8")
    layout, conv = regroup.target.nodes
    factor = dict(layout.params)["factor"]
    misplaced = replace(layout, params=(("factor", factor), ("group", ParamExpr(f"group // {factor.expr}"))))
    wrong = replace(regroup, id="wrong-regroup-layout", target=replace(regroup.target, nodes=(misplaced, conv)))
    assert refute(regroup) is None
    assert refute(wrong) is not None


def test_a_spatial_mean_is_not_a_global_max() -> None:
    gap = shipped("ax-reduce_mean_spatial_as_gap")
    whole = node("n0", "MaxPool", "x", kernel_shape=ParamExpr("(shape('x')[2], shape('x')[3])"))  # a global max
    wrong = replace(gap, id="wrong-mean-as-max", target=replace(gap.target, nodes=(whole,)))
    assert refute(gap) is None
    assert refute(wrong) is not None
