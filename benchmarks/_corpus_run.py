"""The real-converter corpus in the harness: which models, where ORT spends its time, groups.

`corpus_models` lists the cached corpus entries (`benchmarks.corpus`) with the input
shapes their manifests record, as the `--shape` spec taso and the measurement get.

`profile_ops` runs the original once under ORT's profiler the way it is measured (2
threads, ORT_ENABLE_ALL, spinning off): one warm-up run, then enough runs for about a
second, and sums the kernel durations of the runs after the first, each node at its
median duration, by the op ORT ran (`args.op_name` of each `*_kernel_time` event: ORT's
fused ops, such as FusedConv or NchwcConv, under their own names).
`OpProfile.outside_share` is the share of that time spent outside the FLOP ops
(`FLOP_OPS`); a model at `ELEMENTWISE_HEAVY_SHARE` or above is in the elementwise-heavy
group, below it in the FLOP-bound group.

`group_speedups` gives each tool's geomean speedup per group. A tool that did not give a
measured output with matching outputs on a model counts as 1.0x there (the user keeps
the original), as does an output holding the original's graph unchanged.
"""

from __future__ import annotations

import enum
import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._measure import NOISE_ROW, Row, RowStatus, Verdict
from benchmarks.corpus import cached_entries
from taso.backends import GraphOptimization, ShapeProfile, Spinning, make_inputs
from taso.backends._session import SessionConfig, call_ort, create_session

# Kernels whose time is dominated by multiply-accumulates. Everything else ORT runs
# (elementwise ops, activations, normalization, pooling, layout reorders, Resize,
# Attention and its softmax, quantize/dequantize...) counts as outside.
FLOP_OPS = frozenset({
    "Conv", "FusedConv", "NchwcConv", "ConvInteger", "QLinearConv", "ConvTranspose",
    "MatMul", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul", "Gemm", "FusedGemm", "QGemm",
})
ELEMENTWISE_HEAVY_SHARE = 0.30
PROFILE_TARGET_MS = 1000.0
PROFILE_MIN_RUNS = 3
PROFILE_MAX_RUNS = 50
_KERNEL_SUFFIX = "_kernel_time"


class Group(enum.Enum):
    ELEMENTWISE_HEAVY = "elementwise-heavy"
    FLOP_BOUND = "FLOP-bound"
    NOT_PROFILED = "not profiled"


@dataclass(frozen=True)
class ModelFile:
    """A model to measure: its name, file and input shapes as a `--shape` spec ("" for
    the model's own: builder models are static)."""

    name: str
    path: Path
    shapes: str

    @property
    def profile(self) -> ShapeProfile | None:
        return ShapeProfile.parse(self.shapes) if self.shapes else None


def corpus_models(cache: Path, names: Sequence[str]) -> list[ModelFile]:
    """The cached entries named (every one when `names` is empty), in cache order."""
    found = {
        manifest.name: ModelFile(
            manifest.name, path, str(ShapeProfile.of(shapes=manifest.input_shapes))
        )
        for manifest, path in cached_entries(cache)
    }
    if not found:
        raise ValueError(
            f"no corpus model cached in {cache}; build them with python -m benchmarks.corpus build"
        )
    unknown = [name for name in names if name not in found]
    if unknown:
        raise ValueError(f"not in the corpus cache {cache}: {unknown}; cached: {sorted(found)}")
    return [found[name] for name in names] if names else list(found.values())


@dataclass(frozen=True)
class OpProfile:
    """Kernel time of the original per op type, summed over the profiled runs, largest first."""

    model: str
    shapes: str
    runs: int
    op_ms: tuple[tuple[str, float], ...]
    error: str = ""

    @property
    def outside_share(self) -> float | None:
        total = sum(ms for _, ms in self.op_ms)
        if self.error or total <= 0:
            return None
        return sum(ms for op, ms in self.op_ms if op not in FLOP_OPS) / total

    @property
    def group(self) -> Group:
        share = self.outside_share
        if share is None:
            return Group.NOT_PROFILED
        return Group.ELEMENTWISE_HEAVY if share >= ELEMENTWISE_HEAVY_SHARE else Group.FLOP_BOUND

    def top_ops(self, count: int = 5) -> list[tuple[str, float]]:
        """The `count` ops with the most time, each with its share of the total."""
        total = sum(ms for _, ms in self.op_ms) or 1.0
        return [(op, ms / total) for op, ms in self.op_ms[:count]]

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "shapes": self.shapes,
            "runs": self.runs,
            "op_ms": [[op, round(ms, 4)] for op, ms in self.op_ms],
            "outside_share": self.outside_share,
            "group": self.group.value,
            "error": self.error,
        }


