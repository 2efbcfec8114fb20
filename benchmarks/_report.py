"""Rendering benchmark results: a markdown table with footnotes, and JSON.

`Results` holds every row plus the machine and the configuration it ran with, and for a
corpus run each model's ORT op profile; `to_markdown` and `to_json` are its two
renderings. Ratios are tool / baseline latency (below 1 is faster), the median of
per-iteration paired ratios with their p10-p90; speedup is 1 / ratio. A corpus run is
rendered as one table per model, headed by its shapes and op profile, then each tool's
geomean speedup per group (elementwise-heavy, FLOP-bound).
"""

from __future__ import annotations

import enum
import json
import os
import platform
import statistics
import sys
from dataclasses import asdict, dataclass
from importlib import metadata

from benchmarks._corpus_run import (
    ELEMENTWISE_HEAVY_SHARE,
    FLOP_OPS,
    GroupSpeedup,
    OpProfile,
    group_speedups,
)
from benchmarks._measure import NOISE_ROW, PairTiming, Row, RowStatus, TimingPlan
from benchmarks._tools import TIME_TO_BEST
from taso.backends import max_ir_version, nchwc_block

_PACKAGES = ("onnx", "onnxruntime", "onnxsim", "onnxslim", "onnxoptimizer", "taso-onnx", "numpy")


@dataclass(frozen=True)
class Results:
    rows: tuple[Row, ...]
    machine: dict[str, object]
    config: dict[str, object]
    duration_s: float
    profiles: tuple[OpProfile, ...] = ()  # corpus runs only: one per model


def machine_info() -> dict[str, object]:
    """Where the benchmark ran: cores, CPU model, OS, Python and package versions."""
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "vector_isa": _vector_isa(),
        "nchwc_block": nchwc_block(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": {name: _version(name) for name in _PACKAGES},
    }


