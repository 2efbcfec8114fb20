"""Check and choose: the optimized model's outputs against the original's on ORT, both
timed interleaved, and the one to return with its report (`optimize_onnx`'s last step).

The original is returned whenever the candidate is not checked equal and measured
faster: outputs that differ, a candidate ORT refuses, a model ORT cannot run (nothing
checked, nothing returned but the original), a measured verdict of not faster, or a
predicted gain too small to measure.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from taso._model_io import LoadedModel
from taso.backends import ShapeProfile
from taso.backends.compare import ReferenceRun, compare_outputs, run_reference, runnable
from taso.backends.profiles import input_shapes
from taso.errors import BackendError
from taso.ir import Graph
from taso.pipeline._canonical import SIMPLIFICATIONS
from taso.pipeline._decide import MIN_SPEEDUP, Device, Duel, cpu
from taso.pipeline._rewriting import SearchOutcome
from taso.pipeline._summary import model_bytes, op_counts
from taso.report import CheckStatus, Decision, JointRule, Latency, Report, SweepRecord
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
    measured (the decision needs at least that in two rounds; on a ResNet-50 the two
    rounds cost ~8 s): the original is returned, unchecked, saying so.
    """
    notes = list(notes)
    status, diffs, latency = CheckStatus.SKIPPED, {}, Latency(
        predicted_original_ms=outcome.predicted_original_ms, predicted_optimized_ms=outcome.predicted_best_ms
    )
    runnable_original = source(loaded)
    runnable_candidate = runnable(candidate, loaded.base_dir)  # unchanged weights: the input's data files
    decision = Decision.UNCHANGED
    if outcome.applied:
        decision = Decision.OPTIMIZED if check else Decision.UNCHECKED
        if check and measured_costs and _predicted_gain(outcome) < MIN_SPEEDUP:
            decision = Decision.NOT_PREDICTED_FASTER  # two rounds of >= 1.01x would be needed
    try:
        if check and outcome.applied and decision is not Decision.NOT_PREDICTED_FASTER:
            with phases.time("check"):
                say("checking outputs against the original on ONNX Runtime")
                on = device or cpu()
                reference = reference or run_reference(runnable_original, profile=profile, providers=on.providers,
                                                       exact_providers=on.check_providers)
                inputs, expected = reference.inputs, reference.expected()
                duel = Duel(original_graph, outcome.graph, runnable_original, runnable_candidate, inputs, device,
                            recheck_not_faster=fresh_sweep_gain(outcome) >= RECHECK_GAIN)
                try:
                    got = duel.optimized_outputs()
                except BackendError as exc:  # the original runs, the optimized model does not
                    raise _CandidateRejected(str(exc)) from None
                comparison = compare_outputs(expected, got)
            status = CheckStatus.PASSED if comparison.passed else CheckStatus.FAILED
            diffs = comparison.max_abs_diffs()
            if not comparison.passed:
                notes.append("outputs differ from the original: " + comparison.summary())
                decision = Decision.MISMATCH
        if check and decision is Decision.OPTIMIZED:
            with phases.time("measure"):
                say("measuring both models interleaved")
                verdict = duel.verdict(deadline)
            latency = Latency(
                predicted_original_ms=latency.predicted_original_ms,
                predicted_optimized_ms=latency.predicted_optimized_ms,
                measured_original_ms=verdict.original_ms,
                measured_optimized_ms=verdict.optimized_ms,
                measured_spread=verdict.spread,
                measured_cached=verdict.cached,
            )
            if verdict.decisions > 1:
                notes.append(f"measured twice: the first decision said not faster, against the "
                             f"{fresh_sweep_gain(outcome):.2f}x this call's kept sweeps measured; the second said "
                             + ("faster" if verdict.faster else "not faster"))
            if not verdict.faster:
                decision = Decision.NOT_FASTER
    except _CandidateRejected as exc:
        notes.append(f"ONNX Runtime refused the optimized model (the original runs): {exc}")
        status, decision = CheckStatus.FAILED, Decision.REJECTED
    except BackendError as exc:  # never return a rewrite that was not checked and measured
        notes.append(f"ONNX Runtime cannot run this model, so no rewrite was checked or measured: {exc}")
        say(notes[-1])
        warnings.warn(notes[-1], stacklevel=3)
        status = CheckStatus.SKIPPED
        if outcome.applied:
            decision = Decision.UNCHECKABLE
    chosen = candidate if decision in (Decision.OPTIMIZED, Decision.UNCHECKED) else original
    report = Report(
        input_nodes=len(loaded.model.graph.node),
        output_nodes=len(chosen.graph.node),
        applied_rewrites=dict(outcome.applied) if chosen is candidate else {},
        rejected_rewrites={} if chosen is candidate else dict(outcome.applied),
        latency=latency,
        max_abs_diff=diffs,
        check=status,
        decision=decision,
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


class _CandidateRejected(Exception):
    """ORT runs the original but refuses the optimized model: return the original."""


def source(loaded: LoadedModel) -> onnx.ModelProto | Path:
    """The input as ORT should load it: by path when it has one (no serializing)."""
    return loaded.path if loaded.path is not None else loaded.model


