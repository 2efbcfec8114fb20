"""The report of one optimization: what was done, what was measured, what was decided.

`Report.to_json()` is the stable machine-readable form (the CLI's `--report`);
`Report.summary()` is the human-readable text the CLI prints at the end: a before/after
table of the two models, the sweeps as rows, then one line each for the rest.
`Report.layout()` gives the same tables as cells, for other renderers (rich, HTML).
"""

from __future__ import annotations

import enum
import json
import platform
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version


class StopReason(enum.Enum):
    """Why the search stopped."""

    NO_SEARCH = "no search: time budget is 0"
    NO_RULES = "no rules to apply"
    EXHAUSTED = "search space exhausted"
    CONVERGED = "converged: nothing left that could improve on the best graph"
    STALLED = "stalled: the best graph stopped improving by a margin the measured decision could confirm"
    TIME_BUDGET = "time budget reached"
    GRAPH_BUDGET = "explored-graph budget reached"
    FAILED = "the search failed and was abandoned (see the warnings)"
    UNCHECKABLE = "no search: ONNX Runtime cannot run the original, so no rewrite could be checked"


class Decision(enum.Enum):
    """Which model was returned, and why."""

    OPTIMIZED = "optimized model returned: measured faster"
    UNCHANGED = "original returned: no rewrite applied"
    NOT_FASTER = "original returned: the optimized model was not measurably faster"
    NOT_PREDICTED_FASTER = "original returned: the search predicted under 1% gain, too little to measure"
    MISMATCH = "original returned: the optimized model's outputs differ"
    REJECTED = "original returned: ONNX Runtime refused the optimized model"
    UNCHECKABLE = "original returned: ONNX Runtime cannot run the models, so the rewrites could not be checked"
    UNCHECKED = "optimized model returned unchecked and unmeasured, as asked (check=False)"


class CheckStatus(enum.Enum):
    """Outcome of the numeric comparison of the returned model against the original."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Latency:
    """Latencies in milliseconds; None where not measured or not predicted.

    `predicted_*` are the search's cost model's prices (for ort-cpu, the sum of the times
    of the kernels ORT compiles the graph to, each profiled once on this machine and then
    read from the cost cache: a price is a lookup by design once its kernels are known).
    `measured_*` are the medians of the final decision's interleaved runs."""

    predicted_original_ms: float | None = None
    predicted_optimized_ms: float | None = None
    measured_original_ms: float | None = None
    measured_optimized_ms: float | None = None
    measured_spread: float | None = None
    """How noisy the measurement was: the p90 minus the p10 of the per-pair ratios
    optimized/original over the decision's looks (0.05: the middle 80% of the pairs'
    ratios lie within 5 points of each other). None where nothing was measured."""
    measured_cached: bool | None = None
    """True when the measured latencies, spread and verdict were read from the cost cache
    (an earlier call measured the same pair of graphs at the same input shapes on this
    device and ONNX Runtime version) instead of measured in this call; None where nothing
    was measured. `taso optimize --no-cache` always measures."""

    @property
    def speedup(self) -> float | None:
        if not self.measured_original_ms or not self.measured_optimized_ms:
            return None
        return self.measured_original_ms / self.measured_optimized_ms


@dataclass(frozen=True)
class SiteNode:
    """One node of a matched site: its op, and the values it reads and writes.
    `folded`: a weight transform that export folds into a constant."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    folded: bool = False


@dataclass(frozen=True)
class SweepSite:
    """One match of a sweep's rule: the nodes it replaced (`before`) and wrote (`after`)."""

    before: tuple[SiteNode, ...]
    after: tuple[SiteNode, ...]


@dataclass(frozen=True)
class JointRule:
    """A rule swept together with a joint sweep's first rule, and its match count."""

    rule_id: str
    rewrites: int


