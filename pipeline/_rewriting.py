"""Glue between the rule library, the matcher and the search: what `optimize_onnx` runs.

    rules (shipped library or the caller's) -> expand(graph, near) -> search(...) -> outcome

Only rules whose proof record says PROVED are used: an unproved rule never rewrites a
user's model, whatever file it came from.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from taso.errors import UsageError
from taso.ir import Graph
from taso.opspecs import spec_by_name
from taso.pipeline._lower_transposes import LOWER_TRANSPOSES, lowered_rewrites
from taso.pipeline._pad_channels import is_pad_rule, padded_rewrites
from taso.pipeline.budget import Budget
from taso.report import StopReason, Unwritten
from taso.search import CostModel, Expand, Patience, Rewrite, SearchProgress, search
from taso.search.sweep import Judge, SweepStep, confirmed_judgement, sweep
from taso.substitutions.matching import (
    Match,
    NotApplied,
    Unapplicable,
    apply_or_reason,
    find_matches,
)
from taso.substitutions.rule import ProofStatus, Rule, RuleError, RuleLibrary, load_rules

RulesArg = str | os.PathLike[str] | RuleLibrary | Sequence[Rule] | None


@dataclass(frozen=True)
class SearchOutcome:
    graph: Graph
    applied: dict[str, int]
    stop_reason: StopReason
    explored: int = 0
    predicted_original_ms: float | None = None
    predicted_best_ms: float | None = None
    sweeps: tuple[SweepStep, ...] = ()
    best_found_s: float | None = None
    unwritten: tuple[Unwritten, ...] = ()
    """Seconds from the start of the call until the search found the graph it returned
    (None: nothing better than the input)."""
    fallback: Fallback | None = None
    """What the final decision falls back on when `graph` measures not faster."""
    simplified: Simplified | None = None
    """What the final decision falls back on last: the canonical stage's graph alone."""


class Speculation(enum.Enum):
    """Why the search's result rests on less than judgements confirmed both ways."""

    CUT_SHORT = "its last sweep was kept ahead when time ran out, judged one way and cut short"
    BACKTRACKED = "the backtracking search's result was kept on one whole-model judgement and its confirmation"


@dataclass(frozen=True)
class Fallback:
    """The last graph of the search whose every step was judged whole both ways (or the
    swept graph under a backtracking result), with the rules applied up to it."""

    graph: Graph
    applied: dict[str, int]
    why: Speculation


@dataclass(frozen=True)
class Simplified:
    """The graph the search started from: the canonical stage's simplifications (and an
    asked-for opset upgrade) alone, no rule, values unchanged bit for bit; decided where
    the search's result (and its `Fallback`) is not returned."""

    graph: Graph
    applied: dict[str, int]


def default_rules() -> tuple[Rule, ...]:
    """Every rule file shipped in `taso/substitutions/library/`, in file-name order."""
    library = resources.files("taso.substitutions").joinpath("library")
    rules: list[Rule] = []
    if not library.is_dir():
        return ()
    for entry in sorted(library.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            rules.extend(load_rules(entry.read_text()).rules)
    return tuple(rules)


def resolve_rules(rules: RulesArg) -> tuple[Rule, ...]:
    """The proved rules to search with; a rule file that cannot be read, or is not a rule
    file, is a usage error whose one line names the file."""
    if rules is None:
        chosen = default_rules()
    elif isinstance(rules, RuleLibrary):
        chosen = rules.rules
    elif isinstance(rules, str | os.PathLike):
        try:
            chosen = load_rules(Path(rules)).rules
        except RuleError as exc:  # missing, unreadable, not JSON, not a rule file: the caller's input
            raise UsageError(str(exc)) from None
    else:
        chosen = tuple(rules)
    return tuple(r for r in chosen if r.proof.status is ProofStatus.PROVED)


def is_commutation(rule: Rule) -> bool:
    """`op(a, b) = op(b, a)` for a commutative op: the matcher already tries both orders."""
    if len(rule.source.nodes) != 1 or len(rule.target.nodes) != 1:
        return False
    src, dst = rule.source.nodes[0], rule.target.nodes[0]
    return (
        src.op == dst.op
        and spec_by_name(src.op).commutative
        and src.params == dst.params
        and sorted(src.inputs) == sorted(dst.inputs)
    )


Priority = Callable[[Graph, Rewrite], float]


class UnwrittenLog:
    """Matches whose target the model's opset cannot express, per rule: count and first
    reason. (Matches whose target is invalid at that site, a shape that contradicts a known
    one, are not rewrites that could be written; they are not listed.)"""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[set[tuple[int, ...]], str]] = {}

    def add(self, rule_id: str, match: Match, reason: str) -> None:
        sites, first = self._seen.setdefault(rule_id, (set(), reason))
        sites.add(tuple(sorted(match.node_ids)))

    def records(self) -> tuple[Unwritten, ...]:
        return tuple(Unwritten(rule, len(sites), reason) for rule, (sites, reason) in sorted(self._seen.items()))


