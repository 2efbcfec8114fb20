"""The keep-or-return decision: only a consistent, significant speedup keeps the optimized model."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from taso.backends import InterleavedTiming
from taso.backends.timing import _interleaved as _timing
from taso.pipeline._decide import (
    MIN_DECIDE_Z,
    balanced_rank_z,
    balanced_sign_z,
    pairs_for,
    sign_test_z,
    signed_rank_z,
)
from taso.search.sweep import Judgement

SIGNIFICANT_Z = 2.33  # one-sided p < 0.01


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
    assert sign_test_z(a, b) < SIGNIFICANT_Z  # pair by pair, half are lost to the order effect
    assert balanced_sign_z(a, b) >= SIGNIFICANT_Z
    timing = _timing(a, b)
    assert abs(timing.speedup - 1.25) < 0.01 and timing.paired_ratio_p90 < 1.0
    same_a, same_b = _order_effect(40, 1.0)
    assert balanced_sign_z(same_a, same_b) < SIGNIFICANT_Z and abs(_timing(same_a, same_b).speedup - 1.0) < 0.01


def test_a_real_speedup_is_significant() -> None:
    a = [10.0 + 0.1 * (i % 7) for i in range(48)]
    b = [x * 0.9 for x in a]
    assert balanced_rank_z(a, b) >= MIN_DECIDE_Z and balanced_rank_z(b, a) <= -MIN_DECIDE_Z


def test_noise_is_not_a_speedup() -> None:
    """Identical models: B wins about half the pairs; a skewed median alone must not decide."""
    a = [10.0 + (i % 5) for i in range(100)]
    b = [10.0 + ((i + 2) % 5) * 0.98 for i in range(100)]
    assert sign_test_z(a, b) < SIGNIFICANT_Z
    assert balanced_rank_z(a, b) < MIN_DECIDE_Z


def test_signed_ranks_weigh_how_much_each_block_is_won() -> None:
    """Five small wins and three large losses: the sign test leans to B, the ranks do not;
    five large wins and three small losses: both lean to B, the ranks more."""
    a = [10.0] * 8
    small_wins = [9.9] * 5 + [12.0] * 3
    assert sign_test_z(a, small_wins) > 0 > signed_rank_z(a, small_wins)
    large_wins = [8.0] * 5 + [10.1] * 3
    assert signed_rank_z(a, large_wins) > sign_test_z(a, large_wins) > 0


def test_signed_rank_z_matches_the_textbook_values() -> None:
    """No ties: n = 10, W+ = 55 (all won): z = 27.5 / sqrt(96.25); all tied and won, n = 6:
    the tie correction lowers the variance to 22.75 - 210/48."""
    a = [10.0] * 10
    assert abs(signed_rank_z(a, [10.0 - 0.1 * (i + 1) for i in range(10)]) - 27.5 / 96.25**0.5) < 1e-9
    assert abs(signed_rank_z([10.0] * 6, [9.0] * 6) - 10.5 / (22.75 - 210 / 48) ** 0.5) < 1e-9
    assert signed_rank_z(a, a) == 0.0


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


def test_a_slower_model_ends_the_decision_after_one_look() -> None:
    from taso.pipeline._decide import MIN_LOOKS, _decide_on

    slower = _ScriptedPairs(1.1)
    verdict = _decide_on(slower)  # type: ignore[arg-type]
    assert not verdict.faster and len(verdict.looks) == 1
    faster = _decide_on(_ScriptedPairs(0.9))  # type: ignore[arg-type]
    assert faster.faster and len(faster.looks) == MIN_LOOKS  # never decided on one look


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
    only with more pairs (three 12-pair looks); each run takes `run_s` on a fake clock."""

    def __init__(self, clock: list[float] | None = None, run_s: float = 0.01):
        super().__init__(1.0)
        self.clock, self.run_s = clock if clock is not None else [0.0], run_s

    def extend(self, pairs: int) -> None:
        from taso.pipeline._decide import PROBE_PAIRS

        self.clock[0] += pairs * 2 * self.run_s
        for _ in range(pairs):
            block = (len(self.a_ms) - PROBE_PAIRS) // 2  # the decision's blocks begin after its probe
            self.a_ms.append(1000 * self.run_s)
            self.b_ms.append(1000 * self.run_s * (0.95 if block % 5 < 3 else 1.05))


def test_a_promising_decision_takes_more_looks_until_significant(monkeypatch) -> None:  # noqa: ANN001
    """Timed at 400 ms a run, a look is 12 pairs: two looks (12 blocks) are not yet
    significant, three are; a model with no gain stops at its first look."""
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    verdict = decide._decide_on(_SlowlyConvincingPairs(clock, run_s=0.4))  # type: ignore[arg-type]
    assert verdict.faster and len(verdict.looks) == 3
    level = decide._decide_on(_ScriptedPairs(1.02))  # type: ignore[arg-type]
    assert not level.faster and len(level.looks) == 1


