"""Rule sweeps judged on the whole model: the search's first phase.

    current <- input
    repeat:
        for each rule with matches in current (not judged before):
            sweep <- current with every non-overlapping match of the rule applied
        order the sweeps by a cheap prior (analytical cost change), improving ones first
        judge each sweep against current, end to end, until one is clearly faster
        (or all are judged): current <- the fastest of those measured faster
        if none was, or only a small win: the same with joint sweeps, two rules whose
        matches meet swept together, where the screen predicts the pair more than both
        alone (`_joint`), each such pair followed by the pair with a third rule whose
        matches meet it (`_joint.extended`); the fastest of those replaces a smaller
        win; then the same with the sweeps the prior predicts much more work (`DEAR_WORK`;
        from `HOPELESS_WORK` on, neither screened nor judged)
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
predicts a speedup under `min_predicted`; it is priced again in a later round where
the sweep kept meets its matches (`_joint.meeting`) and may have changed its effect,
and carried over unpriced where it does not (a screen compiles the whole model: 0.4 s on
a 10 ms one, and twenty such of a round left a tf2onnx MobileNetV3-Large export's
30 s budget no time for the pair its squeeze-and-excitation blocks need).

A rule judged not faster is not judged again in a later round (its matches have hardly
changed; measuring them again would spend the budget on the same answer), except once
when the screen confidently predicted it faster and it measured faster, short of what
the judge confirms (`taso.search._judging.is_undecided`): after the next sweep kept, it is
judged again. The result is deterministic for a deterministic judge; a measuring judge should cache its verdicts.
"""

from __future__ import annotations

import enum
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from taso.ir import Graph
from taso.report import StopReason, SweepSite
from taso.search._candidates import Candidate, RuleExpand, apply_all, ordered, site_of
from taso.search._joint import (
    MAX_JOINT_TRIPLES,
    extended,
    interacts,
    joint_candidates,
    meeting,
    reach,
)
from taso.search._judging import (
    Judge,
    Judgement,
    confirmed,
    confirmed_judgement,
    contradicted,
    is_undecided,
    looked_again,
)
from taso.search.cost import CostModel
from taso.search.rewrite import Expand

__all__ = [
    "Judge", "Judgement", "RuleExpand", "Skipped", "SweepResult", "SweepStep", "apply_all", "confirmed_judgement",
    "site_of", "sweep",
]


HOPELESS_WORK = 3.0
"""A sweep the prior predicts at this many times the model's work or more is neither screened
nor judged (`Skipped.MUCH_MORE_WORK`; its recorded prediction is the prior's, 1 / that
ratio): a generated 1x1-to-3x3 conv enlarging on a Paddle MobileNetV3-large export, 3.97x
by the prior, was screened at 0.21x every round, 5 s of a 30 s budget each time.
"""


class Skipped(enum.Enum):
    """Why a sweep was not judged."""

    SAME_KERNELS = "priced exactly like the current graph (the same kernels)"
    PREDICTED_NOT_FASTER = "predicted no faster"
    MUCH_MORE_WORK = f"the prior predicts {HOPELESS_WORK:g}x the model's work or more"


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
    joint: tuple[tuple[str, int], ...] = ()
    """A joint sweep's further rules, swept on top of `rule_id`'s, with their match counts."""
    tie_break: bool = False
    """Two looks disagreed and a third look decided the verdict (`Judgement.tie_break`)."""


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
    confirmed: Graph | None = None
    """When the last sweep kept was cut short (ahead when time ran out, `SweepStep.complete`
    false): the graph before it, every sweep of which was judged whole; None otherwise."""
    confirmed_applied: Counter[str] = field(default_factory=Counter)
    """The rules applied up to `confirmed`."""


