"""Check and choose: the optimized model's outputs against the original's on ORT, both
timed interleaved, and the one to return with its report (`optimize_onnx`'s last step).

The original is returned whenever the candidate is not checked equal and measured
faster: outputs that differ, a candidate ORT refuses, a model ORT cannot run (nothing
checked, nothing returned but the original), a measured verdict of not faster, or a
predicted gain too small to measure. A candidate measured not faster whose last step
was less than confirmed (`SearchOutcome.fallback`) gives way to the graph before that
step, checked and decided the same way; last, where the search's rewrites are not returned
(not faster, outputs that differ, refused by ORT), the canonical stage's graph alone is.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx

from taso._model_io import LoadedModel
from taso.backends import (
    Comparison,
    ModelSource,
    OutputStatus,
    SemanticComparison,
    ShapeProfile,
    compare_semantics,
)
from taso.backends.compare import ReferenceRun, compare_outputs, run_reference, runnable
from taso.backends.profiles import input_shapes
from taso.backends.rounding import RoundingComparison, compare_rounding
from taso.errors import BackendError
from taso.ir import Graph
from taso.pipeline._canonical import SIMPLIFICATIONS
from taso.pipeline._decide import MIN_SPEEDUP, Device, Duel, cpu, decide_seconds
from taso.pipeline._export import checked_export
from taso.pipeline._rewriting import SearchOutcome, Simplified
from taso.pipeline._summary import model_bytes, op_counts
from taso.report import CheckStatus, Decision, JointRule, Latency, Report, SweepRecord
from taso.search.guarded import describe
from taso.search.sweep import SweepStep


@dataclass(frozen=True)
class OptimizeResult:
    """The returned model and the report of how it was obtained."""

    model: onnx.ModelProto
    report: Report


@dataclass
class Phases:
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def time(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start


def check_and_choose(
    loaded: LoadedModel,
    original_graph: Graph,
    original: onnx.ModelProto,
    candidate: onnx.ModelProto,
    outcome: SearchOutcome,
    reference: ReferenceRun | None,
    *,
    check: bool,
    profile: ShapeProfile | None,
    phases: Phases,
    say: Callable[[str], None],
    notes: list[str],
    measured_costs: bool,
    deadline: float = math.inf,
    device: Device | None = None,
) -> OptimizeResult:
    """Check and measure the candidate; pick what to return.

    With measured costs, a candidate whose predicted gain is under `MIN_SPEEDUP` is not
    measured (the decision needs a measured median of at least that; on a ResNet-50 its
    looks cost ~8 s): the original is returned, unchecked, saying so. A candidate
    measured not faster whose search left a `Fallback` (a graph every step of which was
    confirmed) has the fallback checked and decided in its place, where that fits before
    `deadline` (`_with_fallback`).
    """
    notes = list(notes)
    predicted = Latency(predicted_original_ms=outcome.predicted_original_ms,
                        predicted_optimized_ms=outcome.predicted_best_ms)
    decision = Decision.UNCHANGED
    if outcome.applied:
        decision = Decision.OPTIMIZED if check else Decision.UNCHECKED
        if check and measured_costs and _predicted_gain(outcome) < MIN_SPEEDUP:
            decision = Decision.NOT_PREDICTED_FASTER  # a measured median of >= 1.01x would be needed
    trial = _Trial(CheckStatus.SKIPPED, {}, predicted, decision, candidate, dict(outcome.applied))
    if check and decision is Decision.OPTIMIZED:
        on = _Checking(loaded, original_graph, reference, profile, phases, say, device or cpu(), deadline)
        recheck = outcome.fallback is None and fresh_sweep_gain(outcome) >= RECHECK_GAIN
        trial = on.trial(trial, outcome.graph, recheck=recheck, gain=fresh_sweep_gain(outcome))
        if trial.decision is Decision.NOT_FASTER and outcome.fallback is not None:
            trial = _with_fallback(on, trial, outcome)
        if trial.decision in _RETREATS and outcome.simplified is not None:
            trial = _with_simplified(on, trial, outcome.simplified)
    notes.extend(trial.notes)
    if trial.decision is Decision.UNCHECKABLE:
        say(trial.notes[-1])
        warnings.warn(trial.notes[-1], stacklevel=3)
    chosen = trial.model if trial.decision in (Decision.OPTIMIZED, Decision.UNCHECKED) else original
    report = Report(
        input_nodes=len(loaded.model.graph.node),
        output_nodes=len(chosen.graph.node),
        applied_rewrites=trial.applied if chosen is not original else {},
        rejected_rewrites=_rejected(outcome.applied, trial.applied if chosen is not original else {}),
        latency=trial.latency,
        max_abs_diff=trial.diffs,
        check=trial.status,
        decision=trial.decision,
        stop_reason=outcome.stop_reason,
        graphs_explored=outcome.explored,
        phase_seconds=dict(phases.seconds),
        warnings=tuple(notes),
        sweeps=tuple(sweep_record(s) for s in outcome.sweeps),
        time_to_best_s=outcome.best_found_s,
        unwritten=outcome.unwritten,
        shapes=input_shapes(loaded.model, profile),
        input_ops=op_counts(loaded.model),
        output_ops=op_counts(chosen),
        input_bytes=model_bytes(loaded.model),
        output_bytes=model_bytes(chosen),
    )
    return OptimizeResult(model=chosen, report=report)


@dataclass(frozen=True)
class _Trial:
    """One candidate's check and measured decision, as the report will tell it."""

    status: CheckStatus
    diffs: dict[str, float]
    latency: Latency
    decision: Decision
    model: onnx.ModelProto
    applied: dict[str, int]
    notes: tuple[str, ...] = ()


