"""`optimize_onnx`: the one entry point deployment pipelines call.

    load -> import (IR) -> search -> export -> check on ORT -> measure both -> pick -> write

Contracts: the input (file or proto) is never modified; `output` is written atomically
and only after every check passed; every failure that is the input's fault raises an
`InputError` before anything is written. A time budget of 0 means no search at all: the
result is a pure round trip of the original.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import onnx

from taso._model_io import (
    LoadedModel,
    check_model,
    check_output_path,
    data_file_of,
    load_model,
    save_model_atomic,
    write_text_atomic,
)
from taso._onnx_import import import_model
from taso.backends import AnalyticalCostModel, ShapeProfile, nchwc_block
from taso.backends.compare import ReferenceRun, run_reference
from taso.backends.graph_cost import Folds, MeasuredCostModel
from taso.backends.kernel_cost import KernelCostModel, weight_bytes
from taso.backends.ort_backends import OrtCpuBackend, OrtCudaBackend
from taso.backends.profiles import check_profile_names
from taso.backends.registry import BackendSpec, Pricing, backend_spec
from taso.errors import BackendError, TasoWarning, UsageError
from taso.ir import Graph
from taso.pipeline._bodies import body_node_count, optimize_bodies
from taso.pipeline._canonical import Canonical, canonicalize
from taso.pipeline._choose import OptimizeResult, Phases, check_and_choose, source, sweep_record
from taso.pipeline._decide import (
    MAX_JUDGED_MS,
    Device,
    MeasuredJudge,
    decide_seconds,
    longest_decide_seconds,
)
from taso.pipeline._export import checked_export, export
from taso.pipeline._html import report_html as render_html
from taso.pipeline._pad_channels import BLOCK
from taso.pipeline._provenance import call_record
from taso.pipeline._rewriting import (
    RulesArg,
    SearchOutcome,
    Simplified,
    Sweeping,
    resolve_rules,
    run_search,
)
from taso.pipeline._upgrade import check_target_opset, upgraded
from taso.pipeline.budget import Budget
from taso.report import StopReason
from taso.search import CostModel, SearchProgress
from taso.search.guarded import GuardedCost, describe, guarded_judge
from taso.search.sweep import SweepStep
from taso.substitutions.rule import Rule


def optimize_onnx(
    model: str | os.PathLike[str] | onnx.ModelProto,
    output: str | os.PathLike[str] | None = None,
    *,
    backend: str = "ort-cpu",
    time_budget_s: float | None = None,
    alpha: float = 1.05,
    check: bool = True,
    rules: RulesArg = None,
    shapes: str | Mapping[str, object] | None = None,
    progress: Callable[[str], None] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    report_path: str | os.PathLike[str] | None = None,
    report_html: str | os.PathLike[str] | None = None,
    target_opset: int | None = None,
) -> OptimizeResult:
    """Optimize an ONNX model with verified rewrites; return the faster of it and the original.

    `model` is a path or a ModelProto; `output`, if given, receives the result atomically.
    `time_budget_s` is for the whole call: the search gets what loading, checking and
    measuring are expected to leave of it (known from one timed run of the original),
    and at least `MIN_SEARCH_SHARE` of it. 0 means no search at all. None (the default):
    scaled to the model once one run has timed it (`taso.pipeline.budget.default_seconds`,
    10 s for a small fast model, at most 180 s); a given budget is a hard limit.
    `shapes` fills dynamic dims for costing, checking and measuring: a string
    ("input=1x3x224x224,batch=1") or a mapping ({"input": (1, 3, 224, 224), "batch": 1}).
    `base_dir` is the folder of a ModelProto's external data (required when it has some;
    a model file's data is read from its own folder, never from anywhere else).
    `report_path`, if given, receives the report as JSON, written after the model;
    `report_html`, the report as one self-contained HTML page (`taso.pipeline._html`).
    No path written (output, its `.data` file, the report) may be a file the input references.
    `target_opset`, if given, upgrades the model with onnx's version converter before the
    search (never by default; `taso.pipeline._upgrade`): the upgrade is checked and
    measured with the rewrites, and the original is returned if the result is not faster.
    """
    target = _validate_options(backend=backend, time_budget_s=time_budget_s, alpha=alpha)
    check_target_opset(target_opset)
    given_rules = rules
    if isinstance(rules, str | os.PathLike):  # a bad rule file is refused before the model is loaded
        rules = resolve_rules(rules)
    budget = Budget.default() if time_budget_s is None else Budget.of(time_budget_s)
    profile = _profile(shapes)
    phases = Phases()
    say = progress or (lambda _msg: None)
    notes: list[str] = []

    def note(message: str) -> None:
        """A warning for the report, said as it happens."""
        notes.append(message)
        say(message)

    with _warnings_noted(note):
        return _optimize(
            model, output, target=target, time_budget_s=time_budget_s, alpha=alpha, check=check, rules=rules,
            profile=profile, say=say, note=note, notes=notes, base_dir=base_dir, report_path=report_path,
            phases=phases, budget=budget, given_rules=given_rules, report_html=report_html, target_opset=target_opset,
        )


@contextmanager
def _warnings_noted(note: Callable[[str], None]) -> Iterator[None]:
    """`TasoWarning`s (a cost cache fallen back to memory...) become report notes as they
    are raised; other warnings are shown as before."""
    with warnings.catch_warnings():
        warnings.filterwarnings("default", category=TasoWarning)
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: object = None, line: str | None = None) -> None:
            if issubclass(category, TasoWarning):
                note(str(message))
            else:
                shown(message, category, filename, lineno, file, line)  # type: ignore[arg-type]

        warnings.showwarning = show
        yield


def _optimize(
    model: str | os.PathLike[str] | onnx.ModelProto, output: str | os.PathLike[str] | None, *, target: _Target,
    time_budget_s: float | None, alpha: float, check: bool, rules: RulesArg, profile: ShapeProfile | None,
    say: Callable[[str], None], note: Callable[[str], None], notes: list[str], base_dir: str | os.PathLike[str] | None,
    report_path: str | os.PathLike[str] | None, phases: Phases, budget: Budget, given_rules: RulesArg,
    report_html: str | os.PathLike[str] | None = None, target_opset: int | None = None,
) -> OptimizeResult:
    with phases.time("load"):
        loaded = load_model(model, base_dir=base_dir)
        check_profile_names(loaded.model, profile)  # a --shape naming no input: said before the import
        out_path, (report_out, html_out) = _output_paths(loaded, output, report_path, report_html)
        graph = import_model(loaded.model, base_dir=loaded.base_dir)
        check_model(loaded.model, path=loaded.path)
    say(f"loaded: {len(graph.nodes)} nodes")
    reference = None
    if budget.seconds > 0 and (check or target.spec.judges_sweeps):
        # the check's expected outputs; the sweep judge's timing (no sweeps for external weights)
        with phases.time("check"):
            reference = run_reference(source(loaded), profile=profile, providers=target.device.providers,
                                      exact_providers=target.device.check_providers)
    budget = _scaled(budget, reference, len(graph.nodes) + body_node_count(graph), say)
    search_budget = _search_budget(budget, reference if check else None, say)
    with phases.time("search"):
        if check and reference is not None and reference.error is not None and search_budget.seconds > 0:
            note(f"ONNX Runtime cannot run the original model, so no rewrite could be checked and none was "
                 f"searched for: {reference.error}")
            outcome = SearchOutcome(graph, {}, StopReason.UNCHECKABLE)
        else:
            start = upgraded(loaded.model, graph, target_opset, loaded.base_dir, note)
            canonical = _canonicalize(start.graph, say)
            outcome = _search(
                canonical.graph, budget=search_budget, alpha=alpha, rules=rules, target=target,
                profile=profile, say=say, reference=reference, note=note,
            )
            outcome = _with_simplifications(outcome, canonical, start.applied)
        outcome = _legalize(outcome)
    with phases.time("export"):
        original = export(graph)
        candidate, outcome = _exported(outcome, original, note)
    result = check_and_choose(
        loaded, graph, original, candidate, outcome, reference, check=check, profile=profile, phases=phases, say=say, notes=notes,
        measured_costs=target.spec.pricing is Pricing.KERNELS, deadline=_decision_deadline(budget, reference),
        device=target.device,
    )
    record = call_record(model if isinstance(model, onnx.ModelProto) else loaded.path or loaded.model, given_rules,
                         threads=target.runner.threads, budget=budget)
    result = dataclasses.replace(result, report=dataclasses.replace(result.report, **record))  # type: ignore[arg-type]
    if out_path is not None:
        with phases.time("write"):
            save_model_atomic(result.model, out_path, base_dir=loaded.base_dir)
    if report_out is not None:
        write_text_atomic(report_out, result.report.to_json() + "\n")
    if html_out is not None:
        write_text_atomic(html_out, render_html(result.report, resolve_rules(rules)))
    return result


def _canonicalize(graph: Graph, say: Callable[[str], None]) -> Canonical:
    """The one normal form the rules are written against (`_canonical`): values unchanged
    bit for bit, only the incidental forms converters chose."""
    canonical = canonicalize(graph)
    if canonical.counts:
        say("canonical form: " + ", ".join(f"{what} x{n}" for what, n in sorted(canonical.counts.items())))
    return canonical


_SEARCHED = (StopReason.TIME_BUDGET, StopReason.CONVERGED, StopReason.EXHAUSTED, StopReason.STALLED,
             StopReason.GRAPH_BUDGET)


def _with_simplifications(outcome: SearchOutcome, canonical: Canonical,
                          upgrade: Mapping[str, int] | None = None) -> SearchOutcome:
    """The canonical stage's simplifications (work ORT would do, removed: reshape round
    trips) and an asked-for opset upgrade count as applied where the search ran on its
    graph, so that the measured decision weighs them even when no rule applied. With no
    search (budget 0, no rules, a failure) the result is the input's graph: nothing of the
    canonical stage is kept. Where the search changed the canonical graph, that graph is
    left as the last thing to fall back on (`SearchOutcome.simplified`): on Keras
    EfficientNetV2-B0 the reshape round trips removed measured 1.075x in one run; in the
    next a rule's rewrite was kept on top, the final decision said not faster, and the call
    returned the original."""
    before = {**(upgrade or {}), **canonical.simplified}
    if not before or outcome.stop_reason not in _SEARCHED:
        return outcome
    fallback = outcome.fallback
    if fallback is not None:
        fallback = dataclasses.replace(fallback, applied={**before, **fallback.applied})
    tried = {outcome.graph.structural_hash, None if fallback is None else fallback.graph.structural_hash}
    simplified = None if canonical.graph.structural_hash in tried else Simplified(canonical.graph, dict(before))
    return dataclasses.replace(outcome, applied={**before, **outcome.applied}, fallback=fallback, simplified=simplified)


def _legalize(outcome: SearchOutcome) -> SearchOutcome:
    """Stage seam: ops the model's opset lacks are never emitted. The applier writes a
    target op the opset lacks as its spec's decomposition (HardSwish below opset 14 as
    x * HardSigmoid(x)) or not at all; nothing is left to do here."""
    return outcome


def _output_paths(
    loaded: LoadedModel, output: str | os.PathLike[str] | None, *reports: str | os.PathLike[str] | None,
) -> tuple[Path | None, tuple[Path | None, ...]]:
    """Check, before any work, every path the call will write (the model, then each report)."""
    out = None if output is None else check_output_path(output, input_path=loaded.path, protected=loaded.protected)
    taken = loaded.protected
    if out is not None:
        taken = taken | {Path(os.path.realpath(out)), Path(os.path.realpath(data_file_of(out)))}
    checked: list[Path | None] = []
    for report in reports:
        path = None if report is None else check_output_path(report, input_path=loaded.path, protected=taken, what="report")
        taken = taken if path is None else taken | {Path(os.path.realpath(path))}
        checked.append(path)
    return out, tuple(checked)


def _scaled(budget: Budget, reference: ReferenceRun | None, nodes: int, say: Callable[[str], None]) -> Budget:
    """A default budget scaled to the model its reference run timed; a given one unchanged."""
    timing = None if reference is None else reference.timing
    if timing is None:
        return budget
    scaled = budget.resolved(run_ms=timing.run_ms, nodes=nodes)
    if scaled.seconds != budget.seconds:
        say(f"time budget: {scaled.seconds:.0f} s by default for {nodes} nodes at {timing.run_ms:.0f} ms a run "
            f"(--time-budget sets a limit)")
    return scaled


def _decision_deadline(budget: Budget, reference: ReferenceRun | None) -> float:
    """When the measured decision must end: with a default budget, room for a second one
    as long as the model's longest decision (`longest_decide_seconds`)."""
    timing = None if reference is None else reference.timing
    return budget.decision_deadline(0.0 if timing is None else longest_decide_seconds(timing))


