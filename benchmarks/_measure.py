"""Measuring one benchmark model against the baseline: noise row, then one row per tool.

For one model: random inputs (at the shapes of the job's `ToolOptions.shapes`, the same
`--shape` spec taso gets, when given) and the original's reference outputs; the noise row (the
original timed interleaved against a byte-for-byte copy of itself); then for each tool a
fresh-subprocess run, its output's IR version capped to what ONNX Runtime loads, its
output compared with the reference on the same inputs, and its output timed interleaved
against the original (A B, B A, ...) under ORT_ENABLE_ALL. A tool's ratio is claimed as
faster or slower only when its median paired ratio lies outside the noise row's p10-p90.

A pair whose baseline ran far from the original's quiet latency (`_QuietLatency`: its look
interleaved with itself before the noise row, and the pairs kept since) was timed while
something else loaded the machine; the paired ratio does not cancel that, since a stolen
core slows many-op graphs more than few-op ones. Such a pair is timed again (at most
`TimingPlan.retimes` times) and the timing whose baseline is nearest the quiet latency is
kept; the row says how often (`PairTiming.retimed`).
"""

from __future__ import annotations

import enum
import hashlib
import shutil
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from benchmarks._tools import Tool, ToolOptions, ToolRun, ToolStatus, run_tool
from taso import backends
from taso.errors import TasoError

NOISE_ROW = "baseline vs itself"


@dataclass(frozen=True)
class TimingPlan:
    """How many interleaved iterations to run: a fixed count, or a time per pair."""

    seconds_per_pair: float = 10.0
    min_repeats: int = 20
    max_repeats: int = 1000
    fixed_repeats: int | None = None
    warmup: int = 5
    threads: int = 2
    quiet_seconds: float = 1.0  # the original interleaved with itself for the quiet reference latency
    disturbed: float = 1.15  # a pair's baseline this far (either way) from quiet: time again
    retimes: int = 2

    def repeats_for(self, latency_ms: float) -> int:
        if self.fixed_repeats is not None:
            return self.fixed_repeats
        wanted = int(self.seconds_per_pair * 1000 / max(2 * latency_ms, 1e-3))
        return max(self.min_repeats, min(self.max_repeats, wanted))


class RowStatus(enum.Enum):
    MEASURED = "measured"
    NOT_INSTALLED = "not installed"
    TOOL_FAILED = "tool failed"
    TOOL_TIMED_OUT = "tool timed out"
    OUTPUT_FAILED = "output not runnable"
    MODEL_FAILED = "model failed"


_FROM_TOOL = {
    ToolStatus.NOT_INSTALLED: RowStatus.NOT_INSTALLED,
    ToolStatus.FAILED: RowStatus.TOOL_FAILED,
    ToolStatus.TIMED_OUT: RowStatus.TOOL_TIMED_OUT,
}


class Verdict(enum.Enum):
    FASTER = "faster"
    SLOWER = "slower"
    WITHIN_NOISE = "within noise"
    SAME_GRAPH = "same graph"  # the tool returned the input's graph: any difference is noise
    NOT_APPLICABLE = "n/a"


@dataclass(frozen=True)
class PairTiming:
    """Baseline (A) and candidate (B) timed interleaved; ratios are B / A (< 1 is faster)."""

    repeats: int
    baseline_median_ms: float
    candidate_median_ms: float
    ratio: float  # median of per-iteration ratios
    ratio_p10: float
    ratio_p90: float
    retimed: int = 0  # times the pair was timed again because its baseline was disturbed

    @classmethod
    def from_timing(cls, timing: backends.InterleavedTiming, repeats: int) -> PairTiming:
        return cls(
            repeats,
            timing.a.median_ms,
            timing.b.median_ms,
            timing.paired_ratio,
            timing.paired_ratio_p10,
            timing.paired_ratio_p90,
        )

    def drift(self, quiet_ms: float) -> float:
        """How far (a factor, >= 1) this pair's baseline ran from the quiet latency."""
        ratio = self.baseline_median_ms / quiet_ms
        return max(ratio, 1 / ratio)

    def verdict_against(self, noise: PairTiming | None) -> Verdict:
        if noise is None:
            return Verdict.NOT_APPLICABLE
        if self.ratio < noise.ratio_p10:
            return Verdict.FASTER
        if self.ratio > noise.ratio_p90:
            return Verdict.SLOWER
        return Verdict.WITHIN_NOISE


@dataclass(frozen=True)
class Row:
    """One line of the results table: a model and a tool (or the noise row)."""

    model: str
    tool: str
    status: RowStatus
    nodes_before: int | None = None
    nodes_after: int | None = None
    timing: PairTiming | None = None
    verdict: Verdict = Verdict.NOT_APPLICABLE
    tool_run: ToolRun | None = None
    max_abs_diff: float | None = None
    outputs_match: bool | None = None
    ir_lowered_from: int | None = None
    error: str = ""


