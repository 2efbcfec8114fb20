"""Rule sweeps judged on the whole model: the search's first phase.

    current <- input
    repeat:
        for each rule with matches in current (not judged before):
            sweep <- current with every non-overlapping match of the rule applied
        order the sweeps by a cheap prior (analytical cost change), improving ones first
        judge each sweep against current, end to end, until one is clearly faster
        (or all are judged): current <- the fastest of those measured faster
    until no sweep is faster, or the budget is spent

Why: on converter output the gains come from a rewrite applied everywhere at once (every
decomposed HardSwish re-formed, every per-channel Mul folded into its conv). One such
rewrite changes a network's latency by a percent or two, below what a single timing can
resolve, and a region priced alone misses what it does to ORT's layout choices around
it; all of them together move the whole model by 20-30%, which an end-to-end
measurement sees plainly. The judge compares whole models (`Judge`), so a sweep is kept
only when the graph ORT really runs got faster, neighbours and layout included.

With a `screen` (a measured cost model, such as the kernel cost model, priced just
before a sweep would be judged), a sweep is not judged at all when the screen prices it
exactly like the current graph (ORT runs the same kernels: it cannot be faster) or
predicts a speedup under `min_predicted`; it is priced again in later rounds, where
applied sweeps may have changed its effect.

A rule judged not faster is not judged again in a later round (its matches have hardly
changed; measuring them again would spend the budget on the same answer). The result is
deterministic for a deterministic judge; a measuring judge should cache its verdicts.
"""

from __future__ import annotations

import enum
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from taso.errors import InvalidModelError
from taso.ir import INTERNAL_DOMAIN, Graph, Node
from taso.report import SiteNode, StopReason, SweepSite
from taso.search.cost import CostModel
from taso.search.rewrite import Expand, Move, Rewrite, affected_nodes, dangling_values


@dataclass(frozen=True)
class Judgement:
    """A whole-model comparison: how much faster the candidate ran, and whether that counts."""

    speedup: float
    faster: bool
    complete: bool = True
    """False when the deadline cut the judgement short (it then says: not faster)."""
    cached: bool = False
    """True when the verdict was read from a cache rather than measured now."""


class Judge(Protocol):
    """Compares two whole graphs end to end (for ORT: run interleaved, see `taso.pipeline._decide`).

    `deadline` (a `time.perf_counter()` value) bounds the time the judgement may take."""

    def __call__(self, current: Graph, candidate: Graph, deadline: float) -> Judgement: ...


class Skipped(enum.Enum):
    """Why a sweep was not judged."""

    SAME_KERNELS = "priced exactly like the current graph (the same kernels)"
    PREDICTED_NOT_FASTER = "predicted no faster"


@dataclass(frozen=True)
class SweepStep:
    """One sweep: the rule, how many matches it applied, the prior and the verdict
    (`speedup` is the measured one, or the predicted one for a sweep not judged)."""

    rule_id: str
    rewrites: int
    predicted_delta: float
    speedup: float
    accepted: bool
    complete: bool = True
    """False for a sweep the deadline cut short while it was ahead, kept for the final
    measured decision (which times it against the original in two full rounds) to settle."""
    predicted_speedup: float = 1.0
    skipped: Skipped | None = None
    cached: bool = False
    """The judge's verdict came from its cache (every judgement of it, when confirmed)."""
    site: SweepSite | None = None
    """One of the sweep's matches: the nodes it replaced and those it wrote (for pictures)."""


@dataclass(frozen=True)
class SweepResult:
    graph: Graph
    applied: Counter[str]
    steps: tuple[SweepStep, ...]
    stop_reason: StopReason
    elapsed_s: float
    judge_s: float
    """The longest a judgement took (0 if none did): what another one would need."""
    best_found_s: float | None = None
    """Seconds from the start of the sweeps until the last sweep kept was accepted (None: none was)."""


@dataclass(frozen=True)
class _Sweep:
    rule_id: str
    graph: Graph
    rewrites: int
    predicted_delta: float
    size_ratio: float  # the prior's cost of the sweep over the current graph's, at least 1
    site: SweepSite | None = None


RuleExpand = Callable[[str], Expand]
"""An `Expand` that lists one rule's rewrites only, by rule id."""


