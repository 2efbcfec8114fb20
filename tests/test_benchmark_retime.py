"""A benchmark pair timed while the machine was loaded is timed again (`_measure._time_pair`).

The interleaved ratio does not cancel a stolen core: the many-op original slows more than a
few-op output, which flatters the tool (the corpus runs showed a PP-OCRv4 rec pair at 2.2x
with its baseline at 1.9x its quiet latency, 1.7x when quiet). The pair is timed again while
its baseline's median is more than `TimingPlan.disturbed` from the quiet latency, at most
`retimes` more times, and the timing nearest the quiet latency is kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import _measure
from benchmarks._measure import PairTiming, TimingPlan, _Baseline, _QuietLatency
from benchmarks._report import _iterations

QUIET_MS = 10.0


def _baseline() -> _Baseline:
    return _Baseline(Path("a.onnx"), {}, {}, 1, 10, b"", _QuietLatency([QUIET_MS]))


def _timing(baseline_ms: float) -> PairTiming:
    return PairTiming(10, baseline_ms, baseline_ms * 0.8, 0.8, 0.75, 0.85)


def _scripted(monkeypatch: pytest.MonkeyPatch, baselines: list[float]) -> list[float]:
    """`_time_once` returns timings with these baseline medians in turn; returns the calls."""
    calls: list[float] = []

    def time_once(baseline: _Baseline, candidate: Path, plan: TimingPlan) -> PairTiming:
        calls.append(baselines[len(calls)])
        return _timing(calls[-1])

    monkeypatch.setattr(_measure, "_time_once", time_once)
    return calls


def test_a_quiet_pair_is_timed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, [10.8])
    timing = _measure._time_pair(_baseline(), Path("b.onnx"), TimingPlan())
    assert calls == [10.8]
    assert (timing.baseline_median_ms, timing.retimed) == (10.8, 0)


def test_a_disturbed_pair_is_timed_again_until_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, [19.0, 10.4, 10.0])
    timing = _measure._time_pair(_baseline(), Path("b.onnx"), TimingPlan())
    assert calls == [19.0, 10.4]
    assert (timing.baseline_median_ms, timing.retimed) == (10.4, 1)


def test_a_pair_faster_than_quiet_is_disturbed_too(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, [6.5, 9.9])
    timing = _measure._time_pair(_baseline(), Path("b.onnx"), TimingPlan())
    assert calls == [6.5, 9.9]
    assert timing.retimed == 1


def test_retimes_are_bounded_and_the_nearest_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, [19.0, 13.0, 16.0, 10.0])
    timing = _measure._time_pair(_baseline(), Path("b.onnx"), TimingPlan(retimes=2))
    assert calls == [19.0, 13.0, 16.0]
    assert (timing.baseline_median_ms, timing.retimed) == (13.0, 2)


def test_the_table_says_how_often_a_pair_was_retimed() -> None:
    assert _iterations(_timing(10.0)) == "10"
    assert _iterations(PairTiming(10, 13.0, 9.0, 0.7, 0.6, 0.8, retimed=2)) == "10 (retimed 2)"


def test_the_quiet_latency_is_the_original_interleaved_with_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Alone, some originals ran more than 15% from the same original interleaved (every
    pair of theirs was retimed twice); the reference is timed the way pairs are."""
    calls: list[tuple[object, object, int]] = []

    class Stats:
        def __init__(self, median_ms: float) -> None:
            self.median_ms = median_ms

    class Timing:
        a, b = Stats(12.0), Stats(12.4)

    def interleaved(model_a, model_b, inputs, *, repeats, warmup, threads):
        calls.append((model_a, model_b, repeats))
        return Timing()

    def alone(*args, **kwargs):
        raise AssertionError("the quiet latency is not timed alone")

    monkeypatch.setattr(_measure.backends, "measure_interleaved", interleaved)
    monkeypatch.setattr(_measure.backends, "measure_latency", alone)
    path = Path("a.onnx")
    assert _measure._quiet_ms(path, {}, 2.0, TimingPlan(quiet_seconds=1.0)) == 12.0
    assert calls == [(path, path, 250)]  # about a second of pairs, 4 ms each


def test_the_quiet_latency_follows_the_pairs_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first look of a second said 10 ms, but the pairs run at 12.8-13 ms: after two
    pairs the reference is their median, and a third pair at 13 ms is not disturbed; a
    loaded one at 16 ms still is."""
    baseline = _baseline()
    calls = _scripted(monkeypatch, [13.0, 12.9, 12.8, 12.8, 13.0, 16.0, 13.1])
    for _ in range(2):
        _measure._time_pair(baseline, Path("b.onnx"), TimingPlan())
    assert len(calls) == 4 and baseline.quiet.ms == pytest.approx(12.8)  # median of 10, 12.8, 12.8
    assert _measure._time_pair(baseline, Path("b.onnx"), TimingPlan()).retimed == 0
    assert _measure._time_pair(baseline, Path("b.onnx"), TimingPlan()).retimed == 1