@dataclass(frozen=True)
class SweepRecord:
    """One rule sweep, every match of `rule_id` applied at once: judged end to end, or
    (`not_judged` says why) ruled out by the kernel cost model's prediction."""

    rule_id: str
    rewrites: int
    measured_speedup: float | None
    kept: bool
    resolved: bool = True
    """False when the budget ended its judgement while it was ahead: kept for the final
    measured decision to settle."""
    predicted_speedup: float | None = None
    not_judged: str | None = None
    cached: bool | None = None
    """True when `measured_speedup` and the verdict were read from the cost cache (judged by
    an earlier call on this device) rather than measured in this call; None: not judged."""
    site: SweepSite | None = None
    """One of the sweep's matches, as it was before and after the rewrite."""
    joint: tuple[JointRule, ...] = ()
    """For a joint sweep (rules that pay only together), the rules swept on top of
    `rule_id`'s sweep and judged with it as one candidate."""
    tie_break: bool = False
    """Two of the judge's looks disagreed (forward and reverse, or a first forward look
    against a confident prediction and a second) and a third look decided the verdict."""

    def rules(self) -> str:
        """The rule and its match count (and a joint sweep's further rules, with theirs)."""
        return " + ".join(f"{rule} x{count}" for rule, count in self.counts())

    def counts(self) -> tuple[tuple[str, int], ...]:
        """Every rule the sweep applied, with its match count."""
        return ((self.rule_id, self.rewrites), *((part.rule_id, part.rewrites) for part in self.joint))

    def verdict(self) -> str:
        """kept, not kept, or why it was not judged; and whether the verdict was cached."""
        if self.not_judged is not None or self.measured_speedup is None:
            return f"not judged: {self.not_judged}"
        verdict = ("kept" if self.resolved else "ahead when time ran out, kept for the decision") if self.kept else "not kept"
        return verdict + (" (a third look decided)" if self.tie_break else "") + (" (from the cost cache)" if self.cached else "")

    def describe(self) -> str:
        """One line: the rule, its matches, and the verdict (or why it was not judged)."""
        predicted = "" if self.predicted_speedup is None else f" (predicted {self.predicted_speedup:.3f}x)"
        if self.not_judged is not None or self.measured_speedup is None:
            return f"{self.rules()} not judged: {self.not_judged}{predicted}"
        verdict = ("kept" if self.resolved else "ahead when time ran out, kept for the decision") if self.kept else "not kept"
        return f"{self.rules()} {self.measured_speedup:.3f}x {verdict}{predicted}"


class DimSource(enum.Enum):
    """Where a dynamic dim's size came from (the value is what the summary prints)."""

    GIVEN = "--shape"
    DEFAULT = "default"


@dataclass(frozen=True)
class DynamicDim:
    """One dynamic dim of an input: its symbol (or `input[axis]` when it has none), the
    size it was run at, and whether that size was given or defaulted."""

    name: str
    size: int
    source: DimSource


@dataclass(frozen=True)
class InputShape:
    """The shape an input was checked, judged and measured at, and its dynamic dims."""

    input: str
    shape: tuple[int, ...]
    dynamic: tuple[DynamicDim, ...] = ()


def shapes_line(shapes: tuple[InputShape, ...]) -> str:
    """One line: every input's shape, then each dynamic dim once, with where its size came from."""
    sizes = ", ".join(f"{s.input}={'x'.join(map(str, s.shape)) or 'scalar'}" for s in shapes)
    dims: dict[str, DynamicDim] = {}
    for shape in shapes:
        for dim in shape.dynamic:
            dims.setdefault(dim.name, dim)
    detail = ", ".join(f"{d.name}={d.size} ({d.source.value})" for d in dims.values())
    return f"shapes: {sizes}" + (f" (dynamic dims: {detail})" if detail else "")


@dataclass(frozen=True)
class Unwritten:
    """Matches of one rule whose target could not be written into the model (an op the
    model's opset lacks that has no decomposition, a shape that contradicts a known one):
    never dropped silently."""

    rule: str
    matches: int
    reason: str  # the first match's


@dataclass(frozen=True)
class RuleFile:
    """A rule file the search read: its path (the shipped library's: its file name) and
    the sha256 of its bytes."""

    name: str
    sha256: str


class RuleSource(enum.Enum):
    """Where the rules came from."""

    SHIPPED = "shipped"  # the library in the package
    FILE = "file"  # a rule file the caller named
    GIVEN = "given"  # Rule objects or a RuleLibrary passed from Python


@dataclass(frozen=True)
class RuleLibraryUsed:
    """The rules the call searched with: their source, the operator-spec hash the library
    was proved against (its provenance's `spec_set_hash`; None if it records none) and
    the files read."""

    source: RuleSource
    spec_set_hash: str | None
    files: tuple[RuleFile, ...] = ()


@dataclass(frozen=True)
class BudgetUsed:
    """The call's time budget in seconds, after a default was scaled to the model, and
    whether it was defaulted (no `time_budget_s` / `--time-budget` given)."""

    seconds: float
    defaulted: bool


@dataclass(frozen=True)
class CostCacheUsed:
    """Which cost cache the call used: `persistent` (the SQLite database at `path`) or
    `memory` (`--no-cache`: nothing read from or written to disk; `path` None)."""

    mode: str
    path: str | None