def make_expand(
    rules: Sequence[Rule], *, priority: Priority | None = None, unwritten: UnwrittenLog | None = None,
) -> Callable[[Graph, frozenset[int] | None], Iterator[Rewrite]]:
    """`expand(graph, near)` for the search: every rule at every match (near the change).

    Commutation rules are left out: the matcher matches commutative ops in both orders.
    With `priority` (e.g. the analytical cost delta, microseconds to compute), rewrites are
    yielded most promising first, so that a measured cost model, which needs a fraction of
    a second per rewrite, prices the likely wins before the budget runs out. The order
    decides only what is priced first; what is kept is decided by the measured cost.
    """
    rules = [r for r in rules if not is_commutation(r)]

    def rewrites(graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
        for rule in rules:
            for match in find_matches(graph, rule, near=near):
                variant = apply_or_reason(graph, rule, match)
                if isinstance(variant, NotApplied):
                    if unwritten is not None and variant.kind is Unapplicable.OPSET:
                        unwritten.add(rule.id, match, variant.reason)
                    continue
                yield Rewrite.between(rule.id, graph, variant)

    def expand(graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
        if priority is None:
            yield from rewrites(graph, near)
            return
        found = list(rewrites(graph, near))
        keys = [priority(graph, r) for r in found]
        order = sorted(range(len(found)), key=lambda i: (keys[i], i))
        yield from (found[i] for i in order)

    return expand


def _padding(block: int | None) -> Expand:
    """The channel padding to multiples of `block` (`_pad_channels`), or nothing (None)."""

    def padding(graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
        if block is not None:
            yield from padded_rewrites(graph, near, block=block)

    return padding


def _layout(rule_id: str, block: int | None) -> Expand | None:
    """The whole-graph layout rewrite swept as `rule_id`, or None for a rule's id."""
    if is_pad_rule(rule_id):
        return _padding(block)
    if rule_id == LOWER_TRANSPOSES:
        return lowered_rewrites
    return None


def _with_layouts(expand: Expand, block: int | None) -> Expand:
    """`expand` and, for the sweeps alone, the whole-graph layout rewrites whose gain shows
    only when measured whole: the channel padding to multiples of `block`
    (`_pad_channels`; None: none) and the Transposes lowered (`_lower_transposes`)."""
    padding = _padding(block)

    def with_layouts(graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
        yield from expand(graph, near)
        yield from padding(graph, near)
        yield from lowered_rewrites(graph, near)

    return with_layouts


@dataclass(frozen=True)
class Sweeping:
    """What the sweep phase needs: a whole-model judge and a cheap prior to order sweeps."""

    judge: Judge
    prior: CostModel
    on_step: Callable[[SweepStep], None] | None = None
    screen: CostModel | None = None
    """A measured model that prices each sweep before it is judged: one it prices like
    the current graph, or predicts under `min_predicted` faster, is not judged (see
    `taso.search.sweep`)."""
    min_predicted: float = 0.0
    channel_block: int | None = None
    """The channel block that channel padding widens to (ORT CPU's NCHWc block on this
    machine); None: no channel padding."""


def run_search(
    graph: Graph,
    *,
    rules: Sequence[Rule],
    cost_model: CostModel,
    alpha: float,
    budget: Budget,
    progress: Callable[[SearchProgress], None] | None = None,
    priority: Priority | None = None,
    sweeping: Sweeping | None = None,
) -> SearchOutcome:
    """Rule sweeps judged end to end (with `sweeping`), then the backtracking search.

    The sweeps get `budget.sweeps()`; the backtracking search starts from the swept graph
    with what is left, less the final judgement's reserve. Its result replaces the swept
    graph only if the judge finds it faster too, so that moves priced by regions alone
    never undo what the whole-model measurements established.

    After sweeps, the backtracking search is patient only for `BACKTRACK_PATIENCE`, and
    its result counts only if priced at least `MIN_SEARCH_GAIN` faster than the swept graph.

    The stop reason is the backtracking search's (`CONVERGED`, `EXHAUSTED`: it ended
    early, nothing improving left; `STALLED`), unless the sweeps ran out of time first:
    then it is `TIME_BUDGET`, whatever the search did with the rest.
    """
    if budget.seconds == 0:
        return SearchOutcome(graph, {}, StopReason.NO_SEARCH)
    if not rules:
        return SearchOutcome(graph, {}, StopReason.NO_RULES)
    log = UnwrittenLog()
    expand = make_expand(rules, priority=priority, unwritten=log)
    start, swept, steps, speedup, reserve = graph, Counter[str](), (), 1.0, 0.0
    swept_at, sweeps_timed_out, confirmed = None, False, None
    if sweeping is not None:
        by_id = {rule.id: rule for rule in rules}
        share = budget.sweeps()
        phase = sweep(
            graph, _with_layouts(expand, sweeping.channel_block), sweeping.judge, prior=sweeping.prior,
            time_budget_s=share.seconds,
            expand_rule=lambda rule_id: (_layout(rule_id, sweeping.channel_block)
                                         or make_expand([by_id[rule_id]], unwritten=log)),
            on_step=sweeping.on_step,
            screen=sweeping.screen, min_predicted=sweeping.min_predicted,
        )
        start, swept, steps = phase.graph, phase.applied, phase.steps
        swept_at = None if phase.best_found_s is None else share.start + phase.best_found_s
        sweeps_timed_out = phase.stop_reason is StopReason.TIME_BUDGET
        confirmed = _fallback(phase.confirmed, phase.confirmed_applied, graph, Speculation.CUT_SHORT)
        reserve = phase.judge_s if swept else 0.0  # for judging the search's result at the end
        for step in steps:
            speedup *= step.speedup if step.accepted else 1.0
    backtracking = budget.cut(budget.left() - reserve)
    if backtracking.seconds <= 0:  # the sweeps spent the budget
        outcome = _outcome(start, swept, StopReason.TIME_BUDGET, steps, graph, sweeping, _since(budget, swept_at))
        return dataclasses.replace(outcome, unwritten=log.records(), fallback=confirmed)
    patience = None if sweeping is None else BACKTRACK_PATIENCE
    result = search(start, expand, cost_model, alpha=alpha, time_budget_s=backtracking.seconds, progress=progress,
                    patience=patience)
    best, searched = result.graph, result.applied
    found_at = swept_at if result.best_found_s is None else backtracking.start + result.best_found_s
    if sweeping is not None and searched and (
        result.improvement < MIN_SEARCH_GAIN or (swept and not confirmed_judgement(sweeping.judge, start, best, budget.deadline).faster)
    ):
        best, searched, found_at = start, Counter[str](), swept_at
    if swept and searched and confirmed is None:  # priced, then judged as one sweep: the swept graph stands behind it
        confirmed = _fallback(start, swept, graph, Speculation.BACKTRACKED)
    applied = swept + searched
    initial = None if result.initial_cost is None else result.initial_cost * speedup
    outcome = SearchOutcome(
        graph=best,
        applied=dict(sorted(applied.items())),
        stop_reason=StopReason.TIME_BUDGET if sweeps_timed_out else result.stop_reason,
        explored=result.explored + len(steps),
        predicted_original_ms=initial,
        predicted_best_ms=result.best_cost if searched or not swept else result.initial_cost,
        sweeps=steps,
        best_found_s=_since(budget, found_at),
        unwritten=log.records(),
        fallback=confirmed,
    )
    return _predicted_by_prior(outcome, graph, sweeping)


MIN_SEARCH_GAIN = 1.01
"""After sweeps, the backtracking search's result is kept only if priced at least this much
faster than the swept graph: the final decision needs a measured median 1.01x
(`_decide.MIN_SPEEDUP`), which a smaller predicted gain does not reach. Over two runs of
the 34-model corpus the backtracking search kept Relu-as-Clip, Add and Mul re-associations
in 13 calls; none was returned (each call ended "not predicted faster" or "not faster").
On YOLO11n its best was priced 40.856 against 40.860 ms, and judging it took about 5 s of
a 39 s call."""

BACKTRACK_PATIENCE = Patience(graphs=3, gain=MIN_SEARCH_GAIN)
"""After sweeps, the backtracking search stops once three graphs explored in a row brought
no `MIN_SEARCH_GAIN`. Every kept gain in those 68 calls came from a sweep; the search ran
to the deadline in 66 of them, pricing whole regions with the kernel cost model at 2-7 s a
graph on 50-70 ms models (YOLO11n: 8 graphs in 17 s), time the final decision then lacked
for its second look (`_decide.decide_contradicted`)."""


def _fallback(graph: Graph | None, applied: Counter[str], original: Graph, why: Speculation) -> Fallback | None:
    """A fallback on `graph`, unless there is none or it is the search's input."""
    if graph is None or not applied or graph.structural_hash == original.structural_hash:
        return None
    return Fallback(graph, dict(sorted(applied.items())), why)


def _since(budget: Budget, at: float | None) -> float | None:
    return None if at is None else budget.since_call_start(at)


def _outcome(graph: Graph, applied: Counter[str], reason: StopReason, steps: tuple[SweepStep, ...],
             original: Graph, sweeping: Sweeping | None, best_found_s: float | None) -> SearchOutcome:
    outcome = SearchOutcome(graph, dict(sorted(applied.items())), reason, explored=len(steps), sweeps=steps,
                            best_found_s=best_found_s)
    return _predicted_by_prior(outcome, original, sweeping)


def _predicted_by_prior(outcome: SearchOutcome, original: Graph, sweeping: Sweeping | None) -> SearchOutcome:
    """With a sweep screen, the predicted latencies are the screen's, which prices whole
    graphs (the original was priced already, and a kept sweep too: memoized)."""
    if sweeping is None or sweeping.screen is None or not outcome.applied:
        return outcome
    return dataclasses.replace(
        outcome,
        predicted_original_ms=sweeping.screen.cost(original),
        predicted_best_ms=sweeping.screen.cost(outcome.graph),
    )
