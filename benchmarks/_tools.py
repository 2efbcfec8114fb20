"""The optimizers the harness compares, each run in a fresh subprocess: `run_tool`.

A `Tool` names the package it needs and the function (`module:function`) that turns an
input model file into an output model file. `run_tool` starts one fresh Python process
per call (`python -m benchmarks._tools TARGET SRC DST OPTIONS`), so that the peak
resident memory reported for a tool is that tool's alone: the child reads its own
high-water mark (`VmHWM` in /proc/self/status, reset at exec), which includes the
interpreter, the imports and the loaded model. The child also measures the tool's own
wall time (load, optimize, save) and prints both as one JSON line. A missing package, a crash, a non-zero exit, a refusal
(onnxsim's `ok=False`) or a timeout is a status in the returned `ToolRun`, never raised.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT_S = 600.0
TIME_TO_BEST = "time_to_best_s"  # taso's report field, copied into its notes when present
_REPO_ROOT = Path(__file__).resolve().parents[1]
_RESULT_PREFIX = "TOOL-RESULT "
_ERROR_LINES = 3


@dataclass(frozen=True)
class Tool:
    """An optimizer: the package it needs and its `module:function` entry point."""

    name: str
    package: str
    target: str

    def installed(self) -> bool:
        return bool(self.package) and importlib.util.find_spec(self.package) is not None


@dataclass(frozen=True)
class ToolOptions:
    """Options every tool function receives (only ours uses them today).

    `time_budget_s`: taso's budget, None for taso's own default. `shapes`: the input
    shapes as a `--shape` spec ("x=1x3x224x224"), empty for the model's own.
    """

    time_budget_s: float | None = None
    shapes: str = ""


class ToolStatus(enum.Enum):
    OK = "ok"
    NOT_INSTALLED = "not installed"
    FAILED = "failed"
    TIMED_OUT = "timed out"


@dataclass(frozen=True)
class ToolRun:
    """What one call of a tool did: status, its own wall time, peak RSS, notes."""

    tool: str
    status: ToolStatus
    wall_s: float | None = None
    peak_rss_mb: float | None = None
    error: str = ""
    notes: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is ToolStatus.OK


# --- the tools themselves (run inside the child process) ----------------------------


def optimize_with_onnxsim(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    import onnx
    import onnxsim

    model, ok = onnxsim.simplify(onnx.load(src))
    if not ok:
        raise RuntimeError("onnxsim.simplify returned ok=False (its own check failed)")
    onnx.save(model, dst)
    return {"version": onnxsim.__version__}


def optimize_with_onnxslim(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    import onnx
    import onnxslim

    onnx.save(onnxslim.slim(onnx.load(src)), dst)
    return {"version": onnxslim.__version__}


def optimize_with_onnxoptimizer(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    import onnx
    import onnxoptimizer

    onnx.save(onnxoptimizer.optimize(onnx.load(src)), dst)
    return {"version": getattr(onnxoptimizer, "__version__", "unknown")}


def optimize_with_taso(src: Path, dst: Path, options: ToolOptions) -> dict[str, object]:
    import taso

    budget = {} if options.time_budget_s is None else {"time_budget_s": options.time_budget_s}
    result = taso.optimize_onnx(src, dst, check=True, shapes=options.shapes or None, **budget)
    report = result.report
    notes: dict[str, object] = {
        "decision": report.decision.name.lower(),
        "stop_reason": report.stop_reason.name.lower(),
        "applied_rewrites": dict(report.applied_rewrites),
        "rejected_rewrites": dict(report.rejected_rewrites),
        "sweeps": [s.describe() for s in report.sweeps],
        "time_budget_s": options.time_budget_s,
        "shapes": options.shapes,
    }
    if hasattr(report, TIME_TO_BEST):  # absent from reports older than the field
        notes[TIME_TO_BEST] = getattr(report, TIME_TO_BEST)
    return notes


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("onnxsim", "onnxsim", "benchmarks._tools:optimize_with_onnxsim"),
        Tool("onnxslim", "onnxslim", "benchmarks._tools:optimize_with_onnxslim"),
        Tool("onnxoptimizer", "onnxoptimizer", "benchmarks._tools:optimize_with_onnxoptimizer"),
        Tool("taso", "taso", "benchmarks._tools:optimize_with_taso"),
    )
}


# --- the parent side ------------------------------------------------------------------


def run_tool(
    tool: Tool,
    src: Path,
    dst: Path,
    *,
    options: ToolOptions = ToolOptions(),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ToolRun:
    """Run `tool` on `src` in a fresh subprocess, writing `dst`; never raises for the tool's faults."""
    if not tool.target:
        return ToolRun(
            tool.name, ToolStatus.NOT_INSTALLED, error=f"unknown tool; known: {sorted(TOOLS)}"
        )
    if not tool.installed():
        return ToolRun(
            tool.name, ToolStatus.NOT_INSTALLED, error=f"package {tool.package!r} not found"
        )
    command = [sys.executable, "-m", "benchmarks._tools", tool.target, str(src), str(dst)]
    command.append(json.dumps(asdict(options)))
    try:
        done = subprocess.run(
            command,
            cwd=_REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ToolRun(tool.name, ToolStatus.TIMED_OUT, error=f"killed after {timeout_s:g} s")
    return _interpret(tool, done.returncode, done.stdout)


def _interpret(tool: Tool, code: int, output: str) -> ToolRun:
    result = _result_line(output) or {}
    peak = result.get("peak_rss_mb")
    if code != 0 or "error" in result or "wall_s" not in result:
        error = str(result["error"]) if "error" in result else _last_lines(output, code)
        return ToolRun(tool.name, ToolStatus.FAILED, peak_rss_mb=peak, error=error)
    notes = result.get("notes", {})
    return ToolRun(tool.name, ToolStatus.OK, float(result["wall_s"]), peak, notes=notes)


def _result_line(output: str) -> dict[str, object] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(_RESULT_PREFIX):
            return json.loads(line[len(_RESULT_PREFIX) :])
    return None


def _last_lines(output: str, code: int) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    tail = " | ".join(lines[-_ERROR_LINES:]) or "no output"
    return f"exit code {code}: {tail}"


# --- the child side -------------------------------------------------------------------


def _resolve(target: str):  # noqa: ANN202 - returns the tool function
    module_name, function_name = target.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def _peak_rss_mb() -> float | None:
    """This process's peak resident set since exec (VmHWM), in MB.

    Not `getrusage`: on Linux its `ru_maxrss` also counts the parent's resident set
    inherited at fork, which would charge the harness's own memory to every tool.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # reported in kB
    except OSError:
        pass
    return None


def _child(target: str, src: str, dst: str, options_json: str) -> int:
    options = ToolOptions(**json.loads(options_json))
    function = _resolve(target)
    start = time.perf_counter()
    try:
        notes = function(Path(src), Path(dst), options)
    except Exception as error:  # noqa: BLE001 - any tool failure is reported, not raised
        message = " ".join(f"{type(error).__name__}: {error}".split())[:400]
        print(
            _RESULT_PREFIX + json.dumps({"error": message, "peak_rss_mb": _peak_rss_mb()}),
            flush=True,
        )
        return 1
    wall_s = time.perf_counter() - start
    result = {"wall_s": wall_s, "peak_rss_mb": _peak_rss_mb(), "notes": notes or {}}
    print(_RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:5]))