def profile_ops(model: ModelFile, *, threads: int, folder: Path) -> OpProfile:
    """Profile `model` under ORT as measured, on the same random inputs the measurement
    makes; a failure is the profile's `error`, never raised."""
    try:
        inputs = make_inputs(model.path, profile=model.profile)
        runs, op_ms = _profile(model, inputs, threads=threads, folder=folder)
    except Exception as error:  # noqa: BLE001 - one model's profile must not stop the suite
        return OpProfile(model.name, model.shapes, 0, (), error=" ".join(str(error).split())[:300])
    ordered = tuple(sorted(op_ms.items(), key=lambda item: -item[1]))
    return OpProfile(model.name, model.shapes, runs, ordered)


def _profile(
    model: ModelFile, inputs: Mapping[str, np.ndarray], *, threads: int, folder: Path
) -> tuple[int, dict[str, float]]:
    config = SessionConfig(
        threads=threads,
        optimization=GraphOptimization.ALL,
        spinning=Spinning.OFF,
        profile_prefix=str(folder / f"{model.name}-profile"),
    )
    session = create_session(model.path, config)
    wanted = {value.name for value in session.get_inputs()}
    feeds = {name: value for name, value in inputs.items() if name in wanted}
    start = time.perf_counter()
    call_ort("running the model in onnxruntime", lambda: session.run(None, feeds))
    first_ms = (time.perf_counter() - start) * 1e3
    runs = max(PROFILE_MIN_RUNS, min(PROFILE_MAX_RUNS, int(PROFILE_TARGET_MS / max(first_ms, 1e-3))))
    for _ in range(runs):
        session.run(None, feeds)
    trace = Path(call_ort("ending ORT's profiler", session.end_profiling))
    try:
        events = json.loads(trace.read_text())
    finally:
        trace.unlink(missing_ok=True)
    return runs, _kernel_ms_by_op(events)


def _kernel_ms_by_op(events: Iterable[Mapping[str, object]]) -> dict[str, float]:
    """Kernel time per op over every run but the first (the warm-up), in ms: each node's
    median duration times the number of times it ran, so that a run slowed by something
    else on a shared machine does not move the op's share (a summed profile of QDQ
    ResNet-18 once put its DequantizeLinear at 2.7 times its usual time, and the model
    from 19% to 34% outside Conv/MatMul/Gemm)."""
    events = list(events)
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
        key=lambda e: e["ts"],  # type: ignore[arg-type, return-value]
    )
    warm_end = runs[0]["ts"] + runs[0]["dur"] if runs else 0  # type: ignore[operator]
    durations: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith(_KERNEL_SUFFIX):
            continue
        if event["ts"] < warm_end:  # type: ignore[operator]
            continue
        args = event.get("args", {})
        op = str(args.get("op_name", "?"))  # type: ignore[union-attr]
        node = (op, name, str(args.get("node_index", "")))  # type: ignore[union-attr]
        durations[node].append(float(event["dur"]) / 1e3)  # type: ignore[arg-type]
    totals: dict[str, float] = defaultdict(float)
    for (op, _, _), node_ms in durations.items():
        totals[op] += float(np.median(node_ms)) * len(node_ms)
    return dict(totals)


@dataclass(frozen=True)
class GroupSpeedup:
    """One tool's geomean speedup over the models of one group."""

    group: Group
    tool: str
    models: int
    valid: int  # models where the tool's output was measured and matched the original
    geomean: float

    def to_dict(self) -> dict[str, object]:
        return {
            "group": self.group.value,
            "tool": self.tool,
            "models": self.models,
            "valid": self.valid,
            "geomean_speedup": self.geomean,
        }


def row_speedup(row: Row) -> float | None:
    """The speedup a user gets from this row's tool: None when it gave no valid output."""
    if row.status is not RowStatus.MEASURED or row.outputs_match is not True or row.timing is None:
        return None
    if row.verdict is Verdict.SAME_GRAPH:
        return 1.0
    return 1.0 / row.timing.ratio


def group_speedups(rows: Sequence[Row], profiles: Sequence[OpProfile]) -> list[GroupSpeedup]:
    """Per group (in `Group` order) and tool (in row order), the geomean speedup."""
    group_of = {profile.model: profile.group for profile in profiles}
    tools = list(dict.fromkeys(
        row.tool for row in rows if row.model in group_of and row.tool != NOISE_ROW
    ))
    summaries = []
    for group in Group:
        for tool in tools:
            speedups = [
                row_speedup(row)
                for row in rows
                if row.tool == tool and group_of.get(row.model) is group
            ]
            if speedups:
                summaries.append(_summary(group, tool, speedups))
    return summaries


def _summary(group: Group, tool: str, speedups: list[float | None]) -> GroupSpeedup:
    valid = [s for s in speedups if s is not None]
    kept = [1.0 if s is None else s for s in speedups]
    geomean = math.exp(sum(math.log(s) for s in kept) / len(kept))
    return GroupSpeedup(group, tool, len(kept), len(valid), geomean)