def test_later_looks_run_only_before_the_deadline(monkeypatch) -> None:  # noqa: ANN001
    """The first two looks always run (the budget reserved them, even past the deadline);
    a third only if it fits: at 400 ms a run the probe takes 2.4 s, a look 9.6 s, so the
    third would end at 31.2 s."""
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    cut = decide._decide_on(_SlowlyConvincingPairs(clock, run_s=0.4), deadline=25.0)  # type: ignore[arg-type]
    assert not cut.faster and len(cut.looks) == decide.MIN_LOOKS
    clock[0] = 0.0
    roomy = decide._decide_on(_SlowlyConvincingPairs(clock, run_s=0.4), deadline=35.0)  # type: ignore[arg-type]
    assert roomy.faster
    clock[0] = 0.0
    reserved = decide._decide_on(_SlowlyConvincingPairs(clock, run_s=0.4), deadline=0.0)  # type: ignore[arg-type]
    assert len(reserved.looks) == decide.MIN_LOOKS


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
    """A level first decision took its two looks (3 probe pairs and 2 x 48 pairs at 10 ms
    a run: 1.98 s) and the deadline stopped it there; a second one is estimated as long.
    With room, the first takes all four looks (3.9 s) and a second one still fits."""
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    short = decide.decide_contradicted(_ScriptedDecisions([1.0, 0.8], clock), 2.9, contradicted=True)
    assert not short.faster and short.decisions == 1 and len(short.looks) == 2
    clock[0] = 0.0
    roomy = decide.decide_contradicted(_ScriptedDecisions([1.0, 0.8], clock), 8.0, contradicted=True)
    assert roomy.faster and roomy.decisions == 2


class _NoisyPairs(_ScriptedPairs):
    """Runs timed as a shared 2-core host times them: lognormal jitter (4%), a slow drift of
    the machine's speed, and bursts of load (one run in 20 takes 30% longer); B really takes
    `ratio` times A's time. Each run takes its time on a fake clock."""

    def __init__(self, ratio: float, seed: int, clock: list[float], base_ms: float = 80.0):
        super().__init__(ratio)
        self.rng, self.clock, self.base_ms = random.Random(seed), clock, base_ms

    def _run_ms(self, scale: float) -> float:
        drift = 1.0 + 0.05 * math.sin(len(self.a_ms) / 15.0)
        burst = 1.3 if self.rng.random() < 0.05 else 1.0
        ms = self.base_ms * scale * drift * burst * math.exp(self.rng.gauss(0.0, 0.04))
        self.clock[0] += ms / 1000
        return ms

    def extend(self, pairs: int) -> None:
        for _ in range(pairs):
            self.a_ms.append(self._run_ms(1.0))
            self.b_ms.append(self._run_ms(self.ratio))


def _pass_rate(ratio: float, monkeypatch, trials: int = 200) -> float:  # noqa: ANN001
    import taso.pipeline._decide as decide

    clock = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    passed = sum(decide._decide_on(_NoisyPairs(ratio, seed, clock)).faster for seed in range(trials))  # type: ignore[arg-type]
    return passed / trials


def test_the_decision_refutes_equal_and_slower_models_under_noise(monkeypatch) -> None:  # noqa: ANN001
    assert _pass_rate(1.0, monkeypatch) <= 0.01
    assert _pass_rate(1 / 0.98, monkeypatch) == 0.0  # B 2% slower


def test_the_decision_finds_a_real_gain_under_noise(monkeypatch) -> None:  # noqa: ANN001
    """1.10x at 80 ms a run (12-pair looks) passes nearly always; the two 6-block rounds
    it replaced passed such a gain at about one in three."""
    assert _pass_rate(1 / 1.10, monkeypatch) >= 0.9


# --- the sweep judge under the same noise --------------------------------------------


@dataclass(frozen=True)
class _Token:
    """Stands in for a graph: the judge needs only its structural hash here."""

    structural_hash: bytes


class _ReplayedPairs(_ScriptedPairs):
    """Replays a recorded A/A series (`tests/data/host_noise_avx2.json`) from `start`, the
    candidate's times divided by `speedup` (the candidate is B when `candidate_second`)."""

    def __init__(self, series: dict[str, list[float]], start: int, speedup: float, candidate_second: bool,
                 clock: list[float]):
        super().__init__(1.0)
        self.series, self.position, self.clock = series, start, clock
        self.a_scale, self.b_scale = (1.0, 1 / speedup) if candidate_second else (1 / speedup, 1.0)

    def extend(self, pairs: int) -> None:
        for _ in range(pairs):
            i = self.position % len(self.series["a_ms"])
            self.a_ms.append(self.series["a_ms"][i] * self.a_scale)
            self.b_ms.append(self.series["b_ms"][i] * self.b_scale)
            self.clock[0] += (self.a_ms[-1] + self.b_ms[-1]) / 1000
            self.position += 1