def package_versions() -> dict[str, str]:
    """The versions a result depends on: taso, onnx, onnxruntime (or onnxruntime-gpu),
    z3-solver, numpy and Python ("not installed" for a missing package)."""
    return {
        "taso": _version("taso-onnx"),
        "onnx": _version("onnx"),
        "onnxruntime": _version("onnxruntime", "onnxruntime-gpu"),
        "z3-solver": _version("z3-solver"),
        "numpy": _version("numpy"),
        "python": platform.python_version(),
    }


def _version(*distributions: str) -> str:
    for distribution in distributions:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return "not installed"


@dataclass(frozen=True)
class Report:
    input_nodes: int
    output_nodes: int
    applied_rewrites: dict[str, int]
    latency: Latency
    max_abs_diff: dict[str, float | None]
    check: CheckStatus
    decision: Decision
    stop_reason: StopReason
    graphs_explored: int
    phase_seconds: dict[str, float]
    warnings: tuple[str, ...] = field(default=())
    sweeps: tuple[SweepRecord, ...] = field(default=())
    """Rule sweeps, in the order they were judged (or ruled out unjudged)."""
    rejected_rewrites: dict[str, int] = field(default_factory=dict)
    """What the search applied when the original was returned instead (see `decision`)."""
    time_to_best_s: float | None = None
    """Seconds from the start of the call until the search first found the graph it
    ended with; None when it found nothing better than the input."""
    shapes: tuple[InputShape, ...] = field(default=())
    """The shape profile every input was run at (empty when it could not be resolved)."""
    unwritten: tuple[Unwritten, ...] = field(default=())
    """Rules that matched where their target could not be written, with why."""
    versions: dict[str, str] = field(default_factory=dict)
    """`package_versions()` of the process that made the report."""
    rule_library: RuleLibraryUsed | None = None
    input_sha256: str | None = None
    """sha256 of the model file's bytes (its external data files are not included), or of
    the deterministic serialization of a ModelProto given in memory."""
    threads: int | None = None
    """ONNX Runtime intra-op threads of every session the call ran (check, judge, decision)."""
    budget: BudgetUsed | None = None
    cost_cache: CostCacheUsed | None = None
    input_ops: dict[str, int] = field(default_factory=dict)
    """Nodes of the input's main graph by op type."""
    output_ops: dict[str, int] = field(default_factory=dict)
    """Nodes of the returned model's main graph by op type."""
    input_bytes: int | None = None
    """The input model's size in bytes: its serialized proto, weights and external data
    files included; None: not known."""
    output_bytes: int | None = None
    """The returned model's size, counted as `input_bytes` is."""

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        if self.rule_library is not None:
            data["rule_library"] = {**asdict(self.rule_library), "source": self.rule_library.source.value,
                                    "files": [asdict(f) for f in self.rule_library.files]}
        data["latency"] = {**asdict(self.latency), "speedup": self.latency.speedup}
        data["check"] = self.check.value
        data["decision"] = self.decision.name.lower()
        data["decision_reason"] = self.decision.value
        data["stop_reason"] = self.stop_reason.name.lower()
        data["warnings"] = list(self.warnings)
        data["sweeps"] = [asdict(s) for s in self.sweeps]
        data["unwritten"] = [asdict(u) for u in self.unwritten]
        data["shapes"] = [
            {"input": s.input, "shape": list(s.shape),
             "dynamic": [{"name": d.name, "size": d.size, "source": d.source.name.lower()} for d in s.dynamic]}
            for s in self.shapes
        ]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def summary(self) -> str:
        """The tables as aligned plain text, then the notes (what a log file gets)."""
        layout = self.layout()
        sweeps = ["sweeps: none"] if not layout.sweeps else [
            f"sweeps: {len(layout.sweeps) - 1}, in the order judged", *indented(aligned(layout.sweeps, NUMERIC_SWEEP_COLUMNS))]
        return "\n".join([*aligned(layout.models, NUMERIC_MODEL_COLUMNS), "", *sweeps, "", *layout.notes])

    def layout(self) -> SummaryLayout:
        """The summary's tables as cells (a header row first) and its closing lines."""
        sweeps = [(" + ".join(r for r, _ in s.counts()), "+".join(str(n) for _, n in s.counts()), _x(s.predicted_speedup), _x(s.measured_speedup), s.verdict())
                  for s in self.sweeps]
        return SummaryLayout(
            models=(("", "before", "after", "change"), *self._model_rows()),
            sweeps=(SWEEP_HEADER, *sweeps) if sweeps else (),
            notes=tuple(self._notes()),
        )

    def _model_rows(self) -> list[tuple[str, str, str, str]]:
        lat = self.latency
        rows = [("nodes", str(self.input_nodes), str(self.output_nodes), _change(self.input_nodes, self.output_nodes))]
        if self.input_bytes is not None and self.output_bytes is not None:
            rows.append(("size", _bytes(self.input_bytes), _bytes(self.output_bytes),
                         _bytes(self.output_bytes - self.input_bytes, signed=True) if self.output_bytes != self.input_bytes else ""))
        rows += [(f"  {op}", str(self.input_ops.get(op, 0)), str(self.output_ops.get(op, 0)),
                  _change(self.input_ops.get(op, 0), self.output_ops.get(op, 0))) for op in shown_ops(self.input_ops, self.output_ops)]
        speedup = "" if lat.speedup is None else f"{lat.speedup:.3f}x" + (" (from the cost cache)" if lat.measured_cached else "")
        if lat.speedup is not None and lat.speedup > 1.0 and self.decision is Decision.NOT_FASTER:
            speedup += " (not significant)"  # a median the decision's significance test did not pass
        rows.append(("latency, measured", _ms(lat.measured_original_ms), _ms(lat.measured_optimized_ms), speedup))
        rows.append(("latency, predicted", _ms(lat.predicted_original_ms), _ms(lat.predicted_optimized_ms),
                     _x(_ratio(lat.predicted_original_ms, lat.predicted_optimized_ms), missing="")))
        known = [v for v in self.max_abs_diff.values() if v is not None]
        rows.append(("max abs diff", "", f"{max(known):.3g}" if known else "n/a", f"check {self.check.value}"))
        return rows

    def _notes(self) -> list[str]:
        total = sum(self.phase_seconds.values())
        return [
            *([shapes_line(self.shapes)] if self.shapes else []),
            f"search: {self.stop_reason.value}, {self.graphs_explored} graphs explored"
            + ("" if self.time_to_best_s is None else f", best found after {self.time_to_best_s:.1f} s")
            + (f" (the call took {total:.1f} s)" if total else ""),
            "rewrites: " + (_counts(self.applied_rewrites) or "none")
            + (f" (tried, not kept: {_counts(self.rejected_rewrites)})" if self.rejected_rewrites else ""),
            *([f"not written: {_unwritten(self.unwritten)}"] if self.unwritten else []),
            f"result: {self.decision.value}",
            *(f"warning: {w}" for w in self.warnings),
        ]


