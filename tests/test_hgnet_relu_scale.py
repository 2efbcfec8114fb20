"""A positive scalar scale moves backward through Relu: ``relu(x) * s = relu(x * s)`` for
s > 0 only (PP-HGNetV2's learnable affine after each Relu; moved before the Relu, the scale
folds into the conv that precedes it, so ORT keeps the blocked layout across the block).

The sign is a value condition, which neither an axiom's shape condition nor an
uninterpreted Z3 formula can state, so it is carried three ways and each is checked here:
the axiom is validated with s drawn positive (and is false without that), its rules carry
``0 < value('s') <= f32 max`` as a match-time constraint (the verifier's refuter finds a
counterexample once it is removed), and the prover's axiom bank leaves the axiom out (else
it would prove ``relu(x) * s = relu(x * s)`` for every scalar s).
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
from taso.substitutions.generate._axiom_bank import axiom_bank
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._prove import prove
from taso.substitutions.generate._refute import refute
from taso.substitutions.matching import find_matches
from taso.substitutions.rule import ProofStatus, Rule
from tests.helpers.graphs import make_graph

NAME = "relu_scale_positive"
RLIMIT = 400_000


def _rules() -> dict[str, Rule]:
    return {r.id: r for r in rules_from_axiom(find_axiom(NAME))}


def _unsigned(rule: Rule) -> Rule:
    """The rule without its sign constraint (its shape constraints kept)."""
    kept = tuple(c for c in rule.constraints if "value('s')" not in c)
    assert kept != rule.constraints
    return replace(rule, id=f"{rule.id}-unsigned", constraints=kept)


def test_the_axiom_holds_for_a_positive_scale_and_not_for_any_scale() -> None:
    axiom = find_axiom(NAME)
    report = validate_axiom(axiom)
    assert all(c.status is Status.PASSED for c in report.checks), report
    unsigned = replace(axiom, positive=frozenset())
    assert check_symbolic(unsigned, 0).status is Status.FAILED


def test_both_directions_carry_the_sign_constraint() -> None:
    rules = _rules()
    assert set(rules) == {f"ax-{NAME}", f"ax-{NAME}-rev"}
    for rule in rules.values():
        assert any(c.startswith("0 < value('s') <=") for c in rule.constraints), rule.constraints


@pytest.mark.parametrize("rule_id", [f"ax-{NAME}", f"ax-{NAME}-rev"])
def test_the_refuter_finds_nothing_with_the_constraint_and_a_counterexample_without(rule_id: str) -> None:
    rule = _rules()[rule_id]
    assert refute(rule) is None
    assert refute(_unsigned(rule)) is not None


def test_the_prover_does_not_assume_the_sign() -> None:
    assert NAME not in {b.name for b in axiom_bank()}
    result = prove(_unsigned(_rules()[f"ax-{NAME}"]), rlimit=RLIMIT, shapes={"x": (1, 2, 2, 2), "s": ()})
    assert result.status is not ProofStatus.PROVED, result


def _relu_scaled(scale: float):  # noqa: ANN202
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Mul", ["s", "r"], ["y"])]
    inits = [nh.from_array(np.array([scale], dtype=np.float32), "s")]
    return canonicalize(make_graph(nodes, {"x": (1, 4, 3, 3)}, ["y"], inits)).graph


@pytest.mark.parametrize(("scale", "matches"), [(0.75, 1), (1e-30, 1), (-0.75, 0), (0.0, 0), (np.inf, 0)])
def test_only_a_finite_positive_scale_is_moved(scale: float, matches: int) -> None:
    found = find_matches(_relu_scaled(scale), _rules()[f"ax-{NAME}"])
    assert len(found) == matches
