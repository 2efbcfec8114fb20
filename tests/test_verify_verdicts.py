"""`taso-gen verify` gives every rule a verdict and never stops on one bad rule (issue 19,
Build item 5); it says when the file was made from other specs (Build item 3)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from taso.substitutions.generate import cli
from taso.substitutions.generate._pipeline import spec_set_hash
from taso.substitutions.rule import Rule, RuleLibrary, dump_rules, load_rules
from tests.helpers.rules import ANY, LIBRARY, node, rule

GOOD_ID = "gen-conv-027f3f0361"  # (v0 + v1) + v1 = v0 + (v1 + v1), proved by the axioms


def _witness(r: Rule, shapes: dict, positive: tuple[str, ...] = ()) -> Rule:
    config = {"shapes": shapes, "bindings": {}, "positive": list(positive)}
    return replace(r, provenance=(("witness", json.dumps([config])),))


def _good() -> Rule:
    return next(r for r in load_rules(LIBRARY).rules if r.id == GOOD_ID)


def _ill_typed() -> Rule:
    """The target transposes a rank-2 tensor with a rank-3 permutation."""
    r = rule("ill-typed-transpose", "relu(x) = relu(transpose(x, (0, 1, 2)))", [("x", ANY)],
             [node("n0", "Relu", "x")],
             [node("t0", "Transpose", "x", perm=(0, 1, 2)), node("t1", "Relu", "t0")],
             [("n0", "t1")])
    return _witness(r, {"x": [2, 3]})


def _wrong() -> Rule:
    """relu(x + y) = relu(x) + relu(y): false."""
    r = rule("wrong-relu-add", "relu(x + y) = relu(x) + relu(y)", [("x", ANY), ("y", ANY)],
             [node("n0", "Add", "x", "y"), node("n1", "Relu", "n0")],
             [node("t0", "Relu", "x"), node("t1", "Relu", "y"), node("t2", "Add", "t0", "t1")],
             [("n1", "t2")])
    return _witness(r, {"x": [2, 3], "y": [2, 3]})


def _unprovable() -> Rule:
    """relu(s * x) = s * relu(x): false, but the witness draws a positive s."""
    r = rule("wrong-relu-scale", "relu(s * x) = s * relu(x)", [("s", ANY), ("x", ANY)],
             [node("n0", "Mul", "s", "x"), node("n1", "Relu", "n0")],
             [node("t0", "Relu", "x"), node("t1", "Mul", "s", "t0")],
             [("n1", "t1")])
    return _witness(r, {"s": [2, 3], "x": [2, 3]}, positive=("s",))


def _write(tmp_path: Path, *rules: Rule, provenance: tuple = ()) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(dump_rules(RuleLibrary(rules, provenance)))
    return path


def _verify_json(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = cli.main(["verify", str(path), "--json", "--rlimit", "400000"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_every_rule_gets_a_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _good(), _ill_typed(), _wrong())
    code, report, err = _verify_json(path, capsys)
    assert code == cli.EXIT_FAILED
    assert "Traceback" not in err
    verdicts = {r["id"]: r["verdict"] for r in report["rules"]}
    assert verdicts == {GOOD_ID: "proved", "ill-typed-transpose": "ill-typed",
                        "wrong-relu-add": "refuted"}
    totals = report["totals"]
    assert (totals["rules"], totals["proved"], totals["ill-typed"], totals["refuted"]) == (3, 1, 1, 1)


def test_ill_typed_rule_says_which_side_and_why(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, report, _ = _verify_json(_write(tmp_path, _ill_typed()), capsys)
    (entry,) = report["rules"]
    assert "target" in entry["detail"] and "permutation" in entry["detail"]


def test_refuted_rule_carries_a_runnable_counterexample(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _, report, _ = _verify_json(_write(tmp_path, _wrong()), capsys)
    (entry,) = report["rules"]
    assert entry["verdict"] == "refuted" and "difference" in entry["detail"]
    namespace: dict = {}
    exec(entry["counterexample"], namespace)  # noqa: S102 - the reproducer is ours
    assert not namespace["check_witness"](namespace["rule"]).ok


def test_a_wrong_rule_whose_own_witness_passes_is_refuted_by_the_verifiers_search(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """relu(s * x) = s * relu(x) passed its file's witness (s drawn positive) and stayed
    unknown; the verifier's own configs and adversarial values refute it (issue 19, item 2)."""
    code, report, _ = _verify_json(_write(tmp_path, _unprovable()), capsys)
    (entry,) = report["rules"]
    assert code == cli.EXIT_FAILED
    assert entry["verdict"] == "refuted" and entry["witness"] and entry["counterexample"]


def _true_but_unprovable() -> Rule:
    """tanh(x) = sigmoid(2x) - sigmoid(-2x): true, but no axiom relates sigmoid and tanh."""
    r = rule("tanh-as-sigmoid", "tanh(x) = sigmoid(2x) - sigmoid(-2x)", [("x", ANY)],
             [node("n0", "Tanh", "x")],
             [node("t0", "Add", "x", "x"), node("t1", "Sub", "x", "x"), node("t2", "Sub", "t1", "t0"),
              node("t3", "Sigmoid", "t0"), node("t4", "Sigmoid", "t2"), node("t5", "Sub", "t3", "t4")],
             [("n0", "t5")])
    return _witness(r, {"x": [2, 3]})


def test_unproved_rule_the_verifier_cannot_refute_is_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = _verify_json(_write(tmp_path, _true_but_unprovable()), capsys)
    (entry,) = report["rules"]
    assert code == cli.EXIT_FAILED
    assert entry["verdict"] == "unknown" and entry["witness"] and entry["proof"] != "proved"


def test_proof_time_is_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    axiom_rule = next(r for r in load_rules(LIBRARY).rules if r.proof.method == "axiom")
    _, report, _ = _verify_json(_write(tmp_path, _good(), axiom_rule), capsys)
    assert all(r["seconds"] > 0 for r in report["rules"]), report["rules"]
    assert report["totals"]["seconds"] > 0


def test_text_output_names_each_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["verify", str(_write(tmp_path, _good(), _ill_typed(), _wrong())),
                     "--rlimit", "400000"])
    out = capsys.readouterr()
    assert code == cli.EXIT_FAILED and "Traceback" not in out.err
    assert "ill-typed ill-typed-transpose" in out.out and "refuted wrong-relu-add" in out.out
    assert f"proved {GOOD_ID}" not in out.out  # only failures are listed


def test_all_proved_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = _verify_json(_write(tmp_path, _good()), capsys)
    assert code == cli.EXIT_OK and report["totals"]["proved"] == 1


# ----- the spec-set hash -----------------------------------------------------------------


def test_a_file_from_other_specs_is_flagged(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _good(), provenance=(("spec_set_hash", "0000000000000000"),))
    code, report, err = _verify_json(path, capsys)
    assert code == cli.EXIT_OK  # a warning, not a failure: the rules themselves are re-proved
    assert report["spec_set"] == {"file": "0000000000000000", "loaded": spec_set_hash(),
                                  "matches": False}
    assert "warning" in err and "0000000000000000" in err and spec_set_hash() in err


def test_a_file_from_the_loaded_specs_is_not_flagged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _good(), provenance=(("spec_set_hash", spec_set_hash()),))
    _, report, err = _verify_json(path, capsys)
    assert report["spec_set"]["matches"] is True and "warning" not in err
