"""The keep-or-return decision: only a consistent, significant speedup keeps the optimized model."""

from __future__ import annotations

from taso.backends import InterleavedTiming
from taso.backends.timing import _interleaved as _timing
from taso.pipeline._decide import MIN_SIGN_Z, _verdict, balanced_sign_z, pairs_for, sign_test_z


def _order_effect(pairs: int, speedup: float) -> tuple[list[float], list[float]]:
    """What NasRNN showed: a run right after the other model is ~40% slower (cold
    caches), so in each pair the second run is slow, and B is really `speedup` faster."""
    a, b = [], []
    for i in range(pairs):
        jitter = 1.0 + 0.01 * (i % 3)
        a_first = i % 2 == 0
        a.append(10.0 * jitter * (1.0 if a_first else 1.4))
        b.append(10.0 / speedup * jitter * (1.4 if a_first else 1.0))
    return a, b


def test_order_effects_cancel_over_balanced_blocks() -> None:
    a, b = _order_effect(40, 1.25)
    assert sign_test_z(a, b) < MIN_SIGN_Z  # pair by pair, half are lost to the order effect
    assert balanced_sign_z(a, b) >= MIN_SIGN_Z
    timing = _timing(a, b)
    assert abs(timing.speedup - 1.25) < 0.01 and timing.paired_ratio_p90 < 1.0
    same_a, same_b = _order_effect(40, 1.0)
    assert balanced_sign_z(same_a, same_b) < MIN_SIGN_Z and abs(_timing(same_a, same_b).speedup - 1.0) < 0.01


def test_a_real_speedup_is_kept() -> None:
    a = [10.0 + 0.1 * (i % 7) for i in range(100)]
    b = [x * 0.9 for x in a]
    verdict = _verdict([_timing(a, b), _timing(a, b)])
    assert verdict.faster and abs(verdict.speedup - 1 / 0.9) < 1e-6


def test_noise_is_not_a_speedup() -> None:
    """Identical models: B wins about half the pairs; a skewed median alone must not decide."""
    a = [10.0 + (i % 5) for i in range(100)]
    b = [10.0 + ((i + 2) % 5) * 0.98 for i in range(100)]
    assert sign_test_z(a, b) < MIN_SIGN_Z
    assert not _verdict([_timing(a, b), _timing(a, b)]).faster


def test_both_rounds_must_agree() -> None:
    a = [10.0] * 50
    faster, slower = [9.0] * 50, [11.0] * 50
    assert not _verdict([_timing(a, faster), _timing(a, slower)]).faster


def test_pairs_fit_the_time_per_round() -> None:
    assert pairs_for(1.0) == 400 and pairs_for(500.0) == 12 and pairs_for(10.0) == 50
    assert pairs_for(500.0, minimum=20) == 20 and pairs_for(7.0) % 2 == 0


class _ScriptedPairs:
    """Stands in for `InterleavedPairs`: B takes `ratio` times A's time in every pair."""

    def __init__(self, ratio: float):
        self.ratio, self.a_ms, self.b_ms = ratio, [], []

    def extend(self, pairs: int) -> None:
        for i in range(pairs):
            a = 10.0 + 0.1 * (i % 7)
            self.a_ms.append(a)
            self.b_ms.append(a * self.ratio)

    def timing(self, since: int = 0) -> InterleavedTiming:
        return _timing(self.a_ms[since:], self.b_ms[since:])


def test_a_failed_first_round_ends_the_decision() -> None:
    from taso.pipeline._decide import _decide_on

    slower = _ScriptedPairs(1.1)
    verdict = _decide_on(slower)  # type: ignore[arg-type]
    assert not verdict.faster and len(verdict.rounds) == 1
    faster = _decide_on(_ScriptedPairs(0.9))  # type: ignore[arg-type]
    assert faster.faster and len(faster.rounds) == 2


def test_the_search_gets_what_checking_and_measuring_leave() -> None:
    from taso.backends._session import RunTiming
    from taso.backends.compare import ReferenceRun
    from taso.pipeline._decide import decide_seconds
    from taso.pipeline.api import _search_budget
    from taso.pipeline.budget import MIN_SEARCH_SHARE, Budget

    clock = [100.0]

    def budget_spent(total_s: float, elapsed_s: float) -> Budget:
        clock[0] = 100.0
        budget = Budget.of(total_s, lambda: clock[0])
        clock[0] += elapsed_s
        return budget

    timed = ReferenceRun(timing=RunTiming(session_s=0.5, run_ms=50.0))
    after = 0.5 + 0.05 + decide_seconds(RunTiming(0.5, 50.0))
    said: list[str] = []
    assert abs(_search_budget(budget_spent(10.0, 1.0), timed, said.append).seconds - (9.0 - after)) < 1e-9
    assert not said
    assert _search_budget(budget_spent(10.0, 1.0), None, said.append).seconds == 9.0  # no check: nothing to leave
    slow = ReferenceRun(timing=RunTiming(session_s=2.0, run_ms=300.0))
    assert _search_budget(budget_spent(10.0, 1.0), slow, said.append).seconds == MIN_SEARCH_SHARE * 10.0 and said
    assert _search_budget(budget_spent(0.0, 1.0), timed, said.append).seconds == 0.0


class _SlowlyConvincingPairs(_ScriptedPairs):
    """B is 5% faster in most blocks of two pairs, but wins only 60% of them: significant
    only with more pairs."""

    def extend(self, pairs: int) -> None:
        for _ in range(pairs):
            block = len(self.a_ms) // 2
            self.a_ms.append(10.0)
            self.b_ms.append(9.5 if block % 5 < 3 else 10.5)


