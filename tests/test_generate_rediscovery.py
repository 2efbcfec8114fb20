"""The generator rediscovers TASO's known rewrites from the axioms alone.

Each test enumerates a focused universe (just the operators and tensors the rewrite
needs), so the whole pipeline (fingerprints, pruning, Z3 proof, numeric witness) runs in
seconds, and looks for the proved rule by the operators on its two sides.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from taso.opspecs import spec_by_name
from taso.substitutions.generate._enumerate import Leaf, Role, Universe
from taso.substitutions.generate._pipeline import Settings, generate
from taso.substitutions.generate._universes import CHANNEL
from taso.substitutions.generate._witness import check_witness, run_pattern, witness_configs
from taso.substitutions.rule import Pattern, Rule

A, W = Role.ACTIVATION, Role.WEIGHT
RLIMIT = 250_000
CONV_1 = (("Conv", "strides", ((1, 1),)), ("Conv", "activation", ("none",)),
          ("Conv", "group", (1,)))
X = Leaf("x", (1, 2, 3, 3), A)


def _ops(pattern: Pattern) -> Counter:
    return Counter(n.op for n in pattern.nodes)


def _sides(rule: Rule) -> set[frozenset]:
    return {frozenset(_ops(rule.source).items()), frozenset(_ops(rule.target).items())}


def _rules(universe: Universe, max_ops: int) -> list[Rule]:
    library, counts = generate(Settings(max_ops=max_ops, rlimit=RLIMIT), universes=(universe,))
    assert counts["proved"] == len(library.rules) > 0
    return list(library.rules)


def _found(rules: list[Rule], one: dict[str, int], other: dict[str, int]) -> list[Rule]:
    want = {frozenset(one.items()), frozenset(other.items())}
    return [r for r in rules if _sides(r) == want]


def test_matmul_merge_shared_input() -> None:
    """concat(x @ w1, x @ w2) = x @ concat(w1, w2)."""
    universe = Universe("mm-merge", ("MatMul", "Concat"),
                        (Leaf("x", (4, 4), A), Leaf("w1", (4, 4), W), Leaf("w2", (4, 4), W)),
                        param_values=(("Concat", "axis", (1,)),))
    found = _found(_rules(universe, 3), {"MatMul": 2, "Concat": 1}, {"Concat": 1, "MatMul": 1})
    assert any({i.name for i in r.inputs} == {"x", "w1", "w2"} for r in found)


def test_conv_merge_shared_input() -> None:
    """(conv(x, w1), conv(x, w2)) = split(conv(x, concat(w1, w2, 0)), 1)."""
    universe = Universe("conv-merge", ("Conv", "Concat", "Split"),
                        (X, Leaf("w1", (2, 2, 3, 3), W), Leaf("w2", (2, 2, 3, 3), W)),
                        param_values=(*CONV_1, ("Conv", "pads", ((1, 1, 1, 1),)),
                                      ("Concat", "axis", (0,)), ("Split", "axis", (1,))))
    found = _found(_rules(universe, 3), {"Conv": 2}, {"Concat": 1, "Conv": 1, "Split": 1})
    assert found and all(len(r.outputs) == 2 for r in found)


def test_enlarge_one_by_one_kernel() -> None:
    """conv(x, w1x1; pads 0) = conv(x, enlarge(w1x1, 3x3); pads 1): the step that lets a 1x1
    conv merge with a 3x3 sibling (with the conv merge above, as TASO composes them)."""
    universe = Universe("enlarge", ("Conv", "Enlarge"), (X, Leaf("w", (2, 2, 1, 1), W)),
                        param_values=CONV_1)
    found = _found(_rules(universe, 2), {"Conv": 1}, {"Conv": 1, "Enlarge": 1})
    assert found
    pads = {dict(n.params)["pads"] for r in found for n in (*r.source.nodes, *r.target.nodes)
            if n.op == "Conv"}
    assert len(pads) == 2 or any("parametric" in dict(r.provenance) for r in found)


def _one(found: list[Rule], channels: int) -> Rule:
    """The found rule over x, w and ``channels`` of the per-channel leaves k and t. The two
    have the same shape, so which name a rule uses is up to pruning (renaming)."""
    matching = [r for r in found if {i.name for i in r.inputs} >= {"x", "w"}
                and len({i.name for i in r.inputs} & {"k", "t"}) == channels == len(r.inputs) - 2]
    assert matching, [r.math for r in found]
    return matching[0]


def _channel(rule: Rule) -> str:
    return next(i.name for i in rule.inputs if i.name in ("k", "t"))


def _folded_side(rule: Rule) -> tuple[Pattern, str]:
    """The side with the Reshape (the folded form) and its output."""
    if any(n.op == "Reshape" for n in rule.target.nodes):
        return rule.target, rule.outputs[0][1]
    return rule.source, rule.outputs[0][0]


def _run_folded(rule: Rule, env: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    side, out = _folded_side(rule)
    bindings = witness_configs(rule)[0].get("bindings", {})
    values = run_pattern(side, env, {k: tuple(v) if isinstance(v, list) else v
                                     for k, v in bindings.items()})
    return {"out": values[out], **{n.op: values[n.id] for n in side.nodes}}


def _scale_input(rule: Rule) -> str:
    """The input reshaped to (M, 1, 1, 1), i.e. that scales the weight."""
    side, _ = _folded_side(rule)
    return next(n.inputs[0] for n in side.nodes
                if n.op == "Reshape" and dict(n.params)["shape"] == (-1, 1, 1, 1))


def _batchnorm_of_conv(rng: np.random.Generator) -> tuple[dict, np.ndarray]:
    """x, w, BN's per-channel scale k and shift t (as `bn_decompose` writes them), and bn(conv(x, w))."""
    x, w = rng.uniform(-2, 2, (1, 2, 2, 2)), rng.uniform(-2, 2, (3, 2, 1, 1))
    s, beta, mean = (rng.uniform(-2, 2, 3) for _ in range(3))
    var, eps = rng.uniform(0.5, 2, 3), 1e-5
    conv = spec_by_name("Conv").evaluate([x, w], {})[0]
    bn = spec_by_name("BatchNormalization").evaluate([conv, s, beta, mean, var],
                                                       {"epsilon": eps})[0]
    k = s / np.sqrt(var + eps)
    values = {"x": x, "w": w, "k": k.reshape(3, 1, 1), "t": (beta - mean * k).reshape(3, 1, 1)}
    return values, bn