def sweep(
    graph: Graph, expand: Expand, judge: Judge, *, prior: CostModel, time_budget_s: float,
    expand_rule: RuleExpand | None = None, on_step: Callable[[SweepStep], None] | None = None,
    screen: CostModel | None = None, min_predicted: float = 0.0,
) -> SweepResult:
    """Apply, rule by rule, every match of the rules whose sweep the judge finds faster.

    `expand` lists every rewrite of a graph; `expand_rule`, if given, one rule's (used to
    find matches again next to applied ones; without it they wait for the next round).
    With both `screen` and `expand_rule`, a round that keeps nothing, or only a small win
    (under `SETTLED_SPEEDUP`), is followed by joint sweeps of two rules
    (`taso.search._joint`); a pair measured faster than that small win replaces it.
    """
    started = time.perf_counter()
    run = _Run(judge, screen, min_predicted, on_step, deadline=started + time_budget_s)
    current, applied, judged, tried = graph, Counter[str](), set[str](), set[frozenset[str]]()
    reason, found_s, confirmed, confirmed_applied = StopReason.EXHAUSTED, None, None, Counter[str]()
    while True:
        if time.perf_counter() >= run.deadline:
            reason = StopReason.TIME_BUDGET
            break
        run.new_round(current)
        every = ordered(current, expand, expand_rule, prior, skip=set(), deadline=run.deadline, clock=time.perf_counter)
        round_start = len(run.steps)
        cheap = [c for c in every if c.size_ratio < DEAR_WORK]
        dear = [c for c in every if DEAR_WORK <= c.size_ratio < HOPELESS_WORK]
        for hopeless in (c for c in every if c.size_ratio >= HOPELESS_WORK and c.rule_id not in judged):
            run.ruled_out(hopeless, judged)
        accepted, best = run.judged_round(current, ((c, None) for c in cheap if c.rule_id not in judged), judged)
        if best < SETTLED_SPEEDUP and screen is not None and expand_rule is not None and time.perf_counter() < run.deadline:
            pair, pair_best = run.judged_round(current, run.joint(current, cheap, expand_rule, tried), judged)
            accepted, best = _outdone(run, judged, round_start, (accepted, best), (pair, pair_best))
        if best < SETTLED_SPEEDUP and dear and time.perf_counter() < run.deadline:
            found = run.judged_round(current, ((c, None) for c in dear if c.rule_id not in judged), judged)
            accepted, best = _outdone(run, judged, round_start, (accepted, best), found)
        if accepted is None:
            if time.perf_counter() >= run.deadline:
                reason = StopReason.TIME_BUDGET
            break
        judged -= run.reopened()  # undecided rules: judged once more, against the graph just kept
        run.carry_over(current, accepted)
        if _cut_short(run.steps):
            confirmed, confirmed_applied = current, Counter(applied)
        current, found_s = accepted.graph, time.perf_counter() - started
        for rule_id, count in accepted.counts:
            applied[rule_id] += count
    return SweepResult(current, applied, tuple(run.steps), reason, time.perf_counter() - started, run.judge_s, found_s,
                       confirmed, confirmed_applied)


def _outdone(run: _Run, judged: set[str], round_start: int, kept: tuple[Candidate | None, float],
             later: tuple[Candidate | None, float]) -> tuple[Candidate | None, float]:
    """The round's win: `later` (a pair's or a dear sweep's) where it outdoes the `kept` one."""
    if later[0] is None or later[1] <= kept[1]:
        return kept
    if kept[0] is not None:
        judged.discard(kept[0].rule_id)
    run.steps = _outdone_not_kept(run.steps, round_start, later[0])
    return later


def _cut_short(steps: list[SweepStep]) -> bool:
    """Whether the sweep kept last was kept unconfirmed (ahead when the deadline cut it short)."""
    kept = [step for step in steps if step.accepted]
    return bool(kept) and not kept[-1].complete


Screened = tuple[Candidate, float | None]
"""A candidate and its screened prediction (None: not screened yet)."""


@dataclass(frozen=True)
class _JointPrice:
    """A joint sweep's screened speedup, and whether it is worth judging (`interacts`)."""

    predicted: float
    worth: bool


@dataclass(frozen=True)
class _Carried:
    """A single sweep the screen ruled out, carried to the next round: its matches (node
    ids) and the screen's verdict."""

    removed: frozenset[int]
    predicted: float
    skip: Skipped