def _search_budget(budget: Budget, reference: ReferenceRun | None, say: Callable[[str], None]) -> Budget:
    """The search's share: what the call leaves after loading (done) and checking and
    measuring a candidate (expected, from the reference run's timing: ResNet-50 ~3 s, BERT ~10 s)."""
    timing = None if reference is None else reference.timing
    # the candidate's export and check run (a session's load stands in for the export), then the decision
    after_s = 0.0 if timing is None else timing.session_s + timing.run_ms / 1000 + decide_seconds(timing)
    share = budget.search(after_s)
    if budget.search_is_floored(after_s):
        say(f"loading, checking and measuring this model take about {budget.elapsed() + after_s:.0f} s of the "
            f"{budget.seconds:g} s budget; the search gets {share.seconds:.1f} s")
    return share


def _exported(
    outcome: SearchOutcome, original: onnx.ModelProto, note: Callable[[str], None]
) -> tuple[onnx.ModelProto, SearchOutcome]:
    """The search's result as a checked ModelProto; the original if that fails (our fault)."""
    if not outcome.applied:
        return original, outcome
    try:
        candidate = checked_export(outcome.graph)
    except Exception as error:  # noqa: BLE001  (the input was valid: a rewrite made this)
        note(f"the optimized model could not be exported ({describe(error)}); the original is returned")
        return original, dataclasses.replace(outcome, applied={}, stop_reason=StopReason.FAILED)
    return candidate, outcome