def sweep(
    graph: Graph, expand: Expand, judge: Judge, *, prior: CostModel, time_budget_s: float,
    expand_rule: RuleExpand | None = None, on_step: Callable[[SweepStep], None] | None = None,
    screen: CostModel | None = None, min_predicted: float = 0.0,
) -> SweepResult:
    """Apply, rule by rule, every match of the rules whose sweep the judge finds faster.

    `expand` lists every rewrite of a graph; `expand_rule`, if given, one rule's (used to
    find matches again next to applied ones; without it they wait for the next round).
    """
    started = time.perf_counter()
    deadline = started + time_budget_s
    current, applied, steps, judged = graph, Counter[str](), [], set[str]()
    reason, judge_s, found_s = StopReason.EXHAUSTED, 0.0, None
    screen_s = 0.0  # the longest screen so far, per unit of `_size_ratio`
    while True:
        if time.perf_counter() >= deadline:
            reason = StopReason.TIME_BUDGET
            break
        accepted, best, round_start = None, 0.0, len(steps)
        base = None if screen is None else screen.cost(current)
        for candidate in _ordered(current, expand, expand_rule, prior, skip=judged, deadline=deadline):
            asked = time.perf_counter()
            if asked >= deadline:
                break
            predicted, skip = 1.0, None
            if screen is not None and base is not None:
                if asked + screen_s * candidate.size_ratio > deadline:  # its screen would outlast the budget
                    deadline = asked
                    break
                cost = screen.cost(candidate.graph)
                screen_s = max(screen_s, (time.perf_counter() - asked) / candidate.size_ratio)
                predicted, skip = _screened(cost, base, min_predicted)
            if skip is not None:
                steps.append(SweepStep(candidate.rule_id, candidate.rewrites, candidate.predicted_delta, predicted,
                                       False, predicted_speedup=predicted, skipped=skip, site=candidate.site))
                if on_step is not None:
                    on_step(steps[-1])
                continue
            verdict = judge(current, candidate.graph, deadline)
            if verdict.faster and (candidate.predicted_delta > 0 or predicted < 1.0):
                verdict = _confirmed(judge, current, candidate.graph, verdict, deadline)
            if not verdict.complete:  # no time left to judge it
                if verdict.faster and accepted is None and candidate.predicted_delta < 0:
                    accepted = candidate  # ahead when time ran out: the final decision settles it
                    steps.append(SweepStep(candidate.rule_id, candidate.rewrites, candidate.predicted_delta,
                                           verdict.speedup, True, complete=False, predicted_speedup=predicted,
                                           site=candidate.site))
                    if on_step is not None:
                        on_step(steps[-1])
                deadline = asked
                break
            judged.add(candidate.rule_id)
            judge_s = max(judge_s, time.perf_counter() - asked)
            steps.append(SweepStep(candidate.rule_id, candidate.rewrites, candidate.predicted_delta, verdict.speedup,
                                   verdict.faster, predicted_speedup=predicted, cached=verdict.cached,
                                   site=candidate.site))
            if on_step is not None:
                on_step(steps[-1])
            if verdict.faster and verdict.speedup > best:
                if accepted is not None:
                    judged.discard(accepted.rule_id)  # outdone this round; may be tried again
                accepted, best = candidate, verdict.speedup
                if best >= SETTLED_SPEEDUP:
                    break
            elif verdict.faster:
                judged.discard(candidate.rule_id)
        steps = _outdone_not_kept(steps, round_start, accepted)
        if accepted is None:
            if time.perf_counter() >= deadline:
                reason = StopReason.TIME_BUDGET
            break
        current, found_s = accepted.graph, time.perf_counter() - started
        applied[accepted.rule_id] += accepted.rewrites
    return SweepResult(current, applied, tuple(steps), reason, time.perf_counter() - started, judge_s, found_s)


def _outdone_not_kept(steps: list[SweepStep], since: int, kept: _Sweep | None) -> list[SweepStep]:
    """A round's steps with `accepted` true only for the sweep that was applied."""
    chosen = None if kept is None else kept.rule_id
    return steps[:since] + [
        step if step.rule_id == chosen or not step.accepted else replace(step, accepted=False)
        for step in steps[since:]
    ]


def _confirmed(judge: Judge, current: Graph, candidate: Graph, verdict: Judgement, deadline: float) -> Judgement:
    """A sweep the prior predicts slower but the judge finds faster is judged once more,
    the other way round (fresh pairs, the candidate as the current graph), and kept only
    if that shows it faster too. The judge's repeated looks let a few percent of equal
    pairs through; on NasRNN one such sweep added ten redundant Relus (`Relu(x) ->
    Relu(Relu(x))`, "1.066x"). Real gains the prior misses pass both ways."""
    again = judge(candidate, current, deadline)
    if not again.complete:
        return Judgement(verdict.speedup, False, complete=False)
    combined = math.sqrt(verdict.speedup / again.speedup) if again.speedup > 0 else verdict.speedup
    return Judgement(combined, 0.0 < again.speedup < 1.0, cached=verdict.cached and again.cached)


def _size_ratio(prior_base: float, predicted_delta: float) -> float:
    """How many times the current graph's work the prior predicts a candidate to be (at
    least 1): a screen compiles and profiles the candidate, which takes about that much
    longer. On ResNet-50, TASO's 1x1-enlarging sweep (9x the weights, 4x the latency) took
    5.5 s to screen where the others took 0.5 s, and ran the call 40% past its budget."""
    if prior_base <= 0:
        return 1.0
    return max(1.0, (prior_base + predicted_delta) / prior_base)


SAME_COST = 1e-9
"""Relative cost difference below which two graphs are priced the same (the kernel model
sums the same cached kernel times, up to the order of the additions)."""


