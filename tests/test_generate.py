"""Rule generator: determinism, stage counts, rediscovery, refutation of wrong rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taso.substitutions.generate import cli
from taso.substitutions.generate._enumerate import Leaf, Role, Universe
from taso.substitutions.generate._fingerprint import PRIMES, FieldEvaluator
from taso.substitutions.generate._pipeline import Settings, generate_library
from taso.substitutions.generate._prove import DEFAULT_RLIMIT, GENERATE_RLIMIT, prove
from taso.substitutions.generate._witness import check_witness
from taso.substitutions.rule import (
    Pattern,
    PatternInput,
    PatternNode,
    ProofStatus,
    Rule,
    RuleLibrary,
    dump_rules,
    load_rules,
)

SMALL = ("MatMul", "Add", "Transpose")


def _run(tmp_path, workers: int, name: str) -> str:
    out = tmp_path / name
    code = cli.main(["generate", "--ops", *SMALL, "--max-ops", "2", "--workers", str(workers),
                     "--no-axioms", "-o", str(out)])
    assert code == 0
    return out.read_text()


def test_deterministic_across_runs_and_workers(tmp_path) -> None:
    one = _run(tmp_path, 1, "a.json")
    assert one == _run(tmp_path, 1, "b.json")
    assert one == _run(tmp_path, 2, "c.json")


def test_stage_counts_and_provenance(tmp_path, capsys) -> None:
    data = json.loads(_run(tmp_path, 1, "a.json"))
    summary = capsys.readouterr().err
    assert "wall" in summary and "CPU" in summary and "peak RSS" in summary
    counts = data["provenance"]["stage_counts"]
    for stage in ("enumerated", "fingerprint buckets", "candidate pairs", "after transitivity",
                  "after common subgraph", "after common supergraph", "after smaller rules",
                  "after leaf merging", "after renaming", "proved"):
        assert stage in counts
    assert data["provenance"]["spec_set_hash"] and data["provenance"]["generator_version"]
    assert data["provenance"]["settings"]["rlimit"] == GENERATE_RLIMIT
    assert all(r["proof"]["status"] == "proved" for r in data["rules"])


def test_default_rlimits() -> None:
    """`generate` defaults to the cheaper limit (the 3-op run in minutes); `verify` and
    `merge` to at least the limit the shipped library was proved under, so it re-proves."""
    import taso.substitutions as package

    shipped = load_rules(Path(package.__file__).parent / "library" / "rules.json")
    proved_under = dict(shipped.provenance)["rlimit"]
    parser = cli.build_parser()
    assert parser.parse_args(["generate", "-o", "f"]).rlimit == GENERATE_RLIMIT == 250_000
    assert Settings().rlimit == GENERATE_RLIMIT
    assert parser.parse_args(["verify", "f"]).rlimit >= proved_under == DEFAULT_RLIMIT
    assert parser.parse_args(["merge", "f", "-o", "g"]).rlimit >= proved_under
    assert GENERATE_RLIMIT < DEFAULT_RLIMIT


@pytest.mark.slow
def test_rediscovers_matmul_merge_in_taso_universe() -> None:
    """TASO's matmul universe, restricted to MatMul and Concat: concat(a @ b, a @ c) =
    a @ concat(b, c) is found (tests/test_generate_rediscovery.py has the others)."""
    library, _ = generate_library(Settings(max_ops=3, ops=("MatMul", "Concat")),
                                  with_axioms=False)
    merges = [r for r in library.rules
              if sorted(n.op for n in r.source.nodes) == ["Concat", "MatMul"]
              and sorted(n.op for n in r.target.nodes) == ["Concat", "MatMul", "MatMul"]]
    assert any(len({i.name for i in r.inputs}) == 3 for r in merges), [r.math for r in merges]


def _wrong_rule() -> Rule:
    """relu(x + y) = relu(x) + relu(y): false."""
    src = Pattern((PatternNode("n0", "Add", ("x", "y")), PatternNode("n1", "Relu", ("n0",))))
    tgt = Pattern((PatternNode("n0", "Relu", ("x",)), PatternNode("n1", "Relu", ("y",)),
                   PatternNode("n2", "Add", ("n0", "n1"))))
    witness = json.dumps([{"shapes": {"x": [2, 3], "y": [2, 3]}, "bindings": {}}])
    return Rule("wrong-relu-add", "relu(x+y) = relu(x)+relu(y)",
                (PatternInput("x"), PatternInput("y")), src, tgt, (("n1", "n2"),),
                provenance=(("witness", witness),)).validate()


def test_wrong_rule_refuted_by_prover_and_witness() -> None:
    rule = _wrong_rule()
    result = prove(rule)
    assert result.status is not ProofStatus.PROVED
    witness = check_witness(rule)
    assert not witness.ok and "check_witness" in witness.reproducer


def _wrong_transpose_product() -> Rule:
    """transpose(a @ b) = transpose(a) @ transpose(b): false (the order must swap)."""
    t = (("perm", (1, 0)),)
    src = Pattern((PatternNode("n0", "MatMul", ("a", "b")),
                   PatternNode("n1", "Transpose", ("n0",), t)))
    tgt = Pattern((PatternNode("n0", "Transpose", ("a",), t),
                   PatternNode("n1", "Transpose", ("b",), t),
                   PatternNode("n2", "MatMul", ("n0", "n1"))))
    witness = json.dumps([{"shapes": {"a": [3, 3], "b": [3, 3]}, "bindings": {}}])
    return Rule("wrong-transpose-product", "T(a @ b) = T(a) @ T(b)",
                (PatternInput("a"), PatternInput("b")), src, tgt, (("n1", "n2"),),
                provenance=(("witness", witness),)).validate()


def _wrong_merge_axis() -> Rule:
    """concat(x @ w1, x @ w2, axis 0) = x @ concat(w1, w2, axis 1): the wrong axis."""
    src = Pattern((PatternNode("n0", "MatMul", ("x", "w1")), PatternNode("n1", "MatMul", ("x", "w2")),
                   PatternNode("n2", "Concat", ("n0", "n1"), (("axis", 0),))))
    tgt = Pattern((PatternNode("n0", "Concat", ("w1", "w2"), (("axis", 1),)),
                   PatternNode("n1", "MatMul", ("x", "n0"))))
    witness = json.dumps([{"shapes": {"x": [4, 4], "w1": [4, 4], "w2": [4, 4]}, "bindings": {}}])
    return Rule("wrong-merge-axis", "concat(x@w1, x@w2, 0) = x @ concat(w1, w2, 1)",
                (PatternInput("x"), PatternInput("w1"), PatternInput("w2")), src, tgt,
                (("n2", "n1"),), provenance=(("witness", witness),)).validate()


@pytest.mark.parametrize("make", [_wrong_rule, _wrong_transpose_product, _wrong_merge_axis])
def test_verify_rejects_wrong_rules(tmp_path, capsys, make) -> None:  # noqa: ANN001
    bad = tmp_path / "bad.json"
    bad.write_text(dump_rules(RuleLibrary((make(),))))
    assert cli.main(["verify", str(bad), "--json", "--rlimit", "2000000"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["ok"] == 0


def test_verify_exit_codes(tmp_path) -> None:
    good = tmp_path / "good.json"
    good.write_text(_run(tmp_path, 1, "g.json"))
    assert cli.main(["verify", str(good)]) == 0
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert cli.main(["verify", str(broken)]) == 2


def test_field_semantics_exact_and_uninterpreted() -> None:
    ev = FieldEvaluator(PRIMES[0], 7)
    x = ev.random_tensor(__import__("numpy").random.default_rng(0), (2, 3))
    (y,) = ev.evaluate("Div", [ev.evaluate("Mul", [x, x], {})[0], x], {})
    assert (y == x).all()
    relu = ev.evaluate("Relu", [x], {})[0]
    assert relu.shape == x.shape and not (relu == x).all()


@pytest.mark.parametrize("shape", [(4, 4)])
def test_universe_leaves_are_typed(shape) -> None:
    u = Universe("u", ("Add",), (Leaf("a", shape, Role.ACTIVATION), Leaf("w", shape, Role.WEIGHT)))
    assert {leaf.role for leaf in u.leaves} == {Role.ACTIVATION, Role.WEIGHT}


def test_renaming_puts_interchangeable_leaves_first() -> None:
    """`relu(y) = relu(relu(y))` and `relu(z) = relu(relu(z))` are one pair; `x`, `y`
    in `x * y` are not merged with a lone leaf of another kind."""
    from taso.substitutions.generate._enumerate import Graph, Node
    from taso.substitutions.generate._prune import canonical_pair

    universe = Universe("u", ("Relu", "Mul"), (Leaf("x", (2, 2), Role.ACTIVATION), Leaf("y", (2, 2), Role.ACTIVATION),
                                               Leaf("z", (2, 2), Role.ACTIVATION), Leaf("w", (2, 2), Role.WEIGHT)))

    def relus(leaf: int, count: int) -> Graph:
        nodes = tuple(Node((0, 0), "Relu", (), (leaf if k == 0 else 3 + k,)) for k in range(count))
        return Graph(nodes, (3 + count,))

    on_y = canonical_pair(universe, relus(1, 1), relus(1, 2))
    assert on_y and on_y == canonical_pair(universe, relus(2, 1), relus(2, 2)) == canonical_pair(
        universe, relus(0, 1), relus(0, 2))
    assert on_y != canonical_pair(universe, relus(3, 1), relus(3, 2))  # the weight is another kind