def _search(
    graph: Graph, *, budget: Budget, alpha: float, rules: RulesArg, target: _Target,
    profile: ShapeProfile | None, say: Callable[[str], None], reference: ReferenceRun | None,
    note: Callable[[str], None],
) -> SearchOutcome:
    """Search the main graph, then the If/Loop/Scan bodies, sharing the budget by node count.

    A failure inside the search (a cost model, a judge, a sweep, a rule) never aborts the
    call: the graph searched so far is kept, or the input's, with a note saying why.
    """
    if budget.seconds == 0:
        return SearchOutcome(graph, {}, StopReason.NO_SEARCH)
    chosen = resolve_rules(rules)
    if not chosen:
        return SearchOutcome(graph, {}, StopReason.NO_RULES)
    say(f"searching with {len(chosen)} proved rules for up to {budget.seconds:.1f} s")
    try:
        return _search_all(graph, chosen, budget=budget, alpha=alpha, target=target,
                           profile=profile, say=say, reference=reference, note=note)
    except Exception as error:  # noqa: BLE001
        note(f"the search failed and was abandoned ({describe(error)}); the original is returned")
        return SearchOutcome(graph, {}, StopReason.FAILED)


def _search_all(
    graph: Graph, chosen: tuple[Rule, ...], *, budget: Budget, alpha: float, target: _Target,
    profile: ShapeProfile | None, say: Callable[[str], None], reference: ReferenceRun | None,
    note: Callable[[str], None],
) -> SearchOutcome:
    cost_model = _cost_model(graph, target, profile, reference, note)
    sweeping = _sweeping(graph, target=target, profile=profile, say=say, reference=reference, note=note, budget=budget)
    in_bodies = body_node_count(graph)
    outcome = run_search(
        graph, rules=chosen, cost_model=cost_model, alpha=alpha, budget=budget.by_nodes(len(graph.nodes), len(graph.nodes) + in_bodies),
        progress=_throttled(say), sweeping=sweeping,
    )
    if not in_bodies:
        return outcome

    def search_body(body: Graph, share: Budget) -> tuple[Graph, dict[str, int]]:
        found = run_search(body, rules=chosen, cost_model=cost_model, alpha=alpha, budget=share)
        return found.graph, found.applied

    bodies = optimize_bodies(outcome.graph, search_body, budget=budget)
    applied = Counter(outcome.applied) + Counter(bodies.applied)
    for reason in bodies.skipped:
        note(f"subgraph left unoptimized: {reason}")
    # the fallback is the main graph's alone: none where the bodies were searched too
    return dataclasses.replace(outcome, graph=bodies.graph, applied=dict(sorted(applied.items())), fallback=None)