@dataclass(frozen=True)
class ModelJob:
    """Everything needed to measure one model: where it is and where tools may write.

    `options.shapes`, when set, is the input shape profile of both the tools and the timing."""

    name: str
    path: Path
    workdir: Path
    tools: tuple[Tool, ...]
    plan: TimingPlan
    options: ToolOptions
    tool_timeout_s: float


@dataclass(frozen=True)
class _Baseline:
    path: Path
    inputs: Mapping[str, np.ndarray]
    reference: Mapping[str, np.ndarray]
    nodes: int
    repeats: int
    graph_digest: bytes  # `_graph_digest` of the original
    quiet: _QuietLatency


@dataclass
class _QuietLatency:
    """The original's quiet latency, which each pair's baseline is held to (`_time_pair`):
    the median of its latency interleaved with itself before any pair (`_quiet_ms`) and of
    the baseline of every pair kept since. One look of a second is itself a sample of a
    shared machine (RegNetX: 6.9, 7.0 and 7.3 ms in three looks a minute apart); the median
    of the model's looks so far is steadier, and a loaded pair still stands out of it."""

    samples: list[float]

    @property
    def ms(self) -> float:
        return statistics.median(self.samples)


def measure_model(job: ModelJob, say: Callable[[str], None]) -> list[Row]:
    """The noise row and one row per tool for `job`; failures become rows, never raise."""
    try:
        baseline = _prepare(job)
    except Exception as error:  # noqa: BLE001 - one broken model must not stop the suite
        return [Row(job.name, NOISE_ROW, RowStatus.MODEL_FAILED, error=_one_line(error))]
    say(f"{job.name}: {baseline.nodes} nodes, {baseline.repeats} interleaved iterations per pair")
    noise_row = _noise_row(job, baseline)
    say(f"{job.name}: {NOISE_ROW}: {_ratio_text(noise_row.timing)}")
    rows = [noise_row]
    for tool in job.tools:
        row = _tool_row(job, baseline, tool, noise_row.timing)
        say(f"{job.name}: {tool.name}: {row.status.value} {_ratio_text(row.timing)} {row.error}")
        rows.append(row)
    return rows


def _prepare(job: ModelJob) -> _Baseline:
    shapes = backends.ShapeProfile.parse(job.options.shapes) if job.options.shapes else None
    inputs = backends.make_inputs(job.path, profile=shapes)
    reference = backends.run_model(job.path, inputs, threads=job.plan.threads)
    estimate = backends.measure_latency(
        job.path, inputs, repeats=5, warmup=1, threads=job.plan.threads
    )
    nodes = _count_nodes(job.path)
    repeats = job.plan.repeats_for(estimate.median_ms)
    digest = _graph_digest(job.path)
    quiet_ms = _quiet_ms(job.path, inputs, estimate.median_ms, job.plan)
    return _Baseline(job.path, inputs, reference, nodes, repeats, digest, _QuietLatency([quiet_ms]))


def _quiet_ms(path: Path, inputs: Mapping[str, np.ndarray], estimate_ms: float, plan: TimingPlan) -> float:
    """The original's median latency in about `plan.quiet_seconds` of pairs interleaved
    with itself, before any tool's pair: the quiet reference `_time_pair` holds each pair's
    baseline to. Interleaved, as every pair is timed: on some models the original timed
    alone ran more than 15% from the same original interleaved (PP-MobileNetV3, PP-OCRv3 rec,
    RegNetX), so every one of their pairs was retimed twice (runs took 47 min, not 37)."""
    repeats = max(5, int(plan.quiet_seconds * 1000 / max(2 * estimate_ms, 1e-3)))
    timing = backends.measure_interleaved(path, path, inputs, repeats=repeats, warmup=1, threads=plan.threads)
    return timing.a.median_ms


