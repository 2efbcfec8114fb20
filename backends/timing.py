"""Latency measurement on ONNX Runtime: `measure_latency` and `measure_interleaved`.

Both build sessions with ORT_ENABLE_ALL (what users run) and, by default, with intra-op
spinning off: an ORT session's idle threads busy-wait after each run, so when two
sessions alternate on a small machine the first steals cores from the second and the
comparison is biased. Interleaved timing alternates the order per iteration (A B, B A,
A B, ...) so that neither model always runs first, keeps every per-iteration sample,
and reports both the ratio of medians and the median of paired ratios (robust to slow
drifts of the machine's speed).

Paired ratios are taken over order-balanced blocks of two consecutive pairs (A B B A),
never over single pairs: a run right after the *other* model finds the caches cold.
Measured on NasRNN (2.5 ms): B after A was 8% slower than A, A after B 41% slower than
B, so single-pair ratios were bimodal (0.59 and 1.08) and a real 1.25x won only 52% of
the pairs; over A B B A blocks, each model once first and once second, it won 88%.

B's session (the candidate's, by convention) is built before A's: the session built
later ran faster. Timing a model against itself gave B/A of 0.970-0.986 (NasRNN),
0.988-0.993 (MobileNetV3) and 0.988-1.001 (BERT-base) with B built second, and 1.001-1.020,
1.002-1.005 and 1.003-1.008 with B built first; on BERT-base that bias had let a 1%
phantom pass the measured decision. Built first, the candidate bears the bias.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from taso.backends._session import (
    GraphOptimization,
    ModelSource,
    Provider,
    SessionConfig,
    Spinning,
    call_ort,
    create_session,
    run_session,
)
from taso.errors import UsageError

DEFAULT_REPEATS = 30
DEFAULT_WARMUP = 5


@dataclass(frozen=True)
class LatencyStats:
    """Summary of latency samples in milliseconds (all samples kept, in run order)."""

    samples_ms: tuple[float, ...]
    median_ms: float
    p10_ms: float
    p25_ms: float
    p75_ms: float
    p90_ms: float
    min_ms: float

    @classmethod
    def from_samples(cls, samples_ms: list[float] | tuple[float, ...]) -> LatencyStats:
        if not samples_ms:
            raise UsageError("no latency samples")
        p10, p25, median, p75, p90 = np.percentile(samples_ms, [10, 25, 50, 75, 90])
        return cls(
            tuple(samples_ms),
            float(median),
            float(p10),
            float(p25),
            float(p75),
            float(p90),
            float(min(samples_ms)),
        )

    @property
    def iqr_ms(self) -> float:
        return self.p75_ms - self.p25_ms


@dataclass(frozen=True)
class InterleavedTiming:
    """Two models timed alternately on the same inputs; ratios are B over A."""

    a: LatencyStats
    b: LatencyStats
    ratio: float
    paired_ratio: float
    paired_ratio_p10: float
    paired_ratio_p90: float

    @property
    def speedup(self) -> float:
        """How many times faster B is than A (A / B, from the paired ratio)."""
        return 1.0 / self.paired_ratio


class _TimedSession:
    """A session with its feeds and output names fixed, ready to be timed."""

    def __init__(self, model: ModelSource, inputs: Mapping[str, np.ndarray], config: SessionConfig):
        self.session = create_session(model, config)
        names = {value.name for value in self.session.get_inputs()}
        self.feeds = {name: value for name, value in inputs.items() if name in names}
        self.outputs = [value.name for value in self.session.get_outputs()]

    def run_once(self) -> float:
        """One run; returns its wall time in milliseconds."""
        start = time.perf_counter_ns()
        self.session.run(self.outputs, self.feeds)
        return (time.perf_counter_ns() - start) / 1e6

    def run_checked(self) -> float:
        return call_ort("running the model in onnxruntime", self.run_once)


def _config(threads: int, spinning: Spinning, providers: tuple[Provider, ...]) -> SessionConfig:
    return SessionConfig(
        threads=threads, optimization=GraphOptimization.ALL, spinning=spinning, providers=providers
    )


@contextmanager
def _quiet_gc() -> Iterator[None]:
    """Keep the garbage collector from pausing inside a timed run."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def measure_latency(
    model: ModelSource,
    inputs: Mapping[str, np.ndarray],
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    threads: int = 2,
    spinning: Spinning = Spinning.OFF,
    providers: tuple[Provider, ...] = ("CPUExecutionProvider",),
) -> LatencyStats:
    """Time `model` alone: `warmup` untimed runs, then `repeats` timed runs."""
    _check_counts(repeats, warmup)
    timed = _TimedSession(model, inputs, _config(threads, spinning, providers))
    timed.run_checked()  # the first run surfaces ORT errors as BackendError
    for _ in range(warmup):
        timed.run_once()
    with _quiet_gc():
        samples = [timed.run_once() for _ in range(repeats)]
    return LatencyStats.from_samples(samples)


