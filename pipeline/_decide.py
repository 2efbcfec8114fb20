"""Is the optimized model really faster? The measured decision behind "never slower".

Both models are timed interleaved (A B, B A, ...) on the same inputs, spinning off, in
looks of about `LOOK_SECONDS` of wall time (at least `MIN_PAIRS` pairs), so that a 1 ms
model gets hundreds of pairs a look and a 300 ms model a dozen. The decision is one
sequential test over all the looks' order-balanced blocks: after at least `MIN_LOOKS`
looks the optimized model is faster once the median paired speedup is at least
`MIN_SPEEDUP` and the signed-rank test on the blocks' log ratios is significant
(`MIN_DECIDE_Z`); it is not faster as soon as the median shows no speedup at all, or after
`MAX_LOOKS` looks. The looks past `MIN_LOOKS` run only where they fit before the call's
deadline.

Why this and not two rounds that must each pass a sign test, as before: on a 2-core AVX2
host whose timing of a model against itself spread 0.89-1.11 (p10-p90 of block ratios),
two rounds of 12 pairs, each needing all 6 of its blocks won, passed a real 1.10x on
PP-OCRv4 det (80 ms a run) 12-28% of the time, replayed over recorded series; the corpus
run returned the original where the output measured 1.45x. The pooled signed-rank test
passes 1.10x there 96-98% of the time, 1.05x 25-46%, and never passed the model timed
against itself nor one 1-3% slower, on four recorded series (14-85 ms a run).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import onnxruntime as ort

from taso.backends import InterleavedTiming, ModelSource, run_model
from taso.backends._session import Provider, RunTiming
from taso.backends.compare import ReferenceRun, runnable
from taso.backends.cost_cache import CostCache, CostKey
from taso.backends.ort_backends import OrtCpuBackend
from taso.backends.timing import InterleavedPairs, order_balanced
from taso.errors import BackendError
from taso.ir import Graph
from taso.pipeline._export import export
from taso.search.sweep import Judgement

MIN_SPEEDUP = 1.01
"""The optimized model is returned only if the median paired speedup is at least this."""

LOOK_SECONDS = 1.0
MIN_PAIRS, MAX_PAIRS = 12, 400
MIN_LOOKS, MAX_LOOKS = 2, 4
PROBE_PAIRS = 3
MIN_DECIDE_Z = 2.81
"""The decision's significance: the signed-rank z of "B is faster" over all order-balanced
blocks so far (one-sided p < 0.0025 a look; at most three looks can pass, so under 1% for a
model no faster). With 12-pair looks, two looks (12 blocks) pass only if nearly every
block is won; four looks (24 blocks) pass a steady 5% gain."""


@dataclass(frozen=True)
class Verdict:
    faster: bool
    original_ms: float
    optimized_ms: float
    speedup: float  # median paired speedup over all looks
    spread: float  # p90 - p10 of the paired ratios B/A
    looks: tuple[float, ...]  # speedup of each look on its own
    cached: bool = False  # read from the cost cache (an earlier call's), not measured now
    decisions: int = 1  # 2: the first said not faster against this call's sweeps (`decide_contradicted`)


def pairs_for(per_run_ms: float, seconds: float = LOOK_SECONDS, minimum: int = MIN_PAIRS) -> int:
    """How many A/B pairs fit in `seconds` (two runs a pair), clamped, rounded down to
    an even count (whole order-balanced blocks)."""
    pairs = int(min(MAX_PAIRS, max(minimum, seconds * 1000.0 / max(2 * per_run_ms, 1e-3))))
    return max(2, pairs // 2 * 2)


DECIDE_WARMUP = 1
"""Untimed runs of each model before the probe pairs (which warm up too, and are not judged)."""


def _decide_on(pairs: InterleavedPairs, deadline: float = math.inf) -> Verdict:
    """One sequential decision on one pair of sessions (building a large model's session
    again would cost seconds): probe pairs, then looks until the verdict is settled. The
    first `MIN_LOOKS` looks always run (the call's budget reserved them); `deadline` bounds
    only the later ones."""
    pairs.extend(PROBE_PAIRS)
    look = pairs_for(float(np.median(pairs.a_ms)))
    begin = len(pairs.a_ms)
    speedups: list[float] = []
    while True:
        started = time.perf_counter()
        pairs.extend(look)
        speedups.append(1.0 / pairs.timing(since=len(pairs.a_ms) - look).paired_ratio)
        pooled = pairs.timing(since=begin)
        settled = _settled(pooled, len(speedups))
        if settled is not None:
            return _verdict(pooled, speedups, settled)
        now = time.perf_counter()
        if len(speedups) >= MAX_LOOKS or (len(speedups) >= MIN_LOOKS and now + (now - started) > deadline):
            return _verdict(pooled, speedups, False)


def _settled(pooled: InterleavedTiming, looks: int) -> bool | None:
    """Faster, not faster, or None: not settled yet."""
    speedup = 1.0 / pooled.paired_ratio
    if speedup < 1.0:
        return False
    if looks >= MIN_LOOKS and speedup >= MIN_SPEEDUP and balanced_rank_z(pooled.a.samples_ms, pooled.b.samples_ms) >= MIN_DECIDE_Z:
        return True
    return None


def decide_contradicted(pairs: InterleavedPairs, deadline: float = math.inf, *, contradicted: bool = False) -> Verdict:
    """`_decide_on`, and once more when it says not faster although this call's own sweeps,
    measured afresh, contradict it (`contradicted`), if a second decision, as long as the
    first would have been with its `MIN_LOOKS` looks, fits before `deadline`.

    On PP-OCRv4 det (65 ms a run) two kept sweeps measured 1.08x and 1.12x, then one
    decision said not faster and the call returned the original; the next run of the same
    call measured 1.57x. The second decision is whole and independent (its own probe and
    looks); either alone passes noise under 1%."""
    started = time.perf_counter()
    verdict = _decide_on(pairs, deadline)
    if verdict.faster or not contradicted:
        return verdict
    whole_s = (time.perf_counter() - started) * max(1.0, MIN_LOOKS / len(verdict.looks))
    if time.perf_counter() + whole_s > deadline:
        return verdict
    return replace(_decide_on(pairs, deadline), decisions=2)


def decide_seconds(timing: RunTiming) -> float:
    """About how long `Duel.verdict` takes on a model that loads and runs in `timing`
    (its `MIN_LOOKS` looks)."""
    runs = 2 * (1 + DECIDE_WARMUP + PROBE_PAIRS + MIN_LOOKS * pairs_for(timing.run_ms))
    return 2 * timing.session_s + runs * timing.run_ms / 1000


def longest_decide_seconds(timing: RunTiming) -> float:
    """About the longest `Duel.verdict` takes on a model timed at `timing`: its sessions,
    warm-up and probe pairs, and all `MAX_LOOKS` looks."""
    look_s = 2 * pairs_for(timing.run_ms) * timing.run_ms / 1000
    return decide_seconds(timing) + (MAX_LOOKS - MIN_LOOKS) * look_s


def balanced_sign_z(a_ms: Sequence[float], b_ms: Sequence[float]) -> float:
    """`sign_test_z` over order-balanced blocks of two pairs (see `order_balanced`)."""
    return sign_test_z(*order_balanced(a_ms, b_ms))


def sign_test_z(a_ms: Sequence[float], b_ms: Sequence[float]) -> float:
    """z-score of "B is faster than A" over paired samples (ties count for neither)."""
    wins = sum(b < a for a, b in zip(a_ms, b_ms, strict=True))
    losses = sum(b > a for a, b in zip(a_ms, b_ms, strict=True))
    n = wins + losses
    return 0.0 if n == 0 else (wins - n / 2) / math.sqrt(n / 4)


def balanced_rank_z(a_ms: Sequence[float], b_ms: Sequence[float]) -> float:
    """`rank_z` over the order-balanced blocks' log ratios (see `block_log_ratios`)."""
    return rank_z(block_log_ratios(a_ms, b_ms))


def block_log_ratios(current_ms: Sequence[float], candidate_ms: Sequence[float]) -> tuple[float, ...]:
    """log(current / candidate) of each order-balanced block: positive where the candidate ran faster."""
    current, candidate = order_balanced(current_ms, candidate_ms)
    return tuple(float(x) for x in np.log(current / np.maximum(candidate, 1e-9)))


def signed_rank_z(a_ms: Sequence[float], b_ms: Sequence[float]) -> float:
    """z-score of "B is faster than A" by Wilcoxon's signed-rank test on the paired log
    ratios log(A/B) (see `rank_z`)."""
    return rank_z(np.log(np.asarray(a_ms, dtype=float) / np.asarray(b_ms, dtype=float)))


def rank_z(log_ratios: Sequence[float]) -> float:
    """Wilcoxon's signed-rank z that the log ratios lean positive (zeros dropped; ties
    share their mean rank, the variance corrected). Under "no faster" the order-balanced
    blocks' log ratios are symmetric about zero."""
    d = np.asarray(log_ratios, dtype=float)
    d = d[d != 0.0]
    n = len(d)
    if n == 0:
        return 0.0
    _, inverse, counts = np.unique(np.abs(d), return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    ranks = (upper - (counts - 1) / 2.0)[inverse]  # mean rank of each tie group
    mean = n * (n + 1) / 4.0
    variance = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(counts**3 - counts)) / 48.0
    return 0.0 if variance <= 0 else (float(ranks[d > 0].sum()) - mean) / math.sqrt(variance)


def _verdict(pooled: InterleavedTiming, speedups: Sequence[float], faster: bool) -> Verdict:
    a, b = np.asarray(pooled.a.samples_ms), np.asarray(pooled.b.samples_ms)
    p10, p90 = np.percentile(b / a, [10, 90])
    return Verdict(
        faster=faster,
        original_ms=float(np.median(a)),
        optimized_ms=float(np.median(b)),
        speedup=float(1.0 / pooled.paired_ratio),
        spread=float(p90 - p10),
        looks=tuple(speedups),
    )


# --- verdicts remembered in the cost cache -------------------------------------------

_VERDICT_BACKEND = "taso-decision-v4"  # v2: order-balanced blocks; v3: candidate session built first; v4: sequential signed-rank
_VERDICT_FIELDS = ("faster", "original_ms", "optimized_ms", "spread")


def _pair_signature(first: Graph, second: Graph, inputs: Mapping[str, np.ndarray], kind: str) -> str:
    """Key of a timing verdict: both structural hashes and the input shapes (weights'
    values do not change latency)."""
    digest = hashlib.blake2b(digest_size=20)
    for part in (first.structural_hash, second.structural_hash):
        digest.update(part)
    digest.update(repr(sorted((k, getattr(v, "shape", ())) for k, v in inputs.items())).encode())
    return f"{kind}{digest.hexdigest()}"


def _verdict_keys(signature: str, fields: Sequence[str], device: Device) -> dict[str, CostKey]:
    return {f: CostKey(_VERDICT_BACKEND, device.label, ort.__version__, f"{signature}/{f}") for f in fields}


@dataclass(frozen=True)
class Device:
    """Where the check, the judge and the decision run: ORT providers and a label for the
    verdict cache (a verdict on one device says nothing of another)."""

    providers: tuple[Provider, ...]
    label: str
    exact_providers: tuple[Provider, ...] = ()
    """Where outputs are compared (float32 as stated, e.g. CUDA without TF32); empty: `providers`."""

    @classmethod
    def of(cls, runner: OrtRunner) -> Device:
        return cls(runner.providers, runner.device, runner.exact_providers)

    @property
    def check_providers(self) -> tuple[Provider, ...]:
        return self.exact_providers or self.providers


class OrtRunner(Protocol):
    @property
    def providers(self) -> tuple[Provider, ...]: ...

    @property
    def device(self) -> str: ...

    @property
    def exact_providers(self) -> tuple[Provider, ...]: ...


def cpu() -> Device:
    """ORT CPU, the default device."""
    return Device.of(OrtCpuBackend(cache=None))


class Duel:
    """The optimized model's check run and its measured decision, on one pair of sessions.

    The candidate's session is built once for both (on BERT-base a session costs ~2 s).
    Verdicts are remembered in the cost cache: timing is noisy, so two runs could decide
    differently; with the decision cached, the same input, settings and cost cache give
    the same output file (and a cached verdict needs no original's session at all).
    """

    def __init__(
        self, original_graph: Graph, optimized_graph: Graph, original: ModelSource, optimized: ModelSource,
        inputs: Mapping[str, np.ndarray], device: Device | None = None, *, recheck_not_faster: bool = False,
    ):
        """`recheck_not_faster`: this call's own fresh measurements contradict "not faster".
        Then a remembered "not faster" is measured again (and replaced): on a shared
        machine one verdict measured under load (PP-OCRv4 det: 189.7 ms against 159.6 ms)
        was replayed from the cache on every later run, though the sweeps kept measured
        1.07-1.24x each time; measured afresh it was 1.56x. And a fresh "not faster" gets
        a second decision where it fits (`decide_contradicted`)."""
        self._sources, self.inputs = (original, optimized), inputs
        self._device = device or cpu()
        self._cache = CostCache()
        signature = _pair_signature(original_graph, optimized_graph, inputs, "")
        self._keys = _verdict_keys(signature, _VERDICT_FIELDS, self._device)
        self._remembered = self._cached()
        self._contradicted = recheck_not_faster
        if recheck_not_faster and self._remembered is not None and not self._remembered.faster:
            self._remembered = None
        self._pairs: InterleavedPairs | None = None

    def optimized_outputs(self) -> dict[str, np.ndarray]:
        """The optimized model's outputs; raises BackendError if ORT refuses it."""
        if self._remembered is not None or self._device.check_providers != self._device.providers:
            return run_model(self._sources[1], self.inputs, providers=self._device.check_providers)
        self._pairs = self._interleaved()
        return self._pairs.second_outputs()

    def _interleaved(self) -> InterleavedPairs:
        return InterleavedPairs(*self._sources, self.inputs, warmup=DECIDE_WARMUP, providers=self._device.providers)

    def verdict(self, deadline: float = math.inf) -> Verdict:
        """The measured decision; `deadline` (a `time.perf_counter()` value, the call's
        budget) bounds the later looks, never the first `MIN_LOOKS`."""
        if self._remembered is not None:
            return self._remembered
        pairs = self._pairs or self._interleaved()
        self._pairs = None  # the sessions are released once decided
        verdict = decide_contradicted(pairs, deadline, contradicted=self._contradicted)
        values = (float(verdict.faster), verdict.original_ms, verdict.optimized_ms, verdict.spread)
        for field_name, value in zip(_VERDICT_FIELDS, values, strict=True):
            self._cache.put(self._keys[field_name], value)
        return verdict

    def _cached(self) -> Verdict | None:
        cached = {f: self._cache.get(k) for f, k in self._keys.items()}
        if any(v is None for v in cached.values()):
            return None
        faster, original_ms, optimized_ms, spread = (float(cached[f]) for f in _VERDICT_FIELDS)  # type: ignore[arg-type]
        return Verdict(bool(faster), original_ms, optimized_ms, original_ms / optimized_ms, spread, (), cached=True)


# --- the sweep's judge ------------------------------------------------------------------

AHEAD_SIGN_Z = 1.0
"""A judgement the deadline cut short says "faster" (incomplete) when the candidate was
ahead so far: a median speedup of `MIN_SPEEDUP` and more blocks won than lost by this z."""


def _cut_short(pairs: InterleavedPairs) -> Judgement:
    """The verdict of looks the deadline interrupted: incomplete, and faster only if ahead."""
    speedup = 1.0 / pairs.timing().paired_ratio
    ahead = speedup >= MIN_SPEEDUP and balanced_sign_z(pairs.a_ms, pairs.b_ms) >= AHEAD_SIGN_Z
    return Judgement(speedup, ahead, complete=False, evidence=block_log_ratios(pairs.a_ms, pairs.b_ms))


JUDGE_LOOK_SECONDS = 0.4
"""Pairs are timed in looks of about this long (at least `JUDGE_MIN_PAIRS` pairs)."""
JUDGE_MIN_PAIRS = 12
JUDGE_MAX_LOOKS = 4
JUDGE_Z = 1.64
"""The sweep judge's own bar: the signed-rank z of "the candidate is faster" over the
order-balanced blocks (one-sided p < 0.05 a look). Lenient on purpose: every sweep it finds
faster is confirmed (`CONFIRM_Z`) before it is kept."""
CONFIRM_Z = 2.58
"""The confirmation's bar: the signed-rank z over the judgement's and the confirmation's
blocks together (one-sided p < 0.005 a look), the confirmation's own median showing a gain.

Why one test over both looks rather than two verdicts, each of which must pass: replayed
over series recorded on a 2-core AVX2 host (models timed against themselves, 14-85 ms a
run, block ratios p10-p90 0.89-1.11), the two verdicts (a sign test at z 2.33 forward,
then the reverse look's median) kept a real 1.05x on PP-OCRv4 det 49% and 64% of the
time, 1.07x 85% and 81%, and an equal sweep 1.0-2.9%; the pooled test keeps 1.05x 79% and
72%, 1.07x 95% and 93%, an equal sweep 0.6-1.1%, with about as many pairs timed."""
_JUDGEMENT_FIELDS = ("faster", "speedup")
MAX_JUDGED_MS = 100.0
"""Models slower than this per run are not judged end to end (a look would take over two
seconds) unless the budget affords it (`Budget.slowest_judged_ms`); the sweep phase is
skipped for them."""


@dataclass
class MeasuredJudge:
    """Judges a candidate graph against the current one, interleaved on ORT, sequentially.

    Pairs are timed in looks; after each look the verdict is: faster once the median
    paired speedup is at least `MIN_SPEEDUP` and the signed-rank test over the blocks
    reaches `JUDGE_Z`; not faster as soon as the candidate measures slower, or after
    `JUDGE_MAX_LOOKS` looks. A clear loser costs one short look, a small real gain gets up
    to four looks' worth of pairs. A verdict of faster is only a first stage: the sweep
    asks for a confirmation (`confirm`), looks timed the other way round (the candidate's
    session in the current graph's place) and tested together with the first stage's
    blocks (`CONFIRM_Z`). The final decision against the original, its own looks, still
    stands guard. A candidate ORT refuses is not faster. Verdicts are cached like
    `Duel`'s, so re-runs are deterministic.
    """

    inputs: Mapping[str, np.ndarray]
    per_run_ms: float
    device: Device = field(default_factory=cpu)
    data_folder: str | None = None
    """Where the model's external weights live (candidates reference them, never copy them)."""
    _exported: dict[bytes, ModelSource] = field(default_factory=dict, repr=False)

    @classmethod
    def for_reference(cls, reference: ReferenceRun, device: Device | None = None, *,
                      max_run_ms: float = MAX_JUDGED_MS, data_folder: str | None = None) -> MeasuredJudge | None:
        """A judge on the reference run's inputs (on `device`, where the reference ran), or
        None if the model is slower than `max_run_ms` per run (or ORT could not run it)."""
        timing = reference.timing
        if reference.error is not None or timing is None or timing.run_ms > max_run_ms:
            return None
        return cls(reference.inputs, timing.run_ms, device or cpu(), data_folder)

    def __call__(self, current: Graph, candidate: Graph, deadline: float = math.inf, *, look: int = 0,
                 confirm: Judgement | None = None) -> Judgement:
        if confirm is not None:
            kind = "judge-confirm/"
        else:
            kind = "judge-sequential/" if look == 0 else f"judge-sequential/look-{look}/"  # a tie-break: its own verdict
        signature = _pair_signature(current, candidate, self.inputs, kind)
        cache, keys = CostCache(), _verdict_keys(signature, _JUDGEMENT_FIELDS, self.device)
        faster, speedup = cache.get(keys["faster"]), cache.get(keys["speedup"])
        if faster is not None and speedup is not None:
            return Judgement(speedup, bool(faster), cached=True, evidence=())
        if confirm is None:
            judgement = self._measure(current, candidate, deadline)
        else:
            judgement = self._confirm(current, candidate, confirm.evidence or (), deadline)
        if judgement.complete:
            cache.put(keys["faster"], float(judgement.faster))
            cache.put(keys["speedup"], judgement.speedup)
        return judgement

    def _measure(self, current: Graph, candidate: Graph, deadline: float) -> Judgement:
        """Look after look until the verdict is clear; incomplete if the next look (or,
        at the start, the sessions plus one look) would end past `deadline`."""
        look, look_s = self._look()
        if time.perf_counter() + 2 * look_s > deadline:
            return Judgement(1.0, False, complete=False)
        try:
            pairs = InterleavedPairs(self._export(current), self._runnable(candidate), self.inputs, warmup=2,
                                     providers=self.device.providers)
            for looked in range(JUDGE_MAX_LOOKS):
                if time.perf_counter() + look_s > deadline:
                    return Judgement(1.0, False, complete=False) if looked == 0 else _cut_short(pairs)
                pairs.extend(look)
                speedup = 1.0 / pairs.timing().paired_ratio
                evidence = block_log_ratios(pairs.a_ms, pairs.b_ms)
                if speedup >= MIN_SPEEDUP and rank_z(evidence) >= JUDGE_Z:
                    return Judgement(speedup, True, evidence=evidence)
                if speedup < 1.0:
                    break
        except BackendError:
            return Judgement(0.0, False)
        return Judgement(speedup, False, evidence=evidence)

    def _confirm(self, current: Graph, candidate: Graph, first: tuple[float, ...], deadline: float) -> Judgement:
        """Looks timed the other way round (the candidate as the first model), each tested
        with the `first` stage's blocks: confirmed once the blocks together are significant
        (`CONFIRM_Z`) and these looks on their own show a gain; not as soon as the blocks
        together show none, or after `JUDGE_MAX_LOOKS` looks; incomplete if the deadline
        comes first. (Ending at once when these looks alone show no gain threw away more
        real gains in the replays: 1.05x on EfficientNet-B0 91% kept, against 97%.)"""
        look, look_s = self._look()
        if time.perf_counter() + 2 * look_s > deadline:
            return Judgement(1.0, False, complete=False)
        try:
            pairs = InterleavedPairs(self._runnable(candidate), self._export(current), self.inputs, warmup=2,
                                     providers=self.device.providers)
            for _ in range(JUDGE_MAX_LOOKS):
                if time.perf_counter() + look_s > deadline:
                    return Judgement(1.0, False, complete=False)
                pairs.extend(look)
                again = block_log_ratios(pairs.b_ms, pairs.a_ms)  # the current graph's times are B's here
                evidence = first + again
                speedup = math.exp(float(np.median(evidence)))
                if speedup <= 1.0:
                    break
                if np.median(again) > 0.0 and speedup >= MIN_SPEEDUP and rank_z(evidence) >= CONFIRM_Z:
                    return Judgement(speedup, True, evidence=evidence)
        except BackendError:
            return Judgement(0.0, False)
        return Judgement(speedup, False, evidence=evidence)

    def _look(self) -> tuple[int, float]:
        """Pairs a look, and the seconds it takes."""
        look = pairs_for(self.per_run_ms, JUDGE_LOOK_SECONDS, JUDGE_MIN_PAIRS)
        return look, 2 * look * self.per_run_ms / 1000

    def _export(self, graph: Graph) -> ModelSource:
        key = graph.structural_hash
        if key not in self._exported:
            self._exported.clear()  # keep only the current graph's model
            self._exported[key] = self._runnable(graph)
        return self._exported[key]

    def _runnable(self, graph: Graph) -> ModelSource:
        model = export(graph)
        return model if self.data_folder is None else runnable(model, self.data_folder)
