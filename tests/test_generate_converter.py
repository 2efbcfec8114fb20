"""Converter-form rules: converter axioms validate, forms prove, and real exported models match."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache

import pytest

from benchmarks.models import MODELS, Size
from taso._onnx_import import import_model
from taso.opspecs.axioms.converter import AXIOMS as CONVERTER_AXIOMS
from taso.opspecs.axioms.validate import validate_axiom
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._converter_rules import converter_rules
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import load_rules, rule_to_json
from tests.helpers.rules import LIBRARY


@cache
def _library() -> dict:
    return {r.id: r for r in load_rules(LIBRARY).rules}


@cache
def _model(name: str):  # noqa: ANN202
    return import_model(MODELS[name].build(Size.SMALL))


@pytest.mark.parametrize("axiom", CONVERTER_AXIOMS, ids=lambda a: a.name)
def test_converter_axioms_validate(axiom) -> None:
    assert validate_axiom(axiom).ok


def test_every_converter_form_proves() -> None:
    counts: Counter = Counter()
    rules = converter_rules(2_000_000, counts)
    assert counts["converter forms"] == counts["converter forms proved"] == len(rules)
    # shipped, maybe deduplicated against an axiom rule with the same patterns, whose witness
    # shape guards may be stricter: compare the patterns, not the constraints
    shipped = {_patterns(r) for r in _library().values()}
    assert all(_patterns(r) in shipped for r in rules)


def _patterns(rule) -> str:  # noqa: ANN001
    data = rule_to_json(rule)
    return json.dumps([data[k] for k in ("inputs", "source", "target", "outputs")], sort_keys=True)


def test_concrete_config_axioms_emit_rules() -> None:
    """The axioms that hold only at fixed parameters or shapes give rules again."""
    ids = set(_library())
    for prefix in ("ax-bn_fold_conv", "ax-gemm_as_matmul", "ax-transpose_inverse",
                   "ax-transpose_compose", "ax-hard_sigmoid_decompose", "ax-split_concat",
                   "ax-conv_enlarge_kernel", "ax-div_as_mul-rev", "ax-div_as_mul"):
        assert any(i.startswith(prefix) for i in ids), prefix


def test_branching_builders_stay_concrete() -> None:
    """Gemm's builder branches on transA/transB: no (unsound) parametric rule."""
    axiom = next(a for a in CONVERTER_AXIOMS if a.name == "gemm_matmul_add")
    assert all("-c" in r.id for r in rules_from_axiom(axiom))


@pytest.mark.parametrize("name, rule_id, at_least", [
    ("mobilenetv3_converted", "cv-fold_mul_conv", 20),
    ("mobilenetv3_converted", "cv-hard_swish_mul_div6", 10),
    ("mobilenetv3_converted", "cv-matmul_add_to_gemm", 1),
    ("mobilenetv3_converted", "ax-div_as_mul", 10),
    ("crnn_converted", "cv-fold_mul_conv", 5),
    ("crnn_converted", "cv-hard_swish_mul_div6", 5),
])
def test_converter_models_match(name: str, rule_id: str, at_least: int) -> None:
    graph, rule = _model(name), _library()[rule_id]
    matches = find_matches(graph, rule)
    assert len(matches) >= at_least
    assert apply(graph, rule, matches[0]) is not None


@pytest.mark.parametrize("name", ["mobilenetv3_converted", "crnn_converted"])
def test_mul_then_add_fold_chain(name: str) -> None:
    """Conv -> Mul -> Add (a converter's BatchNorm): Mul folds, then the Add becomes a bias."""
    graph, lib = _model(name), _library()
    folded = apply(graph, lib["cv-fold_mul_conv"], find_matches(graph, lib["cv-fold_mul_conv"])[0])
    assert folded is not None
    assert find_matches(folded, lib["cv-fold_add_conv"])
