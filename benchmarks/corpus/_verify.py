"""Check every cached model and print the corpus table.

A model passes when `onnx.checker.check_model(path, full_check=True)` accepts it and
ONNX Runtime (CPU, 2 intra-op threads) runs it on random inputs of its recorded shapes
(integer inputs drawn from their recorded ranges: token ids below the vocabulary size,
attention masks of ones).

It is flagged degenerate (a warning, not a failure) when, on those standard normal
inputs, a float output of at least `MIN_JUDGED` elements has more than `SATURATED_SHARE`
of its elements at its own min or max (saturated or constant), holds non-finite values,
or exceeds `MAX_ABS` in magnitude. Random weights with unfitted BatchNorm statistics do
that; numeric comparisons on such a model amplify rounding differences, and no trained
model looks like it.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from benchmarks.corpus._cache import Manifest

THREADS = 2
WARMUP_RUNS = 2
TIMED_RUNS = 10

SATURATED_SHARE = 0.5  # more than half the elements at the output's min or max
MAX_ABS = 1e4  # larger than any activation a normalized network produces on N(0, 1) inputs
MIN_JUDGED = 16  # in smaller outputs the min and max alone are a large share

# ORT's type strings for the input element types a corpus model may have.
_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32}


@dataclass(frozen=True)
class OutputStats:
    """One float output on random inputs: the share of its elements equal to its min or
    max (over the finite ones), its largest |value| and whether every value is finite."""

    name: str
    saturated: float
    max_abs: float
    finite: bool


def output_stats(name: str, value: np.ndarray) -> OutputStats | None:
    """Stats of a float output of at least `MIN_JUDGED` elements, else None."""
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.floating) or array.size < MIN_JUDGED:
        return None
    finite = array[np.isfinite(array)]
    if finite.size == 0:
        return OutputStats(name, 1.0, float("inf"), finite=False)
    low, high = finite.min(), finite.max()
    at_bounds = np.count_nonzero((finite == low) | (finite == high))
    return OutputStats(name, at_bounds / array.size, float(np.abs(array).max()),
                       finite=finite.size == array.size)


def degenerate_reason(outputs: list[OutputStats] | tuple[OutputStats, ...]) -> str | None:
    """Why these outputs make the model degenerate, or None."""
    reasons = []
    for stats in outputs:
        if not stats.finite:
            reasons.append(f"{stats.name} has non-finite values")
        if stats.saturated > SATURATED_SHARE:
            reasons.append(f"{stats.name} {stats.saturated:.1%} saturated at its min or max")
        if stats.max_abs > MAX_ABS:
            reasons.append(f"{stats.name} max |y| {stats.max_abs:.3g} > {MAX_ABS:g}")
    return "; ".join(reasons) or None


@dataclass(frozen=True)
class Row:
    name: str
    converter: str
    opset: int
    nodes: int
    top_ops: str
    size_mb: float
    ort_ms: float | None
    problem: str | None
    outputs: tuple[OutputStats, ...] = ()
    warning: str | None = None

    @property
    def saturated(self) -> float | None:
        """The largest saturated share over the float outputs (None: none was judged)."""
        return max((stats.saturated for stats in self.outputs), default=None)

    @property
    def max_abs(self) -> float | None:
        return max((stats.max_abs for stats in self.outputs), default=None)


def _size_mb(path: Path) -> float:
    files = [path, *path.parent.glob(path.name + ".data")]
    return sum(f.stat().st_size for f in files) / 1e6


def random_feeds(
    inputs: list[ort.NodeArg], shapes: dict[str, list[int]], ranges: dict[str, list[int]]
) -> dict[str, np.ndarray]:
    """One array per model input (seed 0): at its recorded shape (else its static dims,
    dynamic ones 1), uniform in [low, high) for an input with a recorded range (token
    ids, masks), standard normal otherwise, in the input's element type."""
    rng = np.random.default_rng(0)
    feeds = {}
    for meta in inputs:
        recorded = shapes.get(meta.name)
        shape = recorded or [d if isinstance(d, int) else 1 for d in meta.shape]
        dtype = _NUMPY_TYPES[meta.type]
        bounds = ranges.get(meta.name)
        if bounds is None:
            feeds[meta.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[meta.name] = rng.integers(bounds[0], bounds[1], shape).astype(dtype)
    return feeds


def _session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run_ort(
    path: Path, shapes: dict[str, list[int]], ranges: dict[str, list[int]] | None = None
) -> tuple[float, tuple[OutputStats, ...]]:
    """Median latency in ms of one ORT CPU run at `THREADS` intra-op threads on
    `random_feeds`, and the stats of the float outputs of the first run."""
    session = _session(path)
    feeds = random_feeds(session.get_inputs(), shapes, ranges or {})
    names = [meta.name for meta in session.get_outputs()]
    first = session.run(None, feeds)
    found = (output_stats(name, value) for name, value in zip(names, first, strict=True))
    outputs = tuple(stats for stats in found if stats is not None)
    for _ in range(WARMUP_RUNS - 1):
        session.run(None, feeds)
    times = []
    for _ in range(TIMED_RUNS):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), outputs


def check(manifest: Manifest, path: Path) -> Row:
    """Check and time one cached model; a failure is recorded in `problem`, not raised."""
    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(node.op_type for node in model.graph.node)
    top = ", ".join(f"{op} {count}" for op, count in ops.most_common(5))
    ms, problem, outputs = None, None, ()
    try:
        onnx.checker.check_model(str(path), full_check=True)
        ms, outputs = run_ort(path, manifest.input_shapes, manifest.input_ranges)
    except Exception as error:  # checker and ORT raise several unrelated types
        problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
    opset = manifest.opset.get("ai.onnx", manifest.opset.get("", 0))
    return Row(manifest.name, manifest.converter, opset, len(model.graph.node), top,
               _size_mb(path), ms, problem, outputs, degenerate_reason(outputs))


def _percent(share: float | None) -> str:
    return f"{share:6.1%}" if share is not None else f"{'-':>6}"


def _magnitude(value: float | None) -> str:
    return f"{value:8.3g}" if value is not None else f"{'-':>8}"


def format_table(rows: list[Row]) -> str:
    """One line per model; `sat` and `max|y|` are the worst over its float outputs."""
    header = (f"{'name':24} {'converter':38} {'opset':>5} {'nodes':>6} {'MB':>7} {'ORT ms':>8} "
              f"{'sat':>6} {'max|y|':>8}  top op types")
    lines = [header, "-" * len(header)]
    for row in rows:
        ms = f"{row.ort_ms:8.1f}" if row.ort_ms is not None else f"{'-':>8}"
        lines.append(
            f"{row.name:24} {row.converter:38} {row.opset:5d} {row.nodes:6d} "
            f"{row.size_mb:7.1f} {ms} {_percent(row.saturated)} {_magnitude(row.max_abs)}  "
            f"{row.top_ops}"
        )
        if row.problem:
            lines.append(f"{'':24} PROBLEM: {row.problem}")
        if row.warning:
            lines.append(f"{'':24} WARNING: degenerate: {row.warning}")
    return "\n".join(lines)
