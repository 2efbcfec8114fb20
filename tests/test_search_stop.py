"""Why and when the search stopped: converged early, and when its best graph was found (fake clocks)."""

from __future__ import annotations

import dataclasses

import pytest

from taso.ir import Graph
from taso.report import StopReason
from taso.search import FunctionCost, search
from taso.search.sweep import Judgement, sweep
from tests.helpers.search_toys import Expander, OpWeights, add_identity, chain, ops_of, swap

WEIGHTS = OpWeights({"A": 10.0, "B": 11.5, "C": 1.0, "Id": 1.0, "R": 2.0})


class SteppingClock:
    """A fake `time` module: `perf_counter` reads `now`, which the fakes below advance."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_the_search_stops_converged_when_nothing_queued_could_beat_the_best() -> None:
    # R A (12): R Id A (13) and A->B (13.5) are queued within alpha of the input; A->C (3)
    # then becomes the best, and neither queued graph is within alpha of it any more
    expand = Expander((add_identity, swap("A", "B"), swap("A", "C")))
    result = search(chain("R", "A"), expand, WEIGHTS, alpha=1.2, time_budget_s=60)
    assert ops_of(result.graph) == ["R", "C"]
    assert result.stop_reason is StopReason.CONVERGED
    assert result.explored == 2  # the input and the best; the two hopeless graphs are left unexpanded
    assert result.stats.left_behind == 2


def test_an_emptied_queue_is_still_an_exhausted_search() -> None:
    result = search(chain("A"), Expander((swap("A", "C"),)), WEIGHTS, alpha=1.2, time_budget_s=60)
    assert result.stop_reason is StopReason.EXHAUSTED and result.stats.left_behind == 0


def test_a_relaxed_search_still_explores_what_is_within_alpha_of_the_best() -> None:
    # A (10) -> B (11.5, worse but within alpha) -> C (1): the detour is not cut off
    relaxed = search(chain("A"), Expander((swap("A", "B"), swap("B", "C"))), WEIGHTS, alpha=1.2, time_budget_s=60)
    assert ops_of(relaxed.graph) == ["C"]


def test_the_search_records_when_it_found_its_best(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SteppingClock()
    monkeypatch.setattr("taso.search.backtracking.time", clock)

    def priced(graph: Graph) -> float:
        clock.now += 1.0  # each pricing takes one fake second
        return WEIGHTS.cost(graph)

    # A priced at 1 s, B at 2 s, C (the best) at 3 s
    result = search(chain("A"), Expander((swap("A", "B"), swap("B", "C"))), FunctionCost(priced), alpha=1.2)
    assert result.best_found_s == 3.0
    unchanged = search(chain("C"), Expander((swap("C", "A"),)), FunctionCost(priced), alpha=1.2)
    assert unchanged.best_found_s is None  # nothing better than the input


@dataclasses.dataclass
class SlowJudge:
    """Faster when the candidate weighs less; each judgement takes one fake second."""

    clock: SteppingClock

    def __call__(self, current: Graph, candidate: Graph, deadline: float) -> Judgement:
        self.clock.now += 1.0
        speedup = WEIGHTS.cost(current) / WEIGHTS.cost(candidate)
        return Judgement(speedup, speedup >= 1.01)


def test_the_sweeps_record_when_they_found_their_best(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SteppingClock()
    monkeypatch.setattr("taso.search.sweep.time", clock)
    expand = Expander((swap("A", "C"), swap("C", "B")))
    # round 1: A->C judged faster and confirmed the other way round (2 s); round 2: C->B
    # judged slower (3 s); round 3: nothing left
    result = sweep(chain("A", "R", "A"), expand, SlowJudge(clock), prior=WEIGHTS, time_budget_s=60)
    assert ops_of(result.graph) == ["C", "R", "C"]
    assert result.stop_reason is StopReason.EXHAUSTED
    assert result.best_found_s == 2.0
