"""What a proof covers (issue 19, item 6): any shape, or only the listed witness shapes.

`check-axioms` proves an axiom symbolically only at its listed configs, so a proof counts
for any shape only where it is given no shape and uses axioms established for every shape:
pure elementwise identities proved on one-element inputs. Everything else (a proof at the
witness shapes, axioms validated at configs, instances of those) covers the listed shapes.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from taso.opspecs.axioms import Axiom, cfg
from taso.substitutions.generate import cli
from taso.substitutions.generate._axiom_bank import _scalar_identity, shape_generic_axioms
from taso.substitutions.generate._prove import prove, prove_rule
from taso.substitutions.generate._verify import verify_rule
from taso.substitutions.rule import (
    Proof,
    ProofStatus,
    Rule,
    RuleLibrary,
    Scope,
    dump_rules,
    rule_from_json,
    rule_to_json,
)
from tests.helpers.rules import ANY, LIBRARY, node, rule

RLIMIT = 400_000


def _witness(r: Rule, shapes: dict) -> Rule:
    config = {"shapes": shapes, "bindings": {}, "positive": []}
    return replace(r, provenance=(("witness", json.dumps([config])),))


def _add_reassociated() -> Rule:
    """(x + y) + z = (z + y) + x: add_assoc and add_comm only."""
    r = rule("add-reassociated", "(x + y) + z = (z + y) + x", [("x", ANY), ("y", ANY), ("z", ANY)],
             [node("n0", "Add", "x", "y"), node("n1", "Add", "n0", "z")],
             [node("t0", "Add", "z", "y"), node("t1", "Add", "t0", "x")], [("n1", "t1")])
    return _witness(r, {"x": [2, 3], "y": [3], "z": [2, 3]})


def _scaled_matmul() -> Rule:
    """smul(x @ y, s) = x @ smul(y, s): an axiom validated at its configs only."""
    r = rule("smul-matmul", "smul(x @ y, s) = x @ smul(y, s)", [("x", ANY), ("y", ANY), ("s", ANY)],
             [node("n0", "MatMul", "x", "y"), node("n1", "ScalarMul", "n0", "s")],
             [node("t0", "ScalarMul", "y", "s"), node("t1", "MatMul", "x", "t0")], [("n1", "t1")])
    return _witness(r, {"x": [2, 3], "y": [3, 4], "s": []})


def test_elementwise_identities_are_established_for_every_shape() -> None:
    generic = shape_generic_axioms()
    assert {"add_assoc", "add_comm", "mul_assoc", "mul_add_distrib"} <= generic
    # a scalar, a per-channel or a conv premise: validated at configs only
    assert not generic & {"scalar_mul_is_mul", "scalar_mul_matmul", "conv_mul_channel", "conv_linear_input"}


def test_a_wrong_elementwise_identity_is_not_established() -> None:
    wrong = Axiom("relu_scale", "relu(x * y) = relu(x) * y", ("x", "y"),
                  lambda a, v, p: a("Relu", a("Mul", v["x"], v["y"])),
                  lambda a, v, p: a("Mul", a("Relu", v["x"]), v["y"]), (cfg({"x": (2,), "y": (2,)}),))
    assert not _scalar_identity(wrong)


def test_a_proof_with_no_shape_from_generic_axioms_covers_any_shape() -> None:
    result = prove(_add_reassociated(), rlimit=RLIMIT)
    assert result.status is ProofStatus.PROVED and result.scope is Scope.ANY_SHAPE


def test_a_proof_at_the_witness_shapes_covers_those_only() -> None:
    result = prove(_add_reassociated(), rlimit=RLIMIT, shapes={"x": (2, 3), "y": (3,), "z": (2, 3)})
    assert result.status is ProofStatus.PROVED and result.scope is Scope.LISTED_SHAPES


def test_a_proof_at_shapes_from_generic_axioms_is_widened() -> None:
    result = prove_rule(_add_reassociated(), rlimit=RLIMIT)
    assert result.status is ProofStatus.PROVED and result.scope is Scope.ANY_SHAPE


def test_a_proof_from_axioms_validated_at_configs_covers_the_listed_shapes() -> None:
    result = prove_rule(_scaled_matmul(), rlimit=RLIMIT)
    assert result.status is ProofStatus.PROVED and result.scope is Scope.LISTED_SHAPES


@pytest.mark.parametrize(("rule_id", "scope"), [("ax-add_assoc", Scope.ANY_SHAPE),
                                                 ("ax-conv_mul_channel", Scope.LISTED_SHAPES),
                                                 ("cv-fold_mul_conv", Scope.LISTED_SHAPES)])
def test_shipped_rules_record_their_scope(rule_id: str, scope: Scope) -> None:
    shipped = json.loads(LIBRARY.read_text())["rules"]
    data = next(r for r in shipped if r["id"] == rule_id)
    assert data["proof"]["scope"] == scope.value
    assert verify_rule(rule_from_json(data)).scope is scope


def test_scope_round_trips_and_old_files_read_as_listed_shapes() -> None:
    r = replace(_add_reassociated(), proof=Proof(ProofStatus.PROVED, scope=Scope.ANY_SHAPE))
    data = rule_to_json(r)
    assert rule_from_json(data).proof.scope is Scope.ANY_SHAPE
    del data["proof"]["scope"]  # type: ignore[attr-defined]
    assert rule_from_json(data).proof.scope is Scope.LISTED_SHAPES


def test_verify_counts_scopes_and_proof_time_percentiles(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rules.json"
    path.write_text(dump_rules(RuleLibrary((_add_reassociated(), _scaled_matmul()), ())))
    cli.main(["verify", str(path), "--json", "--rlimit", str(RLIMIT)])
    out = json.loads(capsys.readouterr().out)
    totals = out["totals"]
    assert totals["proved for any shape"] == 1 and totals["proved for listed shapes"] == 1
    assert 0 < totals["seconds_p50"] <= totals["seconds_p99"] <= totals["seconds_max"]
    assert {r["id"]: r["scope"] for r in out["rules"]} == {"add-reassociated": "any shape",
                                                          "smul-matmul": "listed shapes"}


def _converter_form(rule_id: str = "cv-fold_add_conv_bias"):  # noqa: ANN202
    from taso.substitutions.rule import load_rules

    found = next(r for r in load_rules(LIBRARY).rules if r.id == rule_id)
    assert "parametric" in dict(found.provenance) and found.proof.scope is Scope.LISTED_SHAPES
    return found


def test_verify_tries_the_general_proof_only_where_the_file_claims_any_shape(monkeypatch) -> None:  # noqa: ANN001
    """The general attempt of a parametric converter form runs to its limit (3-10 s) when
    its axioms are shape-guarded: on every rule, verify took 14 min for the library."""
    from taso.substitutions.generate import _prove

    shapes_given: list[bool] = []
    real = _prove.prove

    def spy(rule, **kwargs):  # noqa: ANN001, ANN202
        shapes_given.append(kwargs.get("shapes") is not None)
        return real(rule, **kwargs)

    monkeypatch.setattr(_prove, "prove", spy)
    check = verify_rule(_converter_form())
    assert check.verdict.value == "proved" and shapes_given and all(shapes_given)


def test_a_failed_general_attempt_counts_in_the_proof_time(monkeypatch) -> None:  # noqa: ANN001
    from taso.substitutions.generate import _prove

    rule_ = _converter_form()
    slow = _prove.ProofResult(ProofStatus.TIMEOUT, 5.0, (), "limit")
    real = _prove.prove
    monkeypatch.setattr(_prove, "prove", lambda r, **k: slow if k.get("shapes") is None and "only" not in k else real(r, **k))
    assert prove_rule(rule_).seconds >= 5.0