def _sweeping(
    graph: Graph, *, target: _Target, profile: ShapeProfile | None, say: Callable[[str], None],
    reference: ReferenceRun | None, note: Callable[[str], None], budget: Budget,
) -> Sweeping | None:
    """The whole-model judge for rule sweeps, when the model can be judged whole.

    Not for backends that do not judge sweeps (analytical: no device), models ORT cannot
    run, or models too slow per run to be judged in the sweeps' share of `budget`
    (`Budget.slowest_judged_ms`). Candidates of a model with external weights reference
    the input's data files (as the final decision's do); weights a rewrite computes are in
    the candidate. The judge runs on the backend's device; the kernel-cost screen only
    where candidates are priced by ORT CPU's kernels.
    """
    if not target.spec.judges_sweeps or graph.context is None or reference is None:
        return None
    measured = MeasuredJudge.for_reference(reference, target.device, max_run_ms=budget.slowest_judged_ms(MAX_JUDGED_MS),
                                           data_folder=_data_folder(graph))
    if measured is None:
        if reference.error is None:
            say("rule sweeps skipped: the model is too slow per run to judge candidates whole in this budget")
        return None

    def on_step(step: SweepStep) -> None:
        predicted = f"predicted {step.predicted_speedup:.3f}x"
        rules = sweep_record(step).rules()
        kind = "joint sweep" if step.joint else "sweep"
        if step.skipped is not None:
            say(f"{kind} {rules}: {predicted}, not judged: {step.skipped.value}")
            return
        verdict = ("faster" if step.complete else "ahead when time ran out") if step.accepted else "not faster"
        say(f"{kind} {rules}: {predicted}, measured {step.speedup:.3f}x, {verdict}")

    judge = guarded_judge(measured, on_failure=note)
    prior = GuardedCost(AnalyticalCostModel(profile=profile, folds=Folds.ORT), None, on_failure=note,
                        name="the sweep's analytical prior")
    block = _channel_block(target, note)
    if target.spec.pricing is not Pricing.KERNELS or weight_bytes(graph) > SCREEN_MAX_BYTES:
        return Sweeping(judge, prior, on_step, channel_block=block)
    screen = GuardedCost(KernelCostModel(profile=profile, whole_graph_bytes=math.inf), None, on_failure=note,
                         name="the sweep screen (kernel cost model)")  # sweeps are priced whole
    return Sweeping(judge, prior, on_step, screen=screen, min_predicted=MIN_PREDICTED_SPEEDUP, channel_block=block)


