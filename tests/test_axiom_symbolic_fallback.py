"""When Z3 gives up on an axiom's joint query (every element at once), the symbolic check
proves the elements one at a time: the answer no longer hangs on how the solver's search
went on one large query, and a wrong axiom is still refuted element by element."""

from __future__ import annotations

import pytest

from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms import validate as validate_module
from taso.opspecs.axioms.mutants import MUTANTS
from taso.opspecs.axioms.validate import PORTFOLIO, Attempt, Solver, Status, check_symbolic


def _joint_gives_up(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every query over more than one element answer "unknown"; returns the sizes asked."""
    asked: list[int] = []
    real = validate_module._refute

    def refute(assumptions: list, differences: list, timeout_ms: int, attempt: Attempt) -> tuple[Status, str]:
        asked.append(len(differences))
        if len(differences) > 1:
            return Status.UNKNOWN, "z3 unknown: timeout"
        return real(assumptions, differences, timeout_ms, attempt)

    monkeypatch.setattr(validate_module, "_refute", refute)
    return asked


def test_an_axiom_whose_joint_query_times_out_is_proved_element_by_element(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _joint_gives_up(monkeypatch)
    check = check_symbolic(find_axiom("conv_bn_relu_affine_as_clip"), 1)
    assert check.status is Status.PASSED, check.detail
    assert "one at a time" in check.detail
    joint = len(PORTFOLIO)
    assert asked[:joint] == [asked[0]] * joint and asked[0] > 1  # every attempt made on the joint query
    assert all(n == 1 for n in asked[joint:]) and len(asked) >= joint + asked[0]


def test_a_query_one_seed_cannot_decide_is_tried_under_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[Attempt] = []
    real = validate_module._refute

    def refute(assumptions: list, differences: list, timeout_ms: int, attempt: Attempt) -> tuple[Status, str]:
        attempts.append(attempt)
        if attempt == PORTFOLIO[0]:
            return Status.UNKNOWN, "z3 unknown: timeout"
        return real(assumptions, differences, timeout_ms, attempt)

    monkeypatch.setattr(validate_module, "_refute", refute)
    check = check_symbolic(find_axiom("conv_bn_relu_affine_as_clip"), 1)
    assert check.status is Status.PASSED and "one at a time" not in check.detail
    assert attempts[:2] == list(PORTFOLIO[:2])  # the next attempt was made


def test_the_general_solvers_seeds_and_the_nonlinear_solver_are_all_tried() -> None:
    assert {a.solver for a in PORTFOLIO} == set(Solver)
    general = [a.seed for a in PORTFOLIO if a.solver is Solver.GENERAL]
    assert len(general) >= 2 and len(set(general)) == len(general)


def test_elements_the_general_solver_gives_up_on_are_proved_by_the_nonlinear_solver(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CI twice: one element of this axiom took the general solver over 5 s under every
    seed; nlsat decides it in milliseconds."""
    real = validate_module._refute

    def refute(assumptions: list, differences: list, timeout_ms: int, attempt: Attempt) -> tuple[Status, str]:
        if attempt.solver is Solver.GENERAL:
            return Status.UNKNOWN, "z3 unknown: timeout"
        return real(assumptions, differences, timeout_ms, attempt)

    monkeypatch.setattr(validate_module, "_refute", refute)
    check = check_symbolic(find_axiom("conv_bn_relu_affine_as_clip"), 1, timeout_ms=4_000)
    assert check.status is Status.PASSED, check.detail


def _symbolically_refuted() -> list[str]:
    return [m.name for m in MUTANTS
            if any(c.status is Status.FAILED and "counterexample" in c.detail
                   for c in (check_symbolic(m, i) for i in range(len(m.configs))))]


def test_a_wrong_axiom_is_still_refuted_element_by_element(monkeypatch: pytest.MonkeyPatch) -> None:
    jointly = _symbolically_refuted()
    assert len(jointly) >= 10
    _joint_gives_up(monkeypatch)
    assert _symbolically_refuted() == jointly


def test_the_joint_query_alone_decides_when_it_can() -> None:
    check = check_symbolic(find_axiom("conv_bn_relu_affine_as_clip"), 1)
    assert check.status is Status.PASSED and "one at a time" not in check.detail
