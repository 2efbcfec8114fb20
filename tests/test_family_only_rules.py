"""Every axiom whose rules are built by hand (`FAMILY_ONLY`): its rules type-check, agree
with their witnesses, survive the refuter, and the generic axiom bank leaves the axiom alone."""

from __future__ import annotations

import pytest

from taso.opspecs.axioms import find_axiom
from taso.substitutions.generate._axiom_bank import FAMILY_ONLY, axiom_bank
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._refute import refute
from taso.substitutions.generate._witness import WitnessOutcome, check_witness, type_error


@pytest.mark.parametrize("name", sorted(FAMILY_ONLY))
def test_the_rules_pass_their_witnesses_and_the_refuter_and_the_bank_leaves_them_alone(name: str) -> None:
    rules = rules_from_axiom(find_axiom(name))
    assert rules
    for rule in rules:
        assert type_error(rule) == "" and check_witness(rule).outcome is WitnessOutcome.AGREE
        assert refute(rule) is None
    assert name not in {b.name for b in axiom_bank()}
