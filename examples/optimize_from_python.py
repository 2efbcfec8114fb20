"""Optimize a model from Python and print what was done.

Usage: python examples/optimize_from_python.py IN.onnx OUT.onnx [BUDGET_SECONDS]

`optimize_onnx` searches with the shipped proved rules, checks the result against the
original on ONNX Runtime, times both interleaved, and writes whichever is faster
(atomically). The report says which it was and why.
"""

from __future__ import annotations

import sys

import taso


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    source, target = argv[0], argv[1]
    budget = float(argv[2]) if len(argv) == 3 else 10.0
    result = taso.optimize_onnx(source, target, time_budget_s=budget, progress=lambda line: print(line, file=sys.stderr))
    report = result.report
    print(report.summary())
    if report.decision is taso.Decision.OPTIMIZED:
        print(f"{target}: {report.latency.speedup:.2f}x faster than {source}")
    else:
        print(f"{target}: the original model, unchanged ({report.decision.value})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