def measure_interleaved(
    model_a: ModelSource,
    model_b: ModelSource,
    inputs: Mapping[str, np.ndarray],
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    threads: int = 2,
    spinning: Spinning = Spinning.OFF,
    providers: tuple[Provider, ...] = ("CPUExecutionProvider",),
) -> InterleavedTiming:
    """Time A and B alternately (order swapped every iteration) on the same inputs."""
    _check_counts(repeats, warmup)
    pairs = InterleavedPairs(model_a, model_b, inputs, warmup=warmup, threads=threads, spinning=spinning, providers=providers)
    pairs.extend(repeats)
    return pairs.timing()


class InterleavedPairs:
    """Two sessions timed alternately, pair by pair, for as many pairs as the caller asks.

    For sequential decisions: time a few pairs, look, time more if still undecided,
    without building the sessions again.
    """

    def __init__(
        self,
        model_a: ModelSource,
        model_b: ModelSource,
        inputs: Mapping[str, np.ndarray],
        *,
        warmup: int = DEFAULT_WARMUP,
        threads: int = 2,
        spinning: Spinning = Spinning.OFF,
        providers: tuple[Provider, ...] = ("CPUExecutionProvider",),
    ):
        config = _config(threads, spinning, providers)
        self._second = _TimedSession(model_b, inputs, config)  # B first: see the module's note
        self._first = _TimedSession(model_a, inputs, config)
        self._second.run_checked()
        self._first.run_checked()
        for _ in range(warmup):
            self._first.run_once()
            self._second.run_once()
        self.a_ms: list[float] = []
        self.b_ms: list[float] = []

    def second_outputs(self) -> dict[str, np.ndarray]:
        """B's outputs, from one more (untimed) run."""
        return run_session(self._second.session, self._second.feeds)

    def extend(self, pairs: int) -> None:
        """Time `pairs` more pairs, alternating which model runs first."""
        with _quiet_gc():
            for _ in range(pairs):
                if len(self.a_ms) % 2 == 0:
                    self.a_ms.append(self._first.run_once())
                    self.b_ms.append(self._second.run_once())
                else:
                    self.b_ms.append(self._second.run_once())
                    self.a_ms.append(self._first.run_once())

    def timing(self, since: int = 0) -> InterleavedTiming:
        """The pairs timed so far, from pair `since` on."""
        return _interleaved(self.a_ms[since:], self.b_ms[since:])


def order_balanced(a_ms: Sequence[float], b_ms: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's time summed over blocks of two consecutive pairs, which ran in
    opposite orders (a trailing odd pair is left out; a single pair is kept as it is)."""
    a, b = np.asarray(a_ms, dtype=float), np.asarray(b_ms, dtype=float)
    whole = len(a) // 2 * 2
    if whole == 0:
        return a, b
    return a[:whole].reshape(-1, 2).sum(axis=1), b[:whole].reshape(-1, 2).sum(axis=1)


def _interleaved(a_samples: list[float], b_samples: list[float]) -> InterleavedTiming:
    a, b = LatencyStats.from_samples(a_samples), LatencyStats.from_samples(b_samples)
    a_blocks, b_blocks = order_balanced(a_samples, b_samples)
    ratios = b_blocks / np.maximum(a_blocks, 1e-9)
    p10, median, p90 = np.percentile(ratios, [10, 50, 90])
    return InterleavedTiming(
        a, b, b.median_ms / max(a.median_ms, 1e-9), float(median), float(p10), float(p90)
    )


def _check_counts(repeats: int, warmup: int) -> None:
    if repeats < 1 or warmup < 0:
        raise UsageError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")


def ort_version() -> str:
    return ort.__version__
