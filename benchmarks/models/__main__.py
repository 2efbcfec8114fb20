"""Prints a summary of the benchmark models: nodes, parameters, file size, a quick ORT latency.

Run from the repository root: `python -m benchmarks.models [--size small] [--threads 2] [NAME ...]`.
The latency is a quick single-run median under ORT_ENABLE_ALL, not the harness's measurement.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from benchmarks.models import MODELS, Size, build_cached, parameter_count


def median_latency_ms(path: Path, *, threads: int, runs: int) -> float:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in session.get_inputs()}
    if "attention_mask" in feeds:
        feeds["attention_mask"] = np.ones_like(feeds["attention_mask"])
    session.run(None, feeds)  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=sorted(MODELS))
    parser.add_argument("--size", choices=[s.value for s in Size], default=Size.FULL.value)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    size = Size(args.size)
    print("| model | origin | nodes | parameters | published | file MB | median ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in args.names:
        builder = MODELS[name]
        path = build_cached(name, size)
        model = onnx.load(path)
        latency = median_latency_ms(path, threads=args.threads, runs=args.runs)
        print(
            f"| {name} | {builder.origin.value} | {len(model.graph.node)} "
            f"| {parameter_count(model):,} | {builder.published_parameters:,} "
            f"| {path.stat().st_size / 1e6:.1f} | {latency:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