def _cpuinfo(key: str) -> str | None:
    """The value of the first `key` line of /proc/cpuinfo (None: no such line or file)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith(key)), None)
    except OSError:
        return None


def _cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or "unknown"


def _vector_isa() -> str:
    """The widest x86 vector extension the CPU reports (what ORT's kernels, and its NCHWc
    block, depend on): AVX-512, AVX2, or what else the CPU is."""
    flags = (_cpuinfo("flags") or "").split()
    if "avx512f" in flags:
        return "AVX-512"
    return "AVX2" if "avx2" in flags else platform.machine() or "unknown"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


# --- JSON ---------------------------------------------------------------------------


def to_json(results: Results) -> str:
    data = {
        "machine": results.machine,
        "config": results.config,
        "duration_s": round(results.duration_s, 1),
        "noise": noise_summary(results.rows),
        "rows": [_row_dict(row) for row in results.rows],
        "profiles": [profile.to_dict() for profile in results.profiles],
        "groups": [group.to_dict() for group in group_speedups(results.rows, results.profiles)],
        "footnotes": footnotes(results.rows, corpus=bool(results.profiles)),
    }
    return json.dumps(data, indent=2, default=_enum_value) + "\n"


def _row_dict(row: Row) -> dict[str, object]:
    data = asdict(row)
    data["tool_run"] = asdict(row.tool_run) if row.tool_run else None
    return data


def _enum_value(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"not JSON serializable: {value!r}")


# --- markdown -----------------------------------------------------------------------

_HEADER = (
    "| model | tool | status | baseline ms | tool ms | ratio (p10-p90) | speedup | beyond noise "
    "| iterations | tool wall s | time to best s | tool peak RSS MB | max abs diff "
    "| nodes before -> after |"
)
_ALIGN = "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"


def to_markdown(results: Results) -> str:
    if results.profiles:
        lines = [line for p in results.profiles for line in _model_section(p, results.rows)]
        lines += _group_table(group_speedups(results.rows, results.profiles))
    else:
        lines = [_HEADER, _ALIGN, *(_row_line(row) for row in results.rows), ""]
    noise = noise_summary(results.rows)
    if noise:
        lines.append(
            f"Noise (baseline vs itself): median ratio {noise['median_ratio']:.3f} over "
            f"{noise['models']} models; p10-p90 band width median {noise['median_band']:.3f}, "
            f"max {noise['max_band']:.3f}."
        )
        lines.append("")
    notes = footnotes(results.rows, corpus=bool(results.profiles))
    lines += [f"{index}. {note}" for index, note in enumerate(notes, start=1)]
    lines += ["", _machine_line(results)]
    return "\n".join(lines) + "\n"


def _row_line(row: Row) -> str:
    timing, run = row.timing, row.tool_run
    cells = [
        row.model,
        row.tool,
        _status_text(row),
        _num(timing.baseline_median_ms if timing else None, ".2f"),
        _num(timing.candidate_median_ms if timing else None, ".2f"),
        f"{timing.ratio:.3f} ({timing.ratio_p10:.3f}-{timing.ratio_p90:.3f})" if timing else "-",
        f"{1 / timing.ratio:.3f}x" if timing else "-",
        "-" if row.tool == NOISE_ROW or not timing else row.verdict.value,
        _iterations(timing),
        _num(run.wall_s if run else None, ".1f"),
        _time_to_best(row),
        _num(run.peak_rss_mb if run else None, ".0f"),
        _num(row.max_abs_diff, ".2g") if row.tool != NOISE_ROW else "-",
        _nodes(row),
    ]
    return "| " + " | ".join(cells) + " |"


def _iterations(timing: PairTiming | None) -> str:
    if timing is None:
        return "-"
    return f"{timing.repeats} (retimed {timing.retimed})" if timing.retimed else str(timing.repeats)


def _time_to_best(row: Row) -> str:
    """taso's time to its best graph: 'n/a' when its report has no such field, 'none'
    when the search found nothing better than the input; '-' for the other tools."""
    if row.tool != "taso":
        return "-"
    notes = row.tool_run.notes if row.tool_run else {}
    if TIME_TO_BEST not in notes:
        return "n/a"
    value = notes[TIME_TO_BEST]
    return "none" if value is None else format(float(value), ".1f")  # type: ignore[arg-type]


def _model_section(profile: OpProfile, rows: tuple[Row, ...]) -> list[str]:
    """One corpus model: a heading with its shapes and op profile, then its table."""
    share = profile.outside_share
    if share is None:
        where = f"ORT profile failed: {profile.error}" if profile.error else "no kernel time"
    else:
        top = ", ".join(f"{op} {part:.0%}" for op, part in profile.top_ops())
        where = (
            f"{share:.0%} of ORT kernel time outside Conv/MatMul/Gemm "
            f"({profile.group.value}; {profile.runs} profiled runs); top ops: {top}"
        )
    model_rows = [_row_line(row) for row in rows if row.model == profile.model]
    shapes = profile.shapes or "the model's own shapes"
    return [f"### {profile.model}", "", f"Shapes {shapes}; {where}.", "", _HEADER, _ALIGN,
            *model_rows, ""]


def _group_table(summaries: list[GroupSpeedup]) -> list[str]:
    """Per group, each tool's geomean speedup and on how many models its output was valid."""
    if not summaries:
        return []
    tools = list(dict.fromkeys(s.tool for s in summaries))
    cells = {(s.group, s.tool): s for s in summaries}
    lines = ["## Geomean speedup per group", "",
             "| group | models | " + " | ".join(tools) + " |",
             "|---|---:|" + "---:|" * len(tools)]
    for group in dict.fromkeys(s.group for s in summaries):
        models = max(s.models for s in summaries if s.group is group)
        values = [_group_cell(cells.get((group, tool))) for tool in tools]
        lines.append(f"| {group.value} | {models} | " + " | ".join(values) + " |")
    return [*lines, ""]


def _group_cell(summary: GroupSpeedup | None) -> str:
    if summary is None:
        return "-"
    return f"{summary.geomean:.3f}x ({summary.valid}/{summary.models} valid)"


def _status_text(row: Row) -> str:
    if row.status is RowStatus.MEASURED and row.outputs_match is False:
        return "measured, outputs differ"
    if row.status is RowStatus.MEASURED and row.ir_lowered_from is not None:
        return "measured (IR lowered)"
    return row.status.value


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _nodes(row: Row) -> str:
    if row.nodes_before is None:
        return "-"
    after = "-" if row.nodes_after is None else str(row.nodes_after)
    return f"{row.nodes_before} -> {after}"


def _machine_line(results: Results) -> str:
    machine, config = results.machine, results.config
    packages = ", ".join(f"{k} {v}" for k, v in machine["packages"].items() if v)  # type: ignore[union-attr]
    return (
        f"Machine: {machine['nproc']} cores, {machine['cpu_model']}{_vector_note(machine)}, {machine['platform']}, "
        f"Python {machine['python']}; {packages}. Run: {config['command']} "
        f"({results.duration_s / 60:.1f} min)."
    )