def _recorded(name: str) -> dict[str, list[float]]:
    path = Path(__file__).parent / "data" / "host_noise_avx2.json"
    return json.loads(path.read_text())["series"][name]


def _kept_rate(speedup: float, monkeypatch, tmp_path, *, trials: int = 200, base_ms: float = 80.0,  # noqa: ANN001
               recorded: str | None = None) -> float:
    """How often a sweep `speedup` times faster is judged faster and confirmed (the sweep's
    two stages, `_confirmed`), timed by `_NoisyPairs` or replayed from a `recorded` series
    (from a random point; which model is A alternates from trial to trial)."""
    import taso.pipeline._decide as decide
    from taso.search._judging import confirmed as _confirmed

    clock, seeds = [0.0], itertools.count()
    series = None if recorded is None else _recorded(recorded)
    monkeypatch.setattr(decide.time, "perf_counter", lambda: clock[0])
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(decide.MeasuredJudge, "_runnable", lambda self, graph: graph)

    def pairs(model_a: _Token, model_b: _Token, inputs: object, **kwargs: object) -> _ScriptedPairs:
        candidate_second, seed = model_b.structural_hash.startswith(b"new"), next(seeds)
        if series is None:
            return _NoisyPairs(1 / speedup if candidate_second else speedup, seed, clock, base_ms)
        if seed % 2:  # the recorded B as A
            swapped = {"a_ms": series["b_ms"], "b_ms": series["a_ms"]}
            return _ReplayedPairs(swapped, random.Random(seed).randrange(300), speedup, candidate_second, clock)
        return _ReplayedPairs(series, random.Random(seed).randrange(300), speedup, candidate_second, clock)

    monkeypatch.setattr(decide, "InterleavedPairs", pairs)
    judge, kept = decide.MeasuredJudge({}, base_ms), 0
    for trial in range(trials):
        current, candidate = _Token(b"old%d" % trial), _Token(b"new%d" % trial)
        verdict = judge(current, candidate, math.inf)  # type: ignore[arg-type]
        if verdict.faster:
            kept += _confirmed(judge, current, candidate, verdict, math.inf).faster  # type: ignore[arg-type]
    return kept / trials


def test_the_sweep_judge_refutes_equal_and_slower_sweeps_under_noise(monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """Judged and confirmed: an equal sweep rarely, a 2% slower one never, on synthetic noise
    and on the host noise recorded on a 2-core AVX2 machine."""
    assert _kept_rate(1.0, monkeypatch, tmp_path / "synthetic") <= 0.01
    for recorded in ("ppocrv4_det_79ms", "ppocrv4_det_85ms"):
        assert _kept_rate(1.0, monkeypatch, tmp_path / f"{recorded}-equal", recorded=recorded) <= 0.02
        assert _kept_rate(0.98, monkeypatch, tmp_path / f"{recorded}-slower", recorded=recorded) == 0.0


def test_the_sweep_judge_keeps_a_small_real_gain_through_host_noise(monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """A real 1.05x sweep on an 80 ms model, replayed through recorded host noise: kept 80%
    and 84% of the time (one signed-rank test over both looks); a sign test forward and the
    reverse look's own verdict kept it 50% and 69%."""
    rates = [_kept_rate(1.05, monkeypatch, tmp_path / recorded, recorded=recorded)
             for recorded in ("ppocrv4_det_79ms", "ppocrv4_det_85ms")]
    assert min(rates) >= 0.75 and sum(rates) / 2 >= 0.78  # ending when the reverse alone shows none: 73%, 78%


def test_a_confirmation_whose_own_looks_show_no_gain_is_refused(monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """However strong the first stage, looks the other way round that on their own see the
    candidate 1% slower refute it: pooled, the first stage alone would pass."""
    import taso.pipeline._decide as decide

    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(decide.MeasuredJudge, "_runnable", lambda self, graph: graph)
    monkeypatch.setattr(decide, "InterleavedPairs", lambda a, b, inputs, **kwargs: _ScriptedPairs(1 / 1.01))  # A: the candidate
    first = Judgement(1.2, True, evidence=(0.2,) * 40)
    assert decide.rank_z(first.evidence) >= decide.CONFIRM_Z
    judge = decide.MeasuredJudge({}, 10.0)
    refused = judge(_Token(b"old"), _Token(b"new"), math.inf, confirm=first)  # type: ignore[arg-type]
    assert not refused.faster and refused.complete
    monkeypatch.setattr(decide, "InterleavedPairs", lambda a, b, inputs, **kwargs: _ScriptedPairs(1.01))
    confirmed = judge(_Token(b"old2"), _Token(b"new2"), math.inf, confirm=first)  # type: ignore[arg-type]
    assert confirmed.faster and confirmed.speedup > 1.0 and len(confirmed.evidence or ()) > 40