def _noise_row(job: ModelJob, baseline: _Baseline) -> Row:
    folder = job.workdir / f"{job.name}-copy"
    copy = _copy_with_data(baseline.path, folder)
    try:
        timing = _time_pair(baseline, copy, job.plan)
    except TasoError as error:
        return Row(
            job.name, NOISE_ROW, RowStatus.OUTPUT_FAILED, baseline.nodes, error=_one_line(error)
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Row(job.name, NOISE_ROW, RowStatus.MEASURED, baseline.nodes, baseline.nodes, timing)


def _copy_with_data(source: Path, folder: Path) -> Path:
    """A byte-identical copy of the model in `folder`, with the external data files its
    initializers name beside it (the dynamo exporter writes weights to model.onnx.data)."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / source.name
    shutil.copyfile(source, copy)
    model = onnx.load(source, load_external_data=False)
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = {entry.key: entry.value for entry in tensor.external_data}["location"]
            if not (folder / location).exists():
                shutil.copyfile(source.parent / location, folder / location)
    return copy


def _tool_row(job: ModelJob, baseline: _Baseline, tool: Tool, noise: PairTiming | None) -> Row:
    output = job.workdir / f"{job.name}-{tool.name}.onnx"
    try:
        run = run_tool(
            tool, baseline.path, output, options=job.options, timeout_s=job.tool_timeout_s
        )
        if not run.ok:
            return Row(
                job.name,
                tool.name,
                _FROM_TOOL[run.status],
                baseline.nodes,
                tool_run=run,
                error=run.error,
            )
        return _measure_output(job, baseline, tool, run, output, noise)
    finally:
        output.unlink(missing_ok=True)


def _measure_output(
    job: ModelJob,
    baseline: _Baseline,
    tool: Tool,
    run: ToolRun,
    output: Path,
    noise: PairTiming | None,
) -> Row:
    common: dict[str, object] = {"nodes_before": baseline.nodes, "tool_run": run}
    try:
        lowered_from, nodes_after = _cap_ir_version(output)
        common |= {"nodes_after": nodes_after, "ir_lowered_from": lowered_from}
        same = _graph_digest(output) == baseline.graph_digest
        candidate = backends.run_model(output, baseline.inputs, threads=job.plan.threads)
        comparison = backends.compare_outputs(baseline.reference, candidate)
        match = comparison.passed or _same_semantics(baseline, output, candidate) or \
            _within_rounding(baseline, comparison, candidate)
        timing = _time_pair(baseline, output, job.plan)
    except Exception as error:  # noqa: BLE001 - a tool's output may be broken in any way
        return Row(job.name, tool.name, RowStatus.OUTPUT_FAILED, error=_one_line(error), **common)
    return Row(
        job.name,
        tool.name,
        RowStatus.MEASURED,
        timing=timing,
        verdict=Verdict.SAME_GRAPH if same else timing.verdict_against(noise),
        max_abs_diff=_max_abs_diff(comparison),
        outputs_match=match,
        error="" if match else _one_line(comparison.summary()),
        **common,
    )


def _same_semantics(baseline: _Baseline, output: Path, candidate: dict[str, np.ndarray]) -> bool:
    """Outputs that differ from the baseline's only as ORT's own kernels make the baseline
    differ from the ONNX semantics (`backends.compare_semantics`, the check `optimize_onnx`
    makes), for every tool alike."""
    try:
        return backends.compare_semantics(baseline.path, output, baseline.inputs, baseline.reference, candidate).passed
    except Exception:  # noqa: BLE001 - a tool's output may not run unoptimized
        return False


def _within_rounding(baseline: _Baseline, comparison: backends.Comparison, candidate: dict[str, np.ndarray]) -> bool:
    """Outputs within the baseline's own float32 rounding floor (`backends.compare_rounding`,
    the check `optimize_onnx` makes last), for every tool alike."""
    try:
        return backends.compare_rounding(baseline.path, baseline.inputs, comparison, baseline.reference,
                                         candidate).passed
    except Exception:  # noqa: BLE001 - the baseline may not run with its weights moved (external data)
        return False


def _time_pair(baseline: _Baseline, candidate: Path, plan: TimingPlan) -> PairTiming:
    """The pair timed interleaved, again while its baseline drifted from the quiet latency."""
    quiet_ms = baseline.quiet.ms
    timings = [_time_once(baseline, candidate, plan)]
    while timings[-1].drift(quiet_ms) > plan.disturbed and len(timings) <= plan.retimes:
        timings.append(_time_once(baseline, candidate, plan))
    best = min(timings, key=lambda timing: timing.drift(quiet_ms))
    baseline.quiet.samples.append(best.baseline_median_ms)
    return replace(best, retimed=len(timings) - 1)


def _time_once(baseline: _Baseline, candidate: Path, plan: TimingPlan) -> PairTiming:
    timing = backends.measure_interleaved(
        baseline.path,
        candidate,
        baseline.inputs,
        repeats=baseline.repeats,
        warmup=plan.warmup,
        threads=plan.threads,
    )
    return PairTiming.from_timing(timing, baseline.repeats)


def _cap_ir_version(path: Path) -> tuple[int | None, int]:
    """Lower the file's IR version to what ORT loads; return (original if lowered, node count)."""
    model = onnx.load(path)
    limit = backends.max_ir_version()
    if model.ir_version <= limit:
        return None, len(model.graph.node)
    original = model.ir_version
    model.ir_version = limit
    onnx.save(model, path)
    return original, len(model.graph.node)


def _graph_digest(path: Path) -> bytes:
    """A digest of the model's graph (nodes, weights, signature), not of the file: equal
    for a tool output that holds the input's graph unchanged."""
    graph = onnx.load(path).graph.SerializeToString(deterministic=True)
    return hashlib.blake2b(graph, digest_size=32).digest()


def _count_nodes(path: Path) -> int:
    return len(onnx.load(path, load_external_data=False).graph.node)


def _max_abs_diff(comparison: backends.Comparison) -> float | None:
    diffs = [d for d in comparison.max_abs_diffs().values() if d is not None]
    return max(diffs) if diffs else None


def _ratio_text(timing: PairTiming | None) -> str:
    if timing is None:
        return ""
    return f"ratio {timing.ratio:.3f} (p10-p90 {timing.ratio_p10:.3f}-{timing.ratio_p90:.3f})"


def _one_line(error: BaseException | str) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."
