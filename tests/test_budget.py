"""The call's budget and every share cut from it, on a fake clock (never wall-clock time)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from taso.pipeline.budget import DECISION_SLACK, MIN_SEARCH_SHARE, SWEEP_SHARE, Budget


@dataclass
class FakeClock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_budget_counts_down_on_its_clock() -> None:
    clock = FakeClock()
    budget = Budget.of(10.0, clock)
    assert budget.left() == 10.0 and budget.deadline == 110.0
    clock.now += 4.0
    assert budget.left() == 6.0 and budget.elapsed() == 4.0
    clock.now += 20.0
    assert budget.left() == 0.0


def test_a_cut_never_runs_past_its_parents_deadline() -> None:
    clock = FakeClock()
    budget = Budget.of(10.0, clock)
    clock.now += 8.0
    assert budget.cut(5.0).seconds == 2.0
    assert budget.cut(-1.0).seconds == 0.0
    assert budget.fraction(0.5).seconds == 1.0


def test_the_search_gets_what_the_later_stages_leave() -> None:
    clock = FakeClock()
    budget = Budget.of(10.0, clock)
    clock.now += 1.0  # loading and the reference run
    assert budget.search(3.0).seconds == pytest.approx(6.0)
    assert not budget.search_is_floored(3.0)


def test_the_search_keeps_its_floor_even_past_the_deadline() -> None:
    clock = FakeClock()
    budget = Budget.of(10.0, clock)
    clock.now += 9.0  # a slow model: loading took nearly everything
    assert budget.search_is_floored(5.0)
    assert budget.search(5.0).seconds == pytest.approx(MIN_SEARCH_SHARE * 10.0)


def test_no_budget_means_no_search() -> None:
    assert Budget.of(0.0, FakeClock()).search(0.0).seconds == 0.0


def test_shares_by_nodes_and_for_sweeps() -> None:
    clock = FakeClock()
    budget = Budget.of(10.0, clock)
    assert budget.by_nodes(30, 40).seconds == pytest.approx(7.5)
    assert budget.by_nodes(5, 0).seconds == 10.0  # nothing to share with
    assert budget.sweeps().seconds == pytest.approx(SWEEP_SHARE * 10.0)


def test_the_decision_may_run_its_slack_past_the_deadline() -> None:
    budget = Budget.of(10.0, FakeClock())
    assert budget.decision_deadline() == pytest.approx(110.0 + DECISION_SLACK * 10.0)


class SteppingClock:
    """The fake clock of the whole search: `perf_counter` for the backtracking, a call for budgets."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def __call__(self) -> float:
        return self.now


def test_the_search_stops_within_its_share_on_a_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pricing takes one fake second: a 5 s budget stops the search by t = 5 (one call late at most)."""
    from taso._onnx_import import import_model
    from taso.pipeline._rewriting import run_search
    from taso.report import StopReason
    from taso.search import FunctionCost
    from tests.helpers.models import wide_model
    from tests.helpers.rules import FIXTURE_RULES

    clock = SteppingClock()
    monkeypatch.setattr("taso.search.backtracking.time", clock)

    def slow(graph: object) -> float:
        clock.now += 1.0
        return float(len(graph.nodes))  # type: ignore[attr-defined]

    graph = import_model(wide_model())
    outcome = run_search(graph, rules=FIXTURE_RULES, cost_model=FunctionCost(slow), alpha=3.0,
                         budget=Budget.of(5.0, clock))
    assert outcome.stop_reason is StopReason.TIME_BUDGET
    assert clock.now <= 6.0