def _channel_block(target: _Target, note: Callable[[str], None]) -> int | None:
    """The channel block that channel padding widens to: on ORT CPU, the NCHWc block of
    this machine (16 with AVX-512, 8 with AVX2; None where ORT has no NCHWc kernels, or
    the probe failed); elsewhere the AVX-512 block, as before (not measured on a GPU)."""
    if target.spec.pricing is not Pricing.KERNELS:
        return BLOCK
    try:
        block = nchwc_block()
    except Exception as error:  # noqa: BLE001 - a failed probe costs the padding, not the call
        note(f"channel padding skipped: ORT's channel block could not be read ({describe(error)})")
        return None
    return block if block > 1 else None


SCREEN_MAX_BYTES = 128 << 20
"""Sweeps of models with more weight than this are judged unscreened: compiling a whole
graph costs ORT about 1 s per 100 MB of weights (BERT-base, 340 MB: 2.7-4.4 s a sweep)."""


MIN_PREDICTED_SPEEDUP = 1.005
"""A sweep is judged only if the kernel cost model predicts at least this speedup. Over 24
partial sweeps per model its predictions ranked graphs with Spearman 0.88-0.98
(MobileNetV3, CRNN, YOLOv8n, ResNeXt-50, PP-LCNet); every sweep that measured faster in
the benchmark suite was predicted 1.05x or more, while the sweeps predicted within half
a percent (Relu as Clip, redundant Relus) only ever passed the judge by noise: on NasRNN
ten redundant Relus once measured "1.037x" both ways."""


