"""The shipped rule library: loads, every rule proved with a passing witness; a sample re-proves."""

from __future__ import annotations

import pytest

from taso.substitutions.generate._verify import verify_rule
from taso.substitutions.rule import ProofStatus, RuleError, load_rules
from tests.helpers.rules import LIBRARY


def _library():
    return load_rules(LIBRARY)


def test_library_loads_and_all_proved() -> None:
    library = _library()
    assert library.rules
    assert all(r.proof.status is ProofStatus.PROVED for r in library.rules)
    assert all(r.proof.witness_configs > 0 for r in library.rules)
    assert "stage_counts" in dict(library.provenance)


def test_library_covers_converter_rules() -> None:
    ids = {r.id for r in _library().rules}
    for prefix in ("ax-hard_swish_decompose", "ax-conv_mul_channel", "ax-bn_fold_conv",
                   "ax-gemm_as_matmul", "ax-transpose_inverse",
                   "cv-fold_mul_conv", "cv-fold_add_conv", "ax-conv_regroup",
                   "cv-hard_swish_mul_div6", "cv-matmul_add_to_gemm"):
        assert any(i.startswith(prefix) for i in ids), prefix


def test_library_holds_each_rule_once() -> None:
    # the BatchNorm fold was once shipped twice (an axiom rule and an equal converter form)
    from taso.substitutions.generate._pipeline import dedupe

    rules = list(_library().rules)
    assert len(dedupe(rules)) == len(rules)


def test_sample_reproves() -> None:
    rules = _library().rules
    sample = rules[:: max(1, len(rules) // 12)]
    failed = [c for c in (verify_rule(r) for r in sample) if not c.ok]
    assert not failed, failed


@pytest.mark.slow
def test_full_library_reproves() -> None:
    failed = [c for c in (verify_rule(r) for r in _library().rules) if not c.ok]
    assert not failed, failed


@pytest.mark.parametrize("mutation, message", [
    (lambda r: r.update(constraints=["nope > 1"]), "unbound"),
    (lambda r: r["source"][0].update(op="NoSuchOp"), "unknown op"),
    (lambda r: r["source"][0].update(inputs=[]), "inputs"),
])
def test_loading_validates(mutation, message) -> None:
    import json

    from taso.substitutions.rule import rule_from_json, rule_to_json

    data = json.loads(json.dumps(rule_to_json(_library().rules[0])))
    mutation(data)
    with pytest.raises(RuleError, match=message):
        rule_from_json(data)
