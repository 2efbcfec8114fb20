"""The numeric witness does not trust the rule file's configs alone (issue 19, item 3):
`check_witness` also runs configs it draws itself near them, each with its own seed
derived from the rule id, so `verify` refutes a rule that is wrong at non-degenerate
shapes even when its file carries only degenerate witness configs.

The chain the issue describes: a wrong axiom listed only on 1x1 matrices (x @ y = y @ x)
passed `check-axioms`; its instances are then proved by `verify` (the instance check
regenerates them from the axiom) and their 1x1 witnesses agree. `_shipped` makes the
mutant count as a shipped axiom to replay that."""

from __future__ import annotations

import json

import pytest

import taso.substitutions.generate._verify as verify_module
from taso.opspecs.axioms import find_axiom
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._verify import Verdict, verify_rule
from taso.substitutions.generate._witness import (
    WitnessOutcome,
    check_witness,
    config_seed,
    drawn_configs,
    witness_configs,
)
from taso.substitutions.rule import Rule, rule_from_json

# As shipped: globalavgpool(x) = avgpool(x; kernel (1, 1)) gives another output shape where x
# is not (N, C, 1, 1); the applier refuses such a rewrite, so drawn configs skip those shapes.
SHAPE_BOUND_RULE = {
    "id": "ax-global_avgpool_as_avgpool-c2", "math": "globalavgpool(x) = avgpool(x; kernel (H, W))",
    "inputs": [["x", "any"]], "outputs": [["n0", "n0"]], "constraints": ["rank('x') == 4"],
    "exactness": "exact",
    "source": [{"id": "n0", "inputs": ["x"], "op": "GlobalAveragePool", "params": {}}],
    "target": [{"id": "n0", "inputs": ["x"], "op": "AveragePool",
                "params": {"kernel_shape": {"tuple": [1, 1]}}}],
    "proof": {"axioms_used": ["global_avgpool_as_avgpool"], "method": "axiom", "seconds": 0.0,
              "solver": "z3", "status": "proved", "witness_configs": 1},
    "provenance": {"axiom": "global_avgpool_as_avgpool", "method": "axiom", "witness": json.dumps(
        [{"bindings": {}, "positive": [], "shapes": {"x": [1, 3, 1, 1]}, "values": {}}])},
}


@pytest.fixture
def _shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier's axiom lookup also finds the mutants (as if they had been shipped)."""
    monkeypatch.setattr(verify_module, "find_axiom", find_axiom)


def _commuted_matmul() -> Rule:
    (rule, *_) = rules_from_axiom(find_axiom("bad_matmul_comm_1x1"))
    return rule


def _with_witness(data: dict, shapes: list[dict], constraints: list[str]) -> dict:
    configs = [{"bindings": {}, "positive": [], "shapes": s, "values": {}} for s in shapes]
    return {**data, "constraints": constraints,
            "provenance": {**data["provenance"], "witness": json.dumps(configs)}}


def test_the_file_witness_alone_accepts_the_degenerate_rule() -> None:
    rule = _commuted_matmul()
    assert all(d == 1 for c in witness_configs(rule) for s in c["shapes"].values() for d in s[-2:])
    assert check_witness(rule, draws=0).ok


@pytest.mark.usefixtures("_shipped")
def test_verify_refutes_a_rule_wrong_only_beyond_its_degenerate_witness() -> None:
    rule = _commuted_matmul()
    witness = check_witness(rule)
    assert not witness.ok and witness.outcome is WitnessOutcome.DIFFER
    assert "drawn config" in witness.detail
    check = verify_rule(rule)
    assert check.verdict is Verdict.REFUTED and check.counterexample
    assert "claimed a proof" in check.detail  # the instance check alone proves it
    namespace: dict = {}
    exec(check.counterexample.replace("print(", "result = ("), namespace)  # noqa: S102
    assert not namespace["result"].ok


def test_drawn_shapes_where_the_outputs_differ_in_shape_refute_the_rule() -> None:
    """A rule whose sides give different shapes where its constraints hold is wrong as
    stated: its constraints miss a condition (the global_avgpool_as_avgpool rules did), and
    the applier refuses a contradicting shape only where both shapes are known."""
    rule = rule_from_json(SHAPE_BOUND_RULE)
    drawn = drawn_configs(rule)
    assert any(c["shapes"]["x"][2:] != [1, 1] for c in drawn)
    result = check_witness(rule)
    assert not result.ok and result.outcome is WitnessOutcome.DIFFER and "shape" in result.detail


def test_free_shapes_get_three_drawn_configs_with_a_non_degenerate_one() -> None:
    # the same rule, now with a GlobalAveragePool on both sides: true at every shape
    data = json.loads(json.dumps(SHAPE_BOUND_RULE))
    data["target"] = data["source"]
    rule = rule_from_json(_with_witness(data, [{"x": [1, 3, 1, 1]}], ["rank('x') == 4"]))
    drawn = drawn_configs(rule)
    assert len(drawn) == 3 and drawn == drawn_configs(rule)
    assert any(all(d >= 2 for d in c["shapes"]["x"]) for c in drawn)
    assert all(len(c["shapes"]["x"]) == 4 for c in drawn)  # the constraint holds
    result = check_witness(rule)
    assert result.ok and result.configs == 1 and result.drawn == 3


def test_pinned_shapes_are_kept() -> None:
    rule = rule_from_json(_with_witness(SHAPE_BOUND_RULE, [{"x": [1, 3, 1, 1]}],
                               ["shape('x') == (1, 3, 1, 1)"]))
    assert drawn_configs(rule) == []
    assert check_witness(rule).ok


def test_each_config_has_its_own_seed_from_the_rule_id() -> None:
    rule = rule_from_json(SHAPE_BOUND_RULE)
    other = rule_from_json({**SHAPE_BOUND_RULE, "id": "another"})
    seeds = {config_seed(rule, i) for i in range(4)}
    assert len(seeds) == 4
    assert config_seed(rule, 0) == config_seed(rule, 0) != config_seed(other, 0)
