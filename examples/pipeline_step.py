"""A deployment-pipeline step: optimize a model, fail the pipeline on a numeric mismatch,
log the speedup, keep the JSON report as an artifact.

Usage: python examples/pipeline_step.py IN.onnx OUT.onnx REPORT.json

Exit status 0: OUT.onnx is ready to deploy (optimized, or the original when optimizing
did not pay off). 1: the optimized model's outputs differed from the original's; taso
kept the original, but a proven rule producing different numbers is a bug to report, so
the pipeline stops. 2: the input model (or an option) is bad.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import taso

log = logging.getLogger("deploy.optimize")


class PipelineError(Exception):
    """The input model or an option is bad; the message says why."""


def optimize_step(source: Path, target: Path, report_path: Path, **options: object) -> taso.Report:
    """Optimize `source` into `target`; raise PipelineError on bad input and
    taso.NumericMismatchError when the optimized model computed different numbers.
    `options` go to `taso.optimize_onnx` (time_budget_s, backend, rules, shapes, ...)."""
    try:
        result = taso.optimize_onnx(source, target, **options)  # type: ignore[arg-type]
    except taso.InputError as exc:
        raise PipelineError(f"{source}: {exc}") from None
    report = result.report
    report_path.write_text(report.to_json())
    if report.decision is taso.Decision.MISMATCH:
        raise taso.NumericMismatchError(f"{source}: optimized outputs differ from the original ({'; '.join(report.warnings)})")
    if report.decision is taso.Decision.OPTIMIZED:
        latency = report.latency
        log.info("%s: %.2fx faster (%.2f ms -> %.2f ms), max abs diff %s, rewrites %s", source, latency.speedup,
                 latency.measured_original_ms, latency.measured_optimized_ms, _max_diff(report), report.applied_rewrites)
    else:
        log.info("%s: original kept: %s", source, report.decision.value)
    return report


def _max_diff(report: taso.Report) -> str:
    diffs = [d for d in report.max_abs_diff.values() if d is not None]
    return f"{max(diffs):.2e}" if diffs else "n/a"


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if len(argv) != 3:
        log.error("usage: pipeline_step.py IN.onnx OUT.onnx REPORT.json")
        return 2
    try:
        optimize_step(Path(argv[0]), Path(argv[1]), Path(argv[2]))
    except taso.NumericMismatchError as exc:
        log.error("%s", exc)
        return 1
    except PipelineError as exc:
        log.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
