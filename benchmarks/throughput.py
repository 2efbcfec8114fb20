"""Achieved GFLOP/s of the benchmark models under ORT_ENABLE_ALL, against this CPU's fp32 peak.

Run from the repository root:

    python -m benchmarks.throughput [--models NAME ...] [--threads 2] [--repeats 30] [--peak GFLOPS]

FLOPs are counted by `taso.backends.analytical.node_flops` at the inputs' shapes (two per
multiply-add in Conv, MatMul and Gemm; one per element for pooling and elementwise ops); latency is the median of `--repeats` timed
runs after warm-up (spinning off, one session at a time). Where ORT already runs a model
near the GEMM peak, no rewrite of its graph can make it much faster: this table is that
ceiling. The peak is measured (a 2048^3 fp32 MatMul under the same session settings)
unless `--peak` gives it. Prints a markdown table.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h

from benchmarks.models import MODELS, Size, build_cached
from taso.backends import make_inputs, measure_latency
from taso.backends.analytical import infer_shapes, node_flops

DEFAULT_MODELS = ("resnet50", "inception_v3", "bert_base", "resnext50_32x4d", "squeezenet1_1")


@dataclass(frozen=True)
class Throughput:
    model: str
    gflop: float
    latency_ms: float

    @property
    def gflops(self) -> float:
        return self.gflop / (self.latency_ms / 1000)


def measure(name: str, path: Path, *, threads: int, repeats: int) -> Throughput:
    model = onnx.load(str(path))
    inputs = make_inputs(model)
    shapes = infer_shapes(model, {k: v.shape for k, v in inputs.items()})
    flops = sum(node_flops(node, shapes) for node in model.graph.node)
    latency = measure_latency(path, inputs, repeats=repeats, warmup=5, threads=threads)
    return Throughput(name, flops / 1e9, latency.median_ms)


def gemm_peak(*, threads: int, repeats: int, size: int = 2048) -> float:
    """GFLOP/s of one large fp32 MatMul on ORT: what a compute-bound graph can reach here."""
    a = h.make_tensor_value_info("a", TensorProto.FLOAT, [size, size])
    b = h.make_tensor_value_info("b", TensorProto.FLOAT, [size, size])
    c = h.make_tensor_value_info("c", TensorProto.FLOAT, [size, size])
    model = h.make_model(h.make_graph([h.make_node("MatMul", ["a", "b"], ["c"])], "gemm", [a, b], [c]),
                         opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    rng = np.random.default_rng(0)
    inputs = {name: rng.standard_normal((size, size)).astype(np.float32) for name in ("a", "b")}
    latency = measure_latency(model, inputs, repeats=repeats, warmup=3, threads=threads)
    return 2 * size**3 / (latency.median_ms / 1000) / 1e9


def to_markdown(rows: Sequence[Throughput], peak: float, threads: int) -> str:
    lines = [
        f"| model | GFLOP | latency ms ({threads} threads) | GFLOP/s | share of the {peak:.0f} GFLOP/s MatMul peak |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row.model} | {row.gflop:.2f} | {row.latency_ms:.1f} | {row.gflops:.0f} | {row.gflops / peak:.0%} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=sorted(MODELS), metavar="NAME")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--peak", type=float, default=None, help="fp32 GEMM peak, GFLOP/s (default: measured)")
    args = parser.parse_args(argv)
    peak = args.peak or gemm_peak(threads=args.threads, repeats=max(5, args.repeats // 3))
    rows = [measure(name, build_cached(name, Size.FULL), threads=args.threads, repeats=args.repeats) for name in args.models]
    print(to_markdown(rows, peak, args.threads))


if __name__ == "__main__":
    main()