@dataclass
class _Run:
    """The state of one call of `sweep`: its steps, deadline and longest judgement/screen."""

    judge: Judge
    screen: CostModel | None
    min_predicted: float
    on_step: Callable[[SweepStep], None] | None
    deadline: float
    steps: list[SweepStep] = field(default_factory=list)
    judge_s: float = 0.0
    screen_s: float = 0.0  # the longest screen so far, per unit of `size_ratio`
    base: float | None = None  # the screen's price of the current graph
    predicted: dict[str, float] = field(default_factory=dict)  # this round's single predictions, by rule
    same_kernels: set[str] = field(default_factory=set)  # this round's singles priced like the current graph
    undecided: set[str] = field(default_factory=set)  # judged not faster, against a confident prediction
    reopened_once: set[str] = field(default_factory=set)  # undecided rules already judged once more
    skips: dict[str, tuple[Candidate, float, Skipped]] = field(default_factory=dict)  # this round's, by rule
    carried: dict[str, _Carried] = field(default_factory=dict)  # last round's skips the kept sweep did not meet

    def new_round(self, current: Graph) -> None:
        self.base = None if self.screen is None else self.screen.cost(current)
        self.predicted, self.same_kernels, self.skips = {}, set(), {}

    def carry_over(self, current: Graph, kept: Candidate) -> None:
        """This round's single sweeps ruled out by the screen whose matches `kept` (a sweep
        of `current`) does not meet: ruled out again, unpriced, while their matches stay
        the same (`_carried`)."""
        near = reach(current, kept)
        kept_rules = {kept.rule_id, *(rule_id for rule_id, _ in kept.joint)}
        self.carried = {}
        for rule_id, (candidate, predicted, skip) in self.skips.items():
            theirs = reach(current, candidate)
            if rule_id not in kept_rules and not meeting(near, theirs) and not meeting(theirs, near):
                self.carried[rule_id] = _Carried(candidate.removed, predicted, skip)

    def _carried(self, candidate: Candidate) -> tuple[float, Skipped] | None:
        """The screen's last verdict on `candidate`'s rule, if carried over and its matches
        are the same nodes (kept sweeps leave the other nodes' ids as they were)."""
        carried = self.carried.get(candidate.rule_id)
        if carried is None or carried.removed != candidate.removed:
            return None
        self.predicted[candidate.rule_id] = carried.predicted
        if carried.skip is Skipped.SAME_KERNELS:
            self.same_kernels.add(candidate.rule_id)
        return carried.predicted, carried.skip

    def judged_round(self, current: Graph, candidates: Iterable[Screened],
                     judged: set[str]) -> tuple[Candidate | None, float]:
        """Judge `candidates` in order; the fastest one measured faster (the first one
        `SETTLED_SPEEDUP` faster), or None, and its measured speedup (0 if none). Rules
        judged not faster join `judged`."""
        accepted, best, round_start = None, 0.0, len(self.steps)
        for candidate, screened in candidates:
            asked = time.perf_counter()
            if asked >= self.deadline:
                break
            predicted, skip = (1.0, None) if screened is None else (screened, None)
            if screened is None and self.screen is not None and self.base is not None:
                priced = self._carried(candidate) or self._priced(candidate, asked)
                if priced is None:  # its screen would outlast the budget
                    break
                predicted, skip = priced
            if skip is not None:  # only singles are screened here: pairs come priced and kept (`joint`)
                self.skips[candidate.rule_id] = (candidate, predicted, skip)
                self._record(candidate, predicted, predicted, False, skipped=skip)
                continue
            verdict = self.judge(current, candidate.graph, self.deadline)
            if contradicted(verdict, predicted):
                verdict = looked_again(self.judge, current, candidate.graph, verdict, self.deadline)
            doubted = candidate.predicted_delta > 0 or predicted < 1.0
            if verdict.faster and (verdict.complete or doubted):  # ahead when cut short: the decision settles it
                verdict = confirmed(self.judge, current, candidate.graph, verdict, self.deadline)
            if not verdict.complete:  # no time left to judge it
                if verdict.faster and accepted is None and candidate.predicted_delta < 0:
                    accepted = candidate  # ahead when time ran out: the final decision settles it
                    self._record(candidate, verdict.speedup, predicted, True, complete=False)
                self.deadline = asked
                break
            if not candidate.joint:
                judged.add(candidate.rule_id)
                if is_undecided(verdict, predicted) and candidate.rule_id not in self.reopened_once:
                    self.undecided.add(candidate.rule_id)
            self.judge_s = max(self.judge_s, time.perf_counter() - asked)
            self._record(candidate, verdict.speedup, predicted, verdict.faster, cached=verdict.cached,
                         tie_break=verdict.tie_break)
            if verdict.faster and verdict.speedup > best:
                if accepted is not None:
                    judged.discard(accepted.rule_id)  # outdone this round; may be tried again
                accepted, best = candidate, verdict.speedup
                if best >= SETTLED_SPEEDUP:
                    break
            elif verdict.faster:
                judged.discard(candidate.rule_id)
        self.steps = _outdone_not_kept(self.steps, round_start, accepted)
        return accepted, best

    def ruled_out(self, candidate: Candidate, judged: set[str]) -> None:
        """`candidate` (`HOPELESS_WORK` or more) recorded as not judged, and its rule not
        looked at again: neither screened nor judged."""
        judged.add(candidate.rule_id)
        self._record(candidate, 1 / candidate.size_ratio, 1 / candidate.size_ratio, False,
                     skipped=Skipped.MUCH_MORE_WORK)

    def reopened(self) -> set[str]:
        """The undecided rules, to be judged once more now that another sweep was kept
        (each at most once: `taso.search._judging.is_undecided`)."""
        reopened, self.undecided = self.undecided, set()
        self.reopened_once |= reopened
        return reopened

    def joint(self, current: Graph, singles: list[Candidate], expand_rule: RuleExpand,
              tried: set[frozenset[str]]) -> Iterator[Screened]:
        """The joint sweeps of `singles` (this round's, judged or not) worth judging, each
        with its screened prediction."""
        by_rule = {single.rule_id: single for single in singles}
        promise = {rule_id: None if rule_id in self.same_kernels else predicted
                   for rule_id, predicted in self.predicted.items()}
        extensions = MAX_JOINT_TRIPLES
        for pair in joint_candidates(current, singles, expand_rule, tried=tried, promise=promise):
            priced = self._interacting(pair, None, by_rule)
            if priced is None:  # a screen would outlast the budget
                return
            if not priced.worth:
                continue
            yield pair, priced.predicted
            for triple in extended(current, pair, singles, expand_rule, tried=tried) if extensions else ():
                extensions -= 1
                found = self._interacting(triple, priced.predicted, by_rule)
                if found is None:
                    return
                if found.worth:
                    yield triple, found.predicted
                if not extensions:
                    break

    def _interacting(self, joint: Candidate, rest: float | None,
                     by_rule: dict[str, Candidate]) -> _JointPrice | None:
        """`joint`'s screened prediction, and whether its last rule interacts with the
        rest (`interacts`): the rest predicted `rest` (None: a pair, its first rule's single
        sweep's prediction), the last rule its single's. None if a screen would outlast the budget."""
        first, last = joint.counts[0][0], joint.counts[-1][0]
        alone = [self._single(by_rule[first]) if rest is None else rest, self._single(by_rule[last])]
        priced = None if None in alone else self._priced(joint, time.perf_counter())
        if priced is None:
            return None
        predicted, skip = priced
        worth = skip is None and interacts(predicted, (alone[0] or 1.0, alone[1] or 1.0), self.min_predicted)
        return _JointPrice(predicted, worth)

    def _single(self, candidate: Candidate) -> float | None:
        if candidate.rule_id not in self.predicted:
            priced = self._priced(candidate, time.perf_counter())
            if priced is None:
                return None
        return self.predicted[candidate.rule_id]

    def _priced(self, candidate: Candidate, asked: float) -> tuple[float, Skipped | None] | None:
        """The screen's prediction for `candidate` (None: its screen would outlast the budget)."""
        assert self.screen is not None and self.base is not None
        if asked + self.screen_s * candidate.size_ratio > self.deadline:
            self.deadline = asked
            return None
        cost = self.screen.cost(candidate.graph)
        self.screen_s = max(self.screen_s, (time.perf_counter() - asked) / candidate.size_ratio)
        predicted, skip = _screened(cost, self.base, self.min_predicted)
        if not candidate.joint:
            self.predicted[candidate.rule_id] = predicted
            if skip is Skipped.SAME_KERNELS:
                self.same_kernels.add(candidate.rule_id)
        return predicted, skip

    def _record(self, candidate: Candidate, speedup: float, predicted: float, accepted: bool, *,
                complete: bool = True, cached: bool = False, skipped: Skipped | None = None,
                tie_break: bool = False) -> None:
        self.steps.append(SweepStep(candidate.rule_id, candidate.rewrites, candidate.predicted_delta, speedup,
                                    accepted, complete=complete, predicted_speedup=predicted, skipped=skipped,
                                    cached=cached, site=candidate.site, joint=candidate.joint, tie_break=tie_break))
        if self.on_step is not None:
            self.on_step(self.steps[-1])


def _outdone_not_kept(steps: list[SweepStep], since: int, kept: Candidate | None) -> list[SweepStep]:
    """A round's steps with `accepted` true only for the sweep that was applied."""
    chosen = None if kept is None else (kept.rule_id, kept.joint)
    return steps[:since] + [
        step if (step.rule_id, step.joint) == chosen or not step.accepted else replace(step, accepted=False)
        for step in steps[since:]
    ]


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


DEAR_WORK = 2.0
"""A sweep the prior predicts at this many times the model's work or more is judged last in
its round, after the joint sweeps: its screen compiles and profiles that much more (TASO's
1x1-to-3x3 conv enlarging, 3.4-4x on MobileNetV3, took 3.7 s of a 30 s budget to screen),
and a sweep so much more work is rarely faster.
"""

SETTLED_SPEEDUP = 1.05
"""A sweep measured at least this much faster is kept at once; a smaller win is kept only
after the round's other sweeps were judged, if none measured faster still. Sweeps can
exclude each other: on NasRNN, re-forming Gemm from MatMul+Add (1.03x, within what the
final decision can resolve) removes the matches of merging `x1 @ y1 + x2 @ y2` into one
MatMul (1.27x), and taking the first win kept the small one."""