def _screened(cost: float, base: float, min_predicted: float) -> tuple[float, Skipped | None]:
    """The screen's predicted speedup, and why the sweep is not judged (None: judge it)."""
    predicted = base / cost if cost > 0 else 1.0
    if abs(cost - base) <= SAME_COST * abs(base):
        return predicted, Skipped.SAME_KERNELS
    if predicted < min_predicted:
        return predicted, Skipped.PREDICTED_NOT_FASTER
    return predicted, None


def _ordered(
    graph: Graph, expand: Expand, expand_rule: RuleExpand | None, prior: CostModel, *, skip: set[str],
    deadline: float = math.inf,
) -> list[_Sweep]:
    """Every not-yet-judged rule's sweep of `graph`, most promising (by the prior) first
    (the rules still unpriced when `deadline` comes, most matches first, are left out)."""
    by_rule: dict[str, list[Rewrite]] = {}
    for rewrite in expand(graph, None):
        if rewrite.rule_id not in skip:
            by_rule.setdefault(rewrite.rule_id, []).append(rewrite)
    base = prior.cost(graph)
    sweeps = []
    for rule_id, found in sorted(by_rule.items(), key=lambda item: (-len(item[1]), item[0])):
        if time.perf_counter() >= deadline:
            break
        swept, count = apply_all(graph, found, expand_rule(rule_id) if expand_rule else None)
        if count:
            delta = prior.cost(swept) - base
            sweeps.append(_Sweep(rule_id, swept, count, delta, _size_ratio(base, delta), site_of(graph, found[0])))
    return sorted(sweeps, key=lambda s: (s.predicted_delta > 0, s.predicted_delta, s.rule_id))


def site_of(graph: Graph, rewrite: Rewrite) -> SweepSite:
    """The nodes `rewrite` removed from `graph` and those it added, by node id."""
    return SweepSite(
        before=tuple(_site_node(graph.nodes[i]) for i in sorted(rewrite.removed)),
        after=tuple(_site_node(rewrite.graph.nodes[i]) for i in sorted(rewrite.added)),
    )


def _site_node(node: Node) -> SiteNode:
    return SiteNode(node.op_type, node.inputs, node.outputs, folded=node.domain == INTERNAL_DOMAIN)


SETTLED_SPEEDUP = 1.05
"""A sweep measured at least this much faster is kept at once; a smaller win is kept only
after the round's other sweeps were judged, if none measured faster still. Sweeps can
exclude each other: on NasRNN, re-forming Gemm from MatMul+Add (1.03x, within what the
final decision can resolve) removes the matches of merging `x1 @ y1 + x2 @ y2` into one
MatMul (1.27x), and taking the first win kept the small one."""


MAX_ROUNDS = 8
"""Rounds of `apply_all` per sweep: matches next to an applied one are re-found and
applied in the next round (a chain of adjacent matches takes one round per link)."""


def apply_all(graph: Graph, found: list[Rewrite], refind: Expand | None = None) -> tuple[Graph, int]:
    """`graph` with as many of `found` (rewrites of `graph`, of one rule) applied as fit.

    A match that overlaps an applied one, or reaches into its neighbourhood (where the
    match's own conditions, such as a value's consumer count, may have changed), is
    skipped; with `refind` (an `Expand` for this rule alone), the rule's matches around
    the applied ones are then found again on the new graph and applied in a further round.
    """
    current, count = graph, 0
    for _ in range(MAX_ROUNDS):
        current, applied, touched, skipped = _apply_disjoint(current, found)
        count += applied
        if not (skipped and applied and refind is not None):
            break
        found = list(refind(current, frozenset(i for i in touched if i in current.nodes)))
    return current, count


def _apply_disjoint(graph: Graph, found: list[Rewrite]) -> tuple[Graph, int, set[int], bool]:
    """Apply the rewrites that do not touch each other (each re-applied with
    `Move.rebase` to the graph the earlier ones produced). Returns the graph, how many
    applied, the nodes touched, and whether any were skipped for touching an applied one.

    A rebased rewrite could close a cycle through the changed region; the result is
    checked once, and only if it is cyclic is the work redone checking every step."""
    result = _rebase_all(graph, found, check_each=False)
    try:
        result[0].structural_hash  # noqa: B018 - a cyclic graph has no topological order
    except InvalidModelError:
        result = _rebase_all(graph, found, check_each=True)
    return result


def _rebase_all(graph: Graph, found: list[Rewrite], *, check_each: bool) -> tuple[Graph, int, set[int], bool]:
    current, touched, count, skipped = graph, set[int](), 0, False
    for rewrite in found:
        if not rewrite.removed.isdisjoint(touched):
            skipped = True
            continue
        moved = rewrite if count == 0 else Move.of(graph, rewrite).rebase(current)
        if moved is None or dangling_values(current, moved) or (check_each and _cyclic(moved.graph)):
            continue
        touched |= rewrite.removed | affected_nodes(current, moved.graph, moved)
        current, count = moved.graph, count + 1
    return current, count, touched, skipped


def _cyclic(graph: Graph) -> bool:
    try:
        graph.structural_hash  # noqa: B018
    except InvalidModelError:
        return True
    return False