def test_batchnorm_folding_steps() -> None:
    """BatchNorm folding from the per-channel universe (`CHANNEL`, 3 ops): with ``bn(y) =
    y * k + t`` (axiom `bn_decompose`), the generator finds and proves the two steps
    ``conv(x, w) * k = conv(x, w * reshape(k, (M,1,1,1)))`` and ``conv(x, w') + t =
    conv(x, w', reshape(t, (M,)))``; chained on BN's own k and t they give bn(conv(x, w))."""
    rules = _rules(CHANNEL, 3)
    scale = _one(_found(rules, {"Conv": 1, "Mul": 1}, {"Conv": 1, "Mul": 1, "Reshape": 1}), 1)
    shift = _one(_found(rules, {"Conv": 1, "Add": 1}, {"Conv": 1, "Reshape": 1}), 1)
    assert "conv_mul_channel_nobias" in scale.proof.axioms_used
    assert "conv_bias_add" in shift.proof.axioms_used
    assert check_witness(scale).ok and check_witness(shift).ok
    values, bn = _batchnorm_of_conv(np.random.default_rng(0))
    scaled = _run_folded(scale, {"x": values["x"], "w": values["w"], _channel(scale): values["k"]})
    folded = _run_folded(shift, {"x": values["x"], "w": scaled["Mul"],
                                 _channel(shift): values["t"]})["out"]
    np.testing.assert_allclose(folded, bn, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_batchnorm_folding_one_rule() -> None:
    """The 4-op run of `CHANNEL` finds the fold as one rule (about 4 minutes on 2 cores):
    ``conv(x, w) * k + t = conv(x, w * reshape(k, (M,1,1,1)), reshape(t, (M,)))``."""
    found = _found(_rules(CHANNEL, 4), {"Conv": 1, "Mul": 1, "Add": 1},
                   {"Conv": 1, "Mul": 1, "Reshape": 2})
    fold = _one(found, 2)
    assert check_witness(fold).ok
    values, bn = _batchnorm_of_conv(np.random.default_rng(1))
    scale = _scale_input(fold)
    shift = "t" if scale == "k" else "k"
    env = {"x": values["x"], "w": values["w"], scale: values["k"], shift: values["t"]}
    np.testing.assert_allclose(_run_folded(fold, env)["out"], bn, rtol=1e-9, atol=1e-9)


def test_universe_refuses_impossible_arity() -> None:
    with pytest.raises(ValueError, match="arity"):
        Universe("bad", ("Conv",), (X,), arities=(("Conv", (4,)),))
