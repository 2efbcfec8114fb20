"""The optimizers the harness compares, each run in a fresh subprocess: `run_tool`.

A `Tool` names the package it needs and the function (`module:function`) that turns an
input model file into an output model file. `run_tool` starts one fresh Python process
per call (`python -m benchmarks._tools TARGET SRC DST OPTIONS`), so that the peak
resident memory reported for a tool is that tool's alone: it is read from the kernel's
accounting of exactly that child (`os.wait4`), and includes the interpreter, the imports
and the loaded model. The child measures the tool's own wall time (load, optimize, save)
and prints it as one JSON line. A missing package, a crash, a non-zero exit, a refusal
(onnxsim's `ok=False`) or a timeout is a status in the returned `ToolRun`, never raised.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT_S = 600.0
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
    """Options every tool function receives (only ours uses them today)."""

    time_budget_s: float = 10.0


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

    result = taso.optimize_onnx(src, dst, time_budget_s=options.time_budget_s, check=True)
    report = result.report
    return {
        "decision": report.decision.name.lower(),
        "stop_reason": report.stop_reason.name.lower(),
        "applied_rewrites": dict(report.applied_rewrites),
        "time_budget_s": options.time_budget_s,
    }


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
    command.append(json.dumps({"time_budget_s": options.time_budget_s}))
    process = subprocess.Popen(
        command, cwd=_REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killed = threading.Event()
    timer = threading.Timer(timeout_s, lambda: (killed.set(), process.kill()))
    timer.start()
    try:
        output = process.stdout.read() if process.stdout else ""
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    peak_mb = usage.ru_maxrss / 1024  # Linux reports kilobytes
    if killed.is_set():
        return ToolRun(
            tool.name,
            ToolStatus.TIMED_OUT,
            peak_rss_mb=peak_mb,
            error=f"killed after {timeout_s:g} s",
        )
    return _interpret(tool, process.returncode, output, peak_mb)


def _interpret(tool: Tool, code: int, output: str, peak_mb: float) -> ToolRun:
    result = _result_line(output)
    if code != 0 or result is None or "error" in result:
        error = str(result["error"]) if result and "error" in result else _last_lines(output, code)
        return ToolRun(tool.name, ToolStatus.FAILED, peak_rss_mb=peak_mb, error=error)
    notes = result.get("notes", {})
    return ToolRun(tool.name, ToolStatus.OK, float(result["wall_s"]), peak_mb, notes=notes)


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


def _child(target: str, src: str, dst: str, options_json: str) -> int:
    options = ToolOptions(**json.loads(options_json))
    function = _resolve(target)
    start = time.perf_counter()
    try:
        notes = function(Path(src), Path(dst), options)
    except Exception as error:  # noqa: BLE001 - any tool failure is reported, not raised
        message = " ".join(f"{type(error).__name__}: {error}".split())[:400]
        print(_RESULT_PREFIX + json.dumps({"error": message}), flush=True)
        return 1
    wall_s = time.perf_counter() - start
    print(_RESULT_PREFIX + json.dumps({"wall_s": wall_s, "notes": notes or {}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:5]))
