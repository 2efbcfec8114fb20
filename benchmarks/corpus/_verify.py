"""Check every cached model and print the corpus table.

A model passes when `onnx.checker.check_model(path, full_check=True)` accepts it and
ONNX Runtime (CPU, 2 intra-op threads) runs it on random inputs of its recorded shapes.
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

# ORT's type strings for the input element types a corpus model may have.
_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32}


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


def _size_mb(path: Path) -> float:
    files = [path, *path.parent.glob(path.name + ".data")]
    return sum(f.stat().st_size for f in files) / 1e6


def _random_inputs(session: ort.InferenceSession, shapes: dict[str, list[int]]) -> dict:
    rng = np.random.default_rng(0)
    feeds = {}
    for meta in session.get_inputs():
        recorded = shapes.get(meta.name)
        shape = recorded or [d if isinstance(d, int) else 1 for d in meta.shape]
        dtype = _NUMPY_TYPES[meta.type]
        feeds[meta.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def time_ort_ms(path: Path, shapes: dict[str, list[int]]) -> float:
    """Median latency in ms of one ORT CPU run at `THREADS` intra-op threads."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = _random_inputs(session, shapes)
    for _ in range(WARMUP_RUNS):
        session.run(None, feeds)
    times = []
    for _ in range(TIMED_RUNS):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def check(manifest: Manifest, path: Path) -> Row:
    """Check and time one cached model; a failure is recorded in `problem`, not raised."""
    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(node.op_type for node in model.graph.node)
    top = ", ".join(f"{op} {count}" for op, count in ops.most_common(5))
    ms, problem = None, None
    try:
        onnx.checker.check_model(str(path), full_check=True)
        ms = time_ort_ms(path, manifest.input_shapes)
    except Exception as error:  # checker and ORT raise several unrelated types
        problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
    opset = manifest.opset.get("ai.onnx", manifest.opset.get("", 0))
    return Row(manifest.name, manifest.converter, opset, len(model.graph.node), top,
               _size_mb(path), ms, problem)


def format_table(rows: list[Row]) -> str:
    header = f"{'name':24} {'converter':38} {'opset':>5} {'nodes':>6} {'MB':>7} {'ORT ms':>8}  top op types"
    lines = [header, "-" * len(header)]
    for row in rows:
        ms = f"{row.ort_ms:8.1f}" if row.ort_ms is not None else f"{'-':>8}"
        lines.append(
            f"{row.name:24} {row.converter:38} {row.opset:5d} {row.nodes:6d} "
            f"{row.size_mb:7.1f} {ms}  {row.top_ops}"
        )
        if row.problem:
            lines.append(f"{'':24} PROBLEM: {row.problem}")
    return "\n".join(lines)