@dataclass
class _Checking:
    """What checking and measuring a candidate against the original needs."""

    loaded: LoadedModel
    original_graph: Graph
    reference: ReferenceRun | None
    profile: ShapeProfile | None
    phases: Phases
    say: Callable[[str], None]
    device: Device
    deadline: float

    def trial(self, trial: _Trial, graph: Graph, *, recheck: bool, gain: float) -> _Trial:
        """`trial`'s model (`graph`, exported) checked against the original and, if equal,
        measured: the decision `_Trial` says, with its notes."""
        try:
            return self._measured(*self._checked(trial, graph, recheck), gain)
        except _CandidateRejected as exc:
            note = f"ONNX Runtime refused the optimized model (the original runs): {exc}"
            return replace(trial, status=CheckStatus.FAILED, decision=Decision.REJECTED, notes=(*trial.notes, note))
        except BackendError as exc:  # never return a rewrite that was not checked and measured
            note = f"ONNX Runtime cannot run this model, so no rewrite was checked or measured: {exc}"
            return replace(trial, status=CheckStatus.SKIPPED, decision=Decision.UNCHECKABLE, notes=(*trial.notes, note))

    def _checked(self, trial: _Trial, graph: Graph, recheck: bool) -> tuple[_Trial, Duel]:
        with self.phases.time("check"):
            self.say("checking outputs against the original on ONNX Runtime")
            on, runnable_original = self.device, source(self.loaded)
            self.reference = self.reference or run_reference(
                runnable_original, profile=self.profile, providers=on.providers, exact_providers=on.check_providers)
            inputs, expected = self.reference.inputs, self.reference.expected()
            candidate = runnable(trial.model, self.loaded.base_dir)
            duel = Duel(self.original_graph, graph, runnable_original, candidate, inputs, on, recheck_not_faster=recheck)
            try:
                got = duel.optimized_outputs()
            except BackendError as exc:  # the original runs, the optimized model does not
                raise _CandidateRejected(str(exc)) from None
            comparison = compare_outputs(expected, got)
            semantic = None if comparison.passed else self._semantic(comparison, runnable_original, candidate, inputs, expected, got)
            rounding = None
            if not comparison.passed and not (semantic is not None and semantic.passed):
                rounding = self._rounding(comparison, runnable_original, inputs, expected, got)
        passed = comparison.passed or any(second is not None and second.passed for second in (semantic, rounding))
        checked = replace(trial, status=CheckStatus.PASSED if passed else CheckStatus.FAILED,
                          diffs=comparison.max_abs_diffs())
        if not passed:
            why = "" if semantic is None else f" (against the ONNX semantics: {semantic.summary()})"
            if rounding is not None and rounding.deviations:
                why += f" (against the original's own float32 rounding: {rounding.summary()})"
            checked = replace(checked, decision=Decision.MISMATCH,
                              notes=(*trial.notes, "outputs differ from the original: " + comparison.summary() + why))
        elif rounding is not None:
            checked = replace(checked, notes=(*trial.notes, _WITHIN_ROUNDING + rounding.summary()))
        elif semantic is not None:
            checked = replace(checked, notes=(*trial.notes, _SAME_SEMANTICS + semantic.summary()))
        return checked, duel

    def _rounding(self, comparison: Comparison, original: ModelSource, inputs: Mapping[str, np.ndarray],
                  expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> RoundingComparison | None:
        """`compare_rounding` (None where ORT cannot run the original with its weights moved)."""
        try:
            return compare_rounding(original, inputs, comparison, expected, got, providers=self.device.check_providers)
        except BackendError:
            return None

    def _semantic(self, comparison: Comparison, original: ModelSource, candidate: ModelSource,
                  inputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                  got: Mapping[str, np.ndarray]) -> SemanticComparison | None:
        """`compare_semantics` where the outputs differ only in value (None where their
        names, shapes or types differ, or ORT cannot run either model unoptimized)."""
        if not all(output.status is OutputStatus.VALUE_MISMATCH or output.passed for output in comparison.outputs):
            return None
        try:
            return compare_semantics(original, candidate, inputs, expected, got, providers=self.device.check_providers)
        except BackendError:
            return None

    def _measured(self, trial: _Trial, duel: Duel, gain: float) -> _Trial:
        if trial.decision is not Decision.OPTIMIZED:
            return trial
        with self.phases.time("measure"):
            self.say("measuring both models interleaved")
            verdict = duel.verdict(self.deadline)
        latency = replace(trial.latency, measured_original_ms=verdict.original_ms,
                          measured_optimized_ms=verdict.optimized_ms, measured_spread=verdict.spread,
                          measured_cached=verdict.cached)
        notes = trial.notes
        if verdict.decisions > 1:
            notes = (*notes, f"measured twice: the first decision said not faster, against the {gain:.2f}x this "
                             "call's kept sweeps measured; the second said " + ("faster" if verdict.faster else "not faster"))
        decision = Decision.OPTIMIZED if verdict.faster else Decision.NOT_FASTER
        return replace(trial, latency=latency, decision=decision, notes=notes)

    def fits_another(self) -> bool:
        """Whether one more decision (unextended) ends before the deadline."""
        timing = None if self.reference is None else self.reference.timing
        return timing is not None and time.perf_counter() + decide_seconds(timing) <= self.deadline


def _with_fallback(on: _Checking, failed: _Trial, outcome: SearchOutcome) -> _Trial:
    """The search's fallback checked and decided in place of `failed` (its result, measured
    not faster), if that fits; `failed`, with a note of why not, otherwise.

    On PP-OCRv4 det (paddle2onnx 1.x, 66 ms a run) three sweeps were confirmed both ways
    (about 1.32x together), then a joint sweep was kept ahead when time ran out; the final
    decision said not faster and the call returned the original, 0.99x, where the graph
    before that joint sweep measured 1.33x in the other run of the benchmark."""
    fallback = outcome.fallback
    assert fallback is not None
    result = (f"the search's result measured not faster ({failed.latency.measured_optimized_ms or 0:.3f} against "
              f"{failed.latency.measured_original_ms or 0:.3f} ms; {fallback.why.value})")
    return _retreat(on, failed, _Retreat(fallback.graph, fallback.applied, "the graph before it", result),
                    gain=confirmed_sweep_gain(outcome))


_RETREATS = (Decision.NOT_FASTER, Decision.MISMATCH, Decision.REJECTED)
"""The decisions on the search's result after which the canonical graph alone is decided."""


def _with_simplified(on: _Checking, failed: _Trial, simplified: Simplified) -> _Trial:
    """The canonical stage's graph alone (`SearchOutcome.simplified`) checked and decided in
    place of `failed` (the search's result and its fallback: not faster, outputs that differ,
    or refused by ORT), if that fits; `failed`, with a note of why not, otherwise."""
    result = f"the search's rewrites were not returned ({failed.decision.value})"
    return _retreat(on, failed, _Retreat(simplified.graph, simplified.applied, "the canonical form alone", result),
                    gain=1.0)


@dataclass(frozen=True)
class _Retreat:
    graph: Graph
    applied: dict[str, int]
    what: str  # "the graph before it"
    result: str  # why the call retreats to it


def _retreat(on: _Checking, failed: _Trial, to: _Retreat, *, gain: float) -> _Trial:
    """`to` checked and decided in place of `failed`, where one more decision fits before
    the deadline; otherwise, or when it is not returned either, `failed` with notes why."""
    if not on.fits_another():
        return replace(failed, notes=(*failed.notes, f"{to.result}; no time was left to decide on {to.what}"))
    try:
        model = checked_export(to.graph)
    except Exception as error:  # noqa: BLE001  (the input was valid: a rewrite made this)
        return replace(failed, notes=(*failed.notes, f"{to.result}; {to.what} could not be exported ({describe(error)})"))
    on.say(f"deciding on {to.what}")
    start = _Trial(CheckStatus.SKIPPED, {}, Latency(predicted_original_ms=failed.latency.predicted_original_ms),
                   Decision.OPTIMIZED, model, to.applied, (*failed.notes, f"{to.result}; {to.what} was checked and "
                                                                          "measured instead"))
    trial = on.trial(start, to.graph, recheck=gain >= RECHECK_GAIN, gain=gain)
    return trial if trial.decision is Decision.OPTIMIZED else replace(
        failed, notes=(*trial.notes, f"{to.what} was not returned either: " + trial.decision.value))


def _rejected(applied: dict[str, int], returned: dict[str, int]) -> dict[str, int]:
    """What the search applied that the returned model does not hold."""
    left = {rule: count - returned.get(rule, 0) for rule, count in applied.items()}
    return {rule: count for rule, count in left.items() if count > 0}


def sweep_record(step: SweepStep) -> SweepRecord:
    if step.skipped is not None:
        return SweepRecord(step.rule_id, step.rewrites, None, False, True, step.predicted_speedup, step.skipped.value,
                           site=step.site, joint=_joint(step))
    return SweepRecord(step.rule_id, step.rewrites, step.speedup, step.accepted, step.complete, step.predicted_speedup,
                       cached=step.cached, site=step.site, joint=_joint(step), tie_break=step.tie_break)


def _joint(step: SweepStep) -> tuple[JointRule, ...]:
    return tuple(JointRule(rule_id, count) for rule_id, count in step.joint)


RECHECK_GAIN = 1.05
"""Kept sweeps measured in this call at this much together contradict a cached "not faster"."""


def kept_sweep_gain(outcome: SearchOutcome) -> float:
    """The product of the kept sweeps' measured speedups (in this call or cached)."""
    return math.prod(step.speedup for step in _kept_sweeps(outcome))


def fresh_sweep_gain(outcome: SearchOutcome) -> float:
    """The product of the kept sweeps' speedups measured in this call (none from the cache)."""
    return math.prod(step.speedup for step in _kept_sweeps(outcome) if not step.cached)


def confirmed_sweep_gain(outcome: SearchOutcome) -> float:
    """`fresh_sweep_gain` of the sweeps judged whole (a sweep cut short left out)."""
    return math.prod(step.speedup for step in _kept_sweeps(outcome) if not step.cached and step.complete)


def _kept_sweeps(outcome: SearchOutcome) -> Iterator[SweepStep]:
    return (step for step in outcome.sweeps if step.accepted and step.skipped is None)


def _predicted_gain(outcome: SearchOutcome) -> float:
    """Predicted speedup of the search's result: the screen's price, or the kept sweeps'
    measured gain where that is higher. On BERT (TorchScript) the kernel screen priced
    a sweep kept at 1.089x measured at 1.009x, under the decision's 1.01x, and the call
    returned the original unmeasured."""
    original, best = outcome.predicted_original_ms, outcome.predicted_best_ms
    if not original or not best or any(rule in SIMPLIFICATIONS.values() for rule in outcome.applied):
        return float("inf")  # nothing predicted (the search starts after the simplifications): measure
    return max(original / best, kept_sweep_gain(outcome))


_SAME_SEMANTICS = ("outputs differ from the original as ONNX Runtime runs it, as its own kernels (integer kernels "
                   "for quantized ops) make the original differ from the ONNX semantics: run unoptimized, both "
                   "compute the same values, and the optimized model is no further from them than the original: ")


_WITHIN_ROUNDING = ("outputs differ from the original by more than the plain tolerance, and by no more than the "
                    "original's own outputs move with each float32 weight moved in its last place (the model is "
                    "ill-conditioned there: large terms that cancel): ")


class _CandidateRejected(Exception):
    """ORT runs the original but refuses the optimized model: return the original."""


def source(loaded: LoadedModel) -> onnx.ModelProto | Path:
    """The input as ORT should load it: by path when it has one (no serializing)."""
    return loaded.path if loaded.path is not None else loaded.model