def _data_folder(graph: Graph) -> str | None:
    """The folder of the model's external weights (None: every weight is in the model)."""
    return next((init.base_dir for init in graph.initializers.values() if init.is_external), None)


@dataclass(frozen=True)
class _Target:
    """The backend's row of the table, and the device its runner found."""

    spec: BackendSpec
    runner: OrtCpuBackend | OrtCudaBackend

    @property
    def device(self) -> Device:
        return Device.of(self.runner)


def _validate_options(*, backend: str, time_budget_s: float | None, alpha: float) -> _Target:
    """Refuse bad options before any work: nothing is read or written yet. A backend whose
    device is missing (ort-cuda without onnxruntime-gpu or a GPU) is refused, never
    replaced by another."""
    if time_budget_s is not None and time_budget_s < 0:
        raise UsageError(f"time budget must be >= 0 seconds, got {time_budget_s}")
    if alpha < 1.0:
        raise UsageError(f"alpha must be >= 1.0 (1.0: accept only improvements), got {alpha}")
    spec = backend_spec(backend)
    try:
        runner = spec.runner()
    except BackendError as exc:
        raise UsageError(f"backend {backend!r} is not available here: {exc}") from None
    return _Target(spec, runner)


def _cost_model(
    graph: Graph, target: _Target, profile: ShapeProfile | None, reference: ReferenceRun | None,
    note: Callable[[str], None],
) -> CostModel:
    analytical = AnalyticalCostModel(profile=profile)
    pricing = target.spec.pricing
    if pricing is Pricing.ANALYTICAL:
        return GuardedCost(analytical, None, on_failure=note, name="the analytical cost model")
    model: KernelCostModel | MeasuredCostModel = (
        KernelCostModel(profile=profile) if pricing is Pricing.KERNELS
        else MeasuredCostModel(profile=profile, runner=target.runner, fallback=analytical)
    )
    name = "the kernel cost model" if pricing is Pricing.KERNELS else "the measured cost model"
    if reference is not None and reference.timing is not None:
        try:
            model.seed(graph, reference.timing.run_ms)
        except Exception as error:  # noqa: BLE001
            note(f"{name} could not be seeded ({describe(error)})")
    return GuardedCost(model, analytical, on_failure=note, name=name)


def _throttled(say: Callable[[str], None], every_s: float = 1.0) -> Callable[[SearchProgress], None]:
    last = [0.0]

    def report(p: SearchProgress) -> None:
        now = time.perf_counter()
        if now - last[0] >= every_s:
            last[0] = now
            say(f"search: {p.explored} graphs explored, best {p.best_cost:.3f} ms (start {p.initial_cost:.3f} ms)")

    return report


def _profile(shapes: str | Mapping[str, object] | None) -> ShapeProfile | None:
    if shapes is None:
        return None
    if isinstance(shapes, str):
        return ShapeProfile.parse(shapes)
    dims = {k: int(v) for k, v in shapes.items() if isinstance(v, int)}
    inputs = {k: tuple(v) for k, v in shapes.items() if not isinstance(v, int)}  # type: ignore[call-overload]
    return ShapeProfile.of(shapes=inputs, dims=dims)


