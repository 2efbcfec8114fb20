"""The keep-or-return decision: only a consistent, significant speedup keeps the optimized model."""

from __future__ import annotations

from taso._decide import MIN_SIGN_Z, _verdict, pairs_for, sign_test_z
from taso.backends import InterleavedTiming, LatencyStats


def _timing(a: list[float], b: list[float]) -> InterleavedTiming:
    ratios = sorted(y / x for x, y in zip(a, b, strict=True))
    median = ratios[len(ratios) // 2]
    return InterleavedTiming(
        LatencyStats.from_samples(a), LatencyStats.from_samples(b), median, median, ratios[len(ratios) // 10],
        ratios[len(ratios) * 9 // 10],
    )


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
    assert pairs_for(1.0) == 400 and pairs_for(500.0) == 10 and pairs_for(10.0) == 50
