"""Is the optimized model really faster? The measured decision behind "never slower".

Both models are timed interleaved (A B, B A, ...) on the same inputs, spinning off, for a
fixed amount of wall time rather than a fixed count, so that a 1 ms model gets hundreds
of pairs and a 300 ms model a few dozen. The decision needs two independent rounds that
agree: in each, the median of the per-pair ratios B/A must show at least `MIN_SPEEDUP`.
On these shared 2-core machines a single short round of two *identical* models was
seen to report anything from 0.82x to 1.42x; two agreeing rounds of ~1 s each keep
that noise from ever choosing a slower model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from taso.backends import InterleavedTiming, ModelSource, measure_interleaved, measure_latency

MIN_SPEEDUP = 1.01
"""The optimized model is returned only if every round measures at least this speedup."""

ROUND_SECONDS = 1.0
MIN_PAIRS, MAX_PAIRS = 10, 400
ROUNDS = 2
MIN_SIGN_Z = 2.33
"""Per round, the optimized model must win significantly more pairs than it loses
(one-sided sign test, p < 0.01), besides a median speedup of `MIN_SPEEDUP`."""


@dataclass(frozen=True)
class Verdict:
    faster: bool
    original_ms: float
    optimized_ms: float
    speedup: float  # median paired speedup over all rounds
    spread: float  # p90 - p10 of the paired ratios B/A
    rounds: tuple[float, ...]  # speedup of each round


def pairs_for(per_run_ms: float, seconds: float = ROUND_SECONDS) -> int:
    """How many A/B pairs fit in `seconds` (two runs a pair), clamped."""
    return int(min(MAX_PAIRS, max(MIN_PAIRS, seconds * 1000.0 / max(2 * per_run_ms, 1e-3))))


def decide(original: ModelSource, optimized: ModelSource, inputs: Mapping[str, np.ndarray]) -> Verdict:
    probe = measure_latency(original, inputs, repeats=3, warmup=1)
    repeats = pairs_for(probe.median_ms)
    timings = [measure_interleaved(original, optimized, inputs, repeats=repeats) for _ in range(ROUNDS)]
    return _verdict(timings)


def sign_test_z(a_ms: Sequence[float], b_ms: Sequence[float]) -> float:
    """z-score of "B is faster than A" over paired runs (ties count for neither)."""
    wins = sum(b < a for a, b in zip(a_ms, b_ms, strict=True))
    losses = sum(b > a for a, b in zip(a_ms, b_ms, strict=True))
    n = wins + losses
    return 0.0 if n == 0 else (wins - n / 2) / math.sqrt(n / 4)


def _verdict(timings: list[InterleavedTiming]) -> Verdict:
    a = np.concatenate([t.a.samples_ms for t in timings])
    b = np.concatenate([t.b.samples_ms for t in timings])
    ratios = b / a
    rounds = tuple(1.0 / t.paired_ratio for t in timings)
    p10, p90 = np.percentile(ratios, [10, 90])
    significant = all(sign_test_z(t.a.samples_ms, t.b.samples_ms) >= MIN_SIGN_Z for t in timings)
    return Verdict(
        faster=significant and all(r >= MIN_SPEEDUP for r in rounds),
        original_ms=float(np.median(a)),
        optimized_ms=float(np.median(b)),
        speedup=float(1.0 / np.median(ratios)),
        spread=float(p90 - p10),
        rounds=rounds,
    )