def _vector_note(machine: dict[str, object]) -> str:
    """" (AVX2; ORT's NCHWc block 8)", or nothing for results recorded before both were."""
    if "vector_isa" not in machine:
        return ""
    return f" ({machine['vector_isa']}; ORT's NCHWc block {machine.get('nchwc_block')})"


# --- noise and footnotes ------------------------------------------------------------


def noise_summary(rows: tuple[Row, ...] | list[Row]) -> dict[str, float] | None:
    """Across models: the noise rows' median ratio and the widths of their p10-p90 bands."""
    timings = [row.timing for row in rows if row.tool == NOISE_ROW and row.timing]
    if not timings:
        return None
    bands = [t.ratio_p90 - t.ratio_p10 for t in timings]
    return {
        "models": len(timings),
        "median_ratio": statistics.median(t.ratio for t in timings),
        "max_abs_ratio_offset": max(abs(t.ratio - 1) for t in timings),
        "median_band": statistics.median(bands),
        "max_band": max(bands),
    }


def footnotes(rows: tuple[Row, ...] | list[Row], *, corpus: bool = False) -> list[str]:
    notes = [
        "ratio = tool output latency / original latency, both under ORT_ENABLE_ALL, timed "
        "interleaved (A B, B A, ...) in the same process on the same inputs: median of the "
        "per-iteration ratios, with their p10-p90. Below 1 is faster.",
        f"beyond noise: 'faster'/'slower' only when the ratio lies outside the p10-p90 of the "
        f"model's '{NOISE_ROW}' row (the original timed against a byte-identical copy); "
        "'same graph' when the tool's output holds the input's graph unchanged, so that any "
        "measured difference is noise.",
        "speedup = 1 / ratio (above 1 is faster).",
        "iterations: interleaved pairs timed; 'retimed n' when the pair was timed n more "
        f"times because its baseline's median ran more than {TimingPlan().disturbed - 1:.0%} "
        "from the original's quiet latency (the median of its look interleaved with itself "
        "before the noise row and of the pairs kept since), that is, while something else "
        "loaded the machine; the timing whose baseline was nearest the quiet latency is shown.",
        "tool wall s: load + optimize + save inside the tool's process (not interpreter start). "
        "taso's includes its own output check and interleaved measurement (check=True).",
        "time to best s (taso only, from its report): from the start of the call until the "
        "search first found the graph it ended with (the measured decision may still return "
        "the original: see 'same graph'); 'none' when the search found nothing better than "
        "the input; 'n/a' when the installed taso's report does not record it.",
        "tool peak RSS: high-water resident set (VmHWM) of the tool's own fresh subprocess, "
        "including the Python interpreter, imports and the loaded model.",
        "max abs diff: over all outputs, tool output vs original on ONNX Runtime with the same "
        "random inputs.",
    ]
    if corpus:
        notes += _corpus_notes()
    lowered = sorted({f"{r.tool} (IR {r.ir_lowered_from})" for r in rows if r.ir_lowered_from})
    notes.append(
        f"IR version: a tool output whose IR version is newer than onnxruntime loads is lowered "
        f"to {max_ir_version()} (the highest it accepts) before running. Lowered in this run: "
        f"{', '.join(lowered) if lowered else 'none'}."
    )
    notes += [f"{r.model} / {r.tool}: {r.status.value}: {r.error}" for r in rows if r.error]
    return notes


def _corpus_notes() -> list[str]:
    return [
        "corpus models run at the input shapes of their manifests: taso receives them as "
        "--shape, the timing and the output check feed inputs of those shapes; the other "
        "tools run with their defaults (no shape options).",
        "outside Conv/MatMul/Gemm: the original profiled with ORT's profiler (ORT_ENABLE_ALL, "
        "the benchmark's thread count, spinning off), each node's median kernel duration "
        "times its runs, summed by the op ORT ran, the warm-up run excluded. FLOP ops: "
        + ", ".join(sorted(FLOP_OPS)) + "; every other op (elementwise, activations, normalization, pooling, layout reorders, "
        "Attention, quantize/dequantize) counts as outside. A model at "
        f"{ELEMENTWISE_HEAVY_SHARE:.0%} or more outside is elementwise-heavy, below it "
        "FLOP-bound.",
        "geomean speedup per group: over the group's models; a tool whose output was not "
        "measured or whose outputs differ from the original's counts as 1.0x on that model "
        "(the user keeps the original), as does an output holding the original's graph.",
    ]
