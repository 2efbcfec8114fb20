"""Mutation test: deliberately wrong axioms must all be rejected by the validation machinery."""

from __future__ import annotations

import pytest

from taso.opspecs.axioms.mutants import DEGENERATE, MUTANTS
from taso.opspecs.axioms.validate import Method, Status, check_symbolic, validate_axiom


def test_kill_rate_is_total() -> None:
    assert len(MUTANTS) >= 15
    survivors = [m.name for m in MUTANTS if validate_axiom(m).ok]
    kill_rate = 1 - len(survivors) / len(MUTANTS)
    assert kill_rate == 1.0, f"surviving wrong axioms: {survivors}"


LISTED_REFUTABLE = [m for m in MUTANTS if m.name not in {d.name for d in DEGENERATE}]


@pytest.mark.parametrize("mutant", LISTED_REFUTABLE, ids=[m.name for m in LISTED_REFUTABLE])
def test_symbolic_check_alone_rejects(mutant) -> None:  # noqa: ANN001
    """Z3 on its own (no random tensors) refutes each mutant on some listed config (the
    `DEGENERATE` ones hold on theirs: only drawn configs refute them)."""
    statuses = [check_symbolic(mutant, i).status for i in range(len(mutant.configs))]
    assert Status.FAILED in statuses
    assert Method.SYMBOLIC


def test_mutant_names_are_unique() -> None:
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names)