def test_a_promising_round_is_timed_on_until_significant() -> None:
    from taso.pipeline._decide import ROUND_EXTENSIONS, _round

    short = _SlowlyConvincingPairs(1.0)
    timing = _round(short, 12)  # type: ignore[arg-type]
    assert balanced_sign_z(timing.a.samples_ms, timing.b.samples_ms) < MIN_SIGN_Z  # 60% of 18 blocks
    assert len(timing.a.samples_ms) == 12 * (1 + ROUND_EXTENSIONS)
    long = _round(_SlowlyConvincingPairs(1.0), 200)  # type: ignore[arg-type]
    assert len(long.a.samples_ms) == 400 and balanced_sign_z(long.a.samples_ms, long.b.samples_ms) >= MIN_SIGN_Z
    losing = _round(_ScriptedPairs(1.1), 12)  # type: ignore[arg-type]
    assert len(losing.a.samples_ms) == 12  # slower: no extension


def test_a_slow_models_round_is_not_extended_past_its_time(monkeypatch) -> None:
    """On a 126 ms model 12 pairs take 3 s: a further look would take the round past
    `MAX_ROUND_SECONDS`, so an undecided round ends (and the decision says not faster)."""
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])

    class _SlowPairs(_SlowlyConvincingPairs):
        def extend(self, pairs: int) -> None:
            clock[0] += pairs * 2 * 0.126
            super().extend(pairs)

    timing = decide._round(_SlowPairs(1.0), 12)  # type: ignore[arg-type]
    assert len(timing.a.samples_ms) == 12
    fast = decide._round(_SlowlyConvincingPairs(1.0), 12)  # type: ignore[arg-type]
    assert len(fast.a.samples_ms) == 12 * (1 + decide.ROUND_EXTENSIONS)


def test_extensions_leave_the_later_round_its_time(monkeypatch) -> None:
    """The call's deadline bounds extensions: with room for one more chunk only, the first
    round is not extended (the second round needs that chunk); the last round may use it."""
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])

    class _TimedPairs(_SlowlyConvincingPairs):
        def extend(self, pairs: int) -> None:
            clock[0] += pairs * 2 * 0.01  # 10 ms a run: 0.24 s a chunk of 12 pairs
            super().extend(pairs)

    first = decide._round(_TimedPairs(1.0), 12, deadline=0.5, rounds_after=1)  # type: ignore[arg-type]
    assert len(first.a.samples_ms) == 12
    clock[0] = 0.0
    last = decide._round(_TimedPairs(1.0), 12, deadline=0.5, rounds_after=0)  # type: ignore[arg-type]
    assert len(last.a.samples_ms) == 24


def test_a_judgement_cut_short_says_faster_only_when_ahead() -> None:
    from taso.pipeline._decide import _cut_short

    ahead, behind, level = _ScriptedPairs(0.95), _ScriptedPairs(1.05), _ScriptedPairs(1.0)
    for pairs in (ahead, behind, level):
        pairs.extend(12)
    verdicts = [_cut_short(p) for p in (ahead, behind, level)]  # type: ignore[arg-type]
    assert [v.faster for v in verdicts] == [True, False, False]
    assert not any(v.complete for v in verdicts)


class _ScriptedDecisions(_ScriptedPairs):
    """B is `ratios[k]` times A in the k-th decision's pairs (a decision starts with
    `PROBE_PAIRS` probe pairs); each run takes `run_s` on a fake clock."""

    def __init__(self, ratios: list[float], clock: list[float], run_s: float = 0.01):
        super().__init__(ratios[0])
        self.ratios, self.clock, self.run_s, self.probes = ratios, clock, run_s, 0

    def extend(self, pairs: int) -> None:
        from taso.pipeline._decide import PROBE_PAIRS

        if pairs == PROBE_PAIRS:
            self.ratio = self.ratios[min(self.probes, len(self.ratios) - 1)]
            self.probes += 1
        self.clock[0] += pairs * 2 * self.run_s
        super().extend(pairs)


def test_a_not_faster_contradicted_by_the_sweeps_is_decided_again(monkeypatch) -> None:  # noqa: ANN001
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    unlucky_then_faster = [1.0, 0.8]
    verdict = decide.decide_contradicted(_ScriptedDecisions(unlucky_then_faster, clock), contradicted=True)
    assert verdict.faster and verdict.decisions == 2
    alone = decide.decide_contradicted(_ScriptedDecisions(unlucky_then_faster, clock), contradicted=False)
    assert not alone.faster and alone.decisions == 1
    slower_twice = decide.decide_contradicted(_ScriptedDecisions([1.1, 1.1], clock), contradicted=True)
    assert not slower_twice.faster and slower_twice.decisions == 2


def test_a_first_faster_decision_is_not_measured_again(monkeypatch) -> None:  # noqa: ANN001
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    pairs = _ScriptedDecisions([0.8, 1.2], clock)
    verdict = decide.decide_contradicted(pairs, contradicted=True)
    assert verdict.faster and verdict.decisions == 1 and pairs.probes == 1


def test_the_second_decision_must_fit_before_the_deadline(monkeypatch) -> None:  # noqa: ANN001
    """The first decision ended after its failed first round (3 probe pairs and 48 pairs at
    10 ms a run: 1.02 s); a whole second one is estimated at two rounds' worth, 2.04 s."""
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    short = decide.decide_contradicted(_ScriptedDecisions([1.0, 0.8], clock), 2.9, contradicted=True)
    assert not short.faster and short.decisions == 1
    clock[0] = 0.0
    roomy = decide.decide_contradicted(_ScriptedDecisions([1.0, 0.8], clock), 3.3, contradicted=True)
    assert roomy.faster and roomy.decisions == 2