@dataclass(frozen=True)
class SummaryLayout:
    """The summary as cells: the before/after table of the models, the sweeps (empty when
    there were none), each with its header row first; then one line each for the rest."""

    models: tuple[tuple[str, ...], ...]
    sweeps: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...]


SWEEP_HEADER = ("rule", "sites", "predicted", "measured", "verdict")
NUMERIC_MODEL_COLUMNS = frozenset({1, 2})
NUMERIC_SWEEP_COLUMNS = frozenset({1, 2, 3})
TOP_OPS = 8
"""Op types the table always shows (the input's most frequent); every changed count is shown too."""


def shown_ops(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """The input's `TOP_OPS` most frequent op types and every op whose count changed, most frequent first."""
    ranked = sorted(before.keys() | after.keys(), key=lambda op: (-before.get(op, 0), -after.get(op, 0), op))
    top = set(ranked[:TOP_OPS])
    return [op for op in ranked if op in top or before.get(op, 0) != after.get(op, 0)]


def aligned(rows: tuple[tuple[str, ...], ...], numeric: frozenset[int]) -> list[str]:
    """Rows as lines of padded columns: `numeric` ones right-aligned, the rest left."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if i in numeric else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in rows]


def indented(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines]


def _unwritten(records: tuple[Unwritten, ...]) -> str:
    return ", ".join(f"{u.rule} x{u.matches} ({u.reason})" for u in records)


def _counts(rewrites: dict[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(rewrites.items()))


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} ms"


def _x(value: float | None, missing: str = "-") -> str:
    return missing if value is None else f"{value:.3f}x"


def _ratio(before: float | None, after: float | None) -> float | None:
    return before / after if before and after else None


def _change(before: int, after: int) -> str:
    return "" if before == after else f"{after - before:+d}"


def _bytes(size: int, *, signed: bool = False) -> str:
    """Sizes in decimal units: 812 B, 12.3 kB, 5.23 MB."""
    sign = ("-" if size < 0 else "+") if signed else ""
    value = abs(size)
    for unit, scale, digits in (("GB", 1e9, 2), ("MB", 1e6, 2), ("kB", 1e3, 1)):
        if value >= scale:
            return f"{sign}{value / scale:.{digits}f} {unit}"
    return f"{sign}{value} B"
