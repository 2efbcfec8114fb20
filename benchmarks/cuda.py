"""The CUDA path measured for real: corpus models optimized with `--backend ort-cuda` and
timed against their originals on ONNX Runtime's CUDA execution provider.

Needs onnxruntime-gpu and a CUDA device (refused otherwise). For each model: its
manifest's shapes; `taso.optimize_onnx(backend="ort-cuda")` at its default budget (the
check, the sweeps and the decision all on CUDA); the noise row (the original against a
byte-for-byte copy of itself, interleaved on CUDA); the output against the original,
interleaved on CUDA under ORT_ENABLE_ALL (inputs and outputs through host memory, as a
plain `session.run` caller sees them); the output's largest difference (run on CUDA with TF32
off, as the check runs) from the original's CPU outputs. Prints a markdown table; `--out` writes the rows as JSON.

    python -m benchmarks.cuda --corpus /tmp/corpus --models ppocrv4_rec yolov8n
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import taso
from taso import backends
from taso.backends import OrtCudaBackend


@dataclass(frozen=True)
class CudaRow:
    model: str
    original_ms: float
    noise_p10: float
    noise_p90: float
    speedup: float  # original / optimized, median of paired ratios
    kept: str
    optimize_s: float
    max_abs_diff_vs_cpu: float  # the output on CUDA without TF32 against the original on CPU
    check: str
    stop_reason: str


def _shape_spec(manifest: dict) -> str:
    shapes = manifest.get("input_shapes", {})
    return ",".join(f"{name}={'x'.join(str(d) for d in dims)}" for name, dims in shapes.items())


def _kept(report: taso.Report) -> str:
    parts = [f"{rule} x{count}" for rule, count in sorted(report.applied_rewrites.items())]
    return ", ".join(parts) or "original"


def measure(model_dir: Path, repeats: int, budget: float | None, work: Path) -> CudaRow:
    manifest = json.loads((model_dir / "manifest.json").read_text())
    source = model_dir / "model.onnx"
    spec = _shape_spec(manifest)
    profile = backends.ShapeProfile.parse(spec) if spec else None
    inputs = backends.make_inputs(source, profile=profile)
    device = OrtCudaBackend()
    cuda = device.providers
    copy = work / f"{model_dir.name}_copy.onnx"
    shutil.copyfile(source, copy)
    noise = [backends.measure_interleaved(source, copy, inputs, repeats=repeats, warmup=10,
                                          providers=cuda).speedup for _ in range(5)]
    out = work / f"{model_dir.name}_taso.onnx"
    start = time.perf_counter()
    result = taso.optimize_onnx(source, out, backend="ort-cuda", shapes=spec or None, time_budget_s=budget)
    optimize_s = time.perf_counter() - start
    timing = backends.measure_interleaved(source, out, inputs, repeats=repeats, warmup=10, providers=cuda)
    cpu = backends.run_model(source, inputs)
    gpu = backends.run_model(out, inputs, providers=device.exact_providers)
    diff = max(float(np.max(np.abs(np.asarray(cpu[k], np.float64) - np.asarray(gpu[k], np.float64))))
               for k in cpu)
    report = result.report
    return CudaRow(model_dir.name, timing.a.median_ms, float(np.percentile(noise, 10)),
                   float(np.percentile(noise, 90)), timing.speedup, _kept(report), optimize_s, diff,
                   report.check.value, report.stop_reason.value)


def _table(rows: list[CudaRow]) -> str:
    lines = ["| model | original ms (CUDA) | noise band | taso (ort-cuda) | kept | optimize s | max abs diff vs CPU (TF32 off) | check | stop |",
             "|---|---:|---|---:|---|---:|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r.model} | {r.original_ms:.2f} | {r.noise_p10:.3f}-{r.noise_p90:.3f} | "
                     f"**{r.speedup:.3f}x** | {r.kept} | {r.optimize_s:.1f} | {r.max_abs_diff_vs_cpu:.1e} | "
                     f"{r.check} | {r.stop_reason} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--time-budget", type=float, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not OrtCudaBackend.available():
        print("needs onnxruntime-gpu and a CUDA device", file=sys.stderr)
        return 2
    rows: list[CudaRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            try:
                rows.append(measure(args.corpus / name, args.repeats, args.time_budget, Path(tmp)))
                print(f"{name}: {rows[-1].speedup:.3f}x", file=sys.stderr, flush=True)
            except Exception as err:  # noqa: BLE001 - one model's failure is a row, not the end
                print(f"{name}: FAILED {type(err).__name__}: {err}", file=sys.stderr, flush=True)
    print(_table(rows))
    if args.out:
        args.out.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
