"""The call's budget and every share cut from it, on a fake clock (never wall-clock time)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from taso._onnx_import import import_model
from taso.backends._session import RunTiming
from taso.backends.compare import ReferenceRun
from taso.pipeline import api
from taso.pipeline._decide import longest_decide_seconds
from taso.pipeline._rewriting import run_search
from taso.pipeline.budget import (
    DECISION_RUNS,
    DECISION_SLACK,
    DEFAULT_SECONDS,
    MAX_DEFAULT_SECONDS,
    MIN_SEARCH_SHARE,
    SECOND_DECISION_SLACK,
    SWEEP_SHARE,
    Budget,
)
from taso.report import StopReason
from taso.search import FunctionCost
from tests.helpers.models import wide_model
from tests.helpers.rules import FIXTURE_RULES


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


def test_a_default_budget_leaves_its_decision_room_for_a_second_look() -> None:
    clock = FakeClock()
    budget = Budget.default(clock).resolved(run_ms=50.0, nodes=400)
    slack = budget.decision_deadline() - budget.deadline
    assert slack == pytest.approx((DECISION_SLACK + SECOND_DECISION_SLACK) * budget.seconds)
    decision_s = DECISION_RUNS * 50.0 / 1000
    assert slack - DECISION_SLACK * budget.seconds >= decision_s  # one more decision fits


def test_a_default_budget_leaves_room_for_a_slow_models_longest_second_decision() -> None:
    """YOLO11n, 54 ms a run: a tenth of its 39 s default is less than one decision with
    its rounds extended; the slack grows to that decision, a given budget's does not."""
    timing = RunTiming(session_s=0.3, run_ms=54.0)
    longest = longest_decide_seconds(timing)
    default = Budget.default(FakeClock()).resolved(run_ms=54.0, nodes=355)
    assert SECOND_DECISION_SLACK * default.seconds < longest
    assert default.decision_deadline(longest) - default.deadline == pytest.approx(DECISION_SLACK * default.seconds + longest)
    given = Budget.of(default.seconds, FakeClock())
    assert given.decision_deadline(longest) - given.deadline == pytest.approx(DECISION_SLACK * given.seconds)


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


# ----- the default budget: scaled to the model once its reference run is timed -------------------


def test_a_fast_small_model_keeps_the_default_budget() -> None:
    clock = FakeClock()
    budget = Budget.default(clock)
    assert budget.seconds == DEFAULT_SECONDS
    assert budget.resolved(run_ms=5.0, nodes=120).seconds == DEFAULT_SECONDS


def test_a_slow_big_model_gets_a_larger_default_that_judges_its_sweeps() -> None:
    """The issue's layout model: 1,493 nodes at 114 ms a run, 0 graphs explored at 10 s."""
    clock = FakeClock()
    budget = Budget.default(clock)
    clock.now += 4.0  # loading and the reference run, spent before the default is resolved
    resolved = budget.resolved(run_ms=114.0, nodes=1_493)
    assert DEFAULT_SECONDS < resolved.seconds <= MAX_DEFAULT_SECONDS
    assert resolved.start == budget.start  # the time already spent counts against it
    search = resolved.search(expected_after_s=8.0)  # the check and the measured decision
    assert search.slowest_judged_ms(100.0) >= 114.0
    # at today's 10 s the sweeps could judge nothing slower than the fixed 100 ms floor
    assert budget.search(expected_after_s=8.0).slowest_judged_ms(100.0) == 100.0


def test_the_default_is_bounded() -> None:
    budget = Budget.default(FakeClock())
    assert budget.resolved(run_ms=5_000.0, nodes=200_000).seconds == MAX_DEFAULT_SECONDS
    assert budget.resolved(run_ms=0.0, nodes=0).seconds == DEFAULT_SECONDS


@pytest.mark.parametrize("seconds", [0.0, 3.0, 10.0])
def test_a_given_budget_stays_a_hard_limit(seconds: float) -> None:
    clock = FakeClock()
    budget = Budget.of(seconds, clock)
    clock.now += 2.0
    resolved = budget.resolved(run_ms=114.0, nodes=1_493)
    assert (resolved.seconds, resolved.deadline) == (seconds, budget.deadline)


def test_shares_remember_when_the_call_started() -> None:
    clock = FakeClock()
    budget = Budget.of(10.0, clock)
    clock.now += 2.0
    share = budget.search(0.0).fraction(0.5)
    clock.now += 1.5
    assert share.since_call_start(clock()) == pytest.approx(3.5)


def test_the_search_reports_when_it_found_its_best_from_the_call_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Time-to-best on the fake clock: each pricing takes one second; the call began 3 s before the search."""
    clock = SteppingClock()
    monkeypatch.setattr("taso.search.backtracking.time", clock)
    priced: list[tuple[float, float]] = []

    def slow(graph: object) -> float:
        clock.now += 1.0
        nodes = graph.nodes.values()  # type: ignore[attr-defined]
        cost = len(nodes) + 10.0 * sum(node.op_type == "Conv" for node in nodes)  # merging convs pays
        priced.append((clock.now, cost))
        return cost

    budget = Budget.of(1_000.0, clock)
    clock.now += 3.0  # loading and the reference run
    outcome = run_search(import_model(wide_model()), rules=FIXTURE_RULES, cost_model=FunctionCost(slow), alpha=1.0,
                         budget=budget)
    assert outcome.applied and outcome.stop_reason is StopReason.CONVERGED
    best = min(cost for _, cost in priced)
    first_best = min(at for at, cost in priced if cost == best)
    assert outcome.best_found_s == first_best  # the call began at the fake clock's 0


@pytest.mark.parametrize(("budget", "judged"), [(Budget.of(10.0, FakeClock()), False),
                                                 (Budget.default(FakeClock()), True)])
def test_a_slow_big_models_sweeps_are_judged_under_the_scaled_default(budget: Budget, judged: bool) -> None:
    """The pipeline's gate: at 114 ms a run, sweeps are judged only where the budget affords it."""
    graph = import_model(wide_model())
    reference = ReferenceRun(timing=RunTiming(session_s=0.5, run_ms=114.0))
    target = api._validate_options(backend="ort-cpu", time_budget_s=None, alpha=1.05)
    said: list[str] = []
    call = budget.resolved(run_ms=114.0, nodes=1_493)
    sweeping = api._sweeping(graph, target=target, profile=None, say=said.append, reference=reference,
                             note=said.append, budget=call.search(expected_after_s=8.0))
    assert (sweeping is not None) is judged
    assert any("too slow per run" in line for line in said) is not judged
