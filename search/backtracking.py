"""TASO's cost-based backtracking search over graph rewrites (Jia et al., SOSP'19, Alg. 2).

    queue <- {input}; best <- input
    while queue and budgets last:
        G <- cheapest graph in queue            (ties: first discovered first)
        skip G if cost(G) >= alpha * best cost  (queued before a better best was found)
        for each rewrite G -> G':
            skip G' if structurally broken (a value read but not defined), seen
                    before (structural hash, confirmed exactly) or cyclic
            c' <- cost_after(G, cost(G), rewrite)
            if c' < best cost: best <- G'
            if c' < alpha * best cost: queue G'

`alpha > 1` lets the search accept rewrites that make the graph slightly worse, to get
out of local minima. A graph queued before a better best was found, and no longer within
`alpha` of it, is left unexpanded (a partly expanded graph is still finished: its unpriced
rewrites were never judged); when only such graphs remain the search stops `CONVERGED`
instead of expanding them until a budget runs out (`EXHAUSTED`: the queue ran empty).
The result records when the best graph was found (`best_found_s`).

With a `Patience`, the search also stops (`STALLED`) once that many graphs were explored
since the best last improved by the patience's `gain`: a caller whose result must then be
measured faster by some margin gains nothing from a search that keeps finding less.

Budgets: wall-clock seconds (checked before every candidate, so it is overshot by at
most one `expand` step or one `cost_after` call) and explored graphs (graphs taken from
the queue and expanded). The result says why the search stopped and which rules were
applied, counted along the path from the input to the best graph. Expansion is
incremental by default (see `taso.search.rewrite`).

A candidate that breaks the structural invariant (`rewrite.dangling_values`: a node input
or graph output left without a producer, a value with two producers) is a bug in the
rewrite that made it; the search drops it and counts it in `SearchStats.invalid`, so it
can never be returned. With the environment variable `TASO_STRICT_INVARIANTS=1` (tests,
fuzzing, debugging) it raises `InvalidRewriteError` instead, naming the rule and the path.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from taso.errors import InvalidModelError, UsageError
from taso.ir import Graph
from taso.report import StopReason
from taso.search._frontier import Entry, Frontier, SeenGraphs, lighten
from taso.search.cost import CostModel
from taso.search.rewrite import Expand, Expansion, Move, Rewrite, affected_nodes, dangling_values

DEFAULT_MAX_GRAPHS = 10_000
DEFAULT_MAX_QUEUE = 2_000
DEFAULT_STEP = 32
"""Rewrites priced per visit of a graph before the queue decides what to explore next."""
STRICT_ENV = "TASO_STRICT_INVARIANTS"


class InvalidRewriteError(AssertionError):
    """Strict mode only: a rewrite produced a structurally broken graph."""


def strict_invariants() -> bool:
    """Whether a broken candidate raises (`TASO_STRICT_INVARIANTS=1`) instead of being dropped."""
    return os.environ.get(STRICT_ENV, "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class SearchProgress:
    """A snapshot passed to the progress callback after every explored graph."""

    explored: int
    best_cost: float
    initial_cost: float
    queued: int
    elapsed_s: float


@dataclass(frozen=True)
class SearchStats:
    """Counts of what happened to candidates."""

    candidates: int = 0
    duplicates: int = 0
    cyclic: int = 0
    pruned: int = 0
    queue_dropped: int = 0
    hash_collisions: int = 0
    invalid: int = 0
    """Candidates dropped because they broke the structural invariant (a rewrite bug)."""
    left_behind: int = 0
    """Queued graphs left unexpanded: no longer within alpha of the best when their turn came."""


@dataclass(frozen=True)
class SearchResult:
    """The best graph found and how it was found."""

    graph: Graph
    initial_cost: float | None
    best_cost: float | None
    stop_reason: StopReason
    explored: int
    applied: Counter[str]
    path: tuple[str, ...]
    elapsed_s: float
    stats: SearchStats
    best_found_s: float | None = None
    """Seconds from the start of the search until the best graph was found (None: the input)."""

    @property
    def improvement(self) -> float:
        """initial / best cost (1.0 when nothing was found or nothing was priced)."""
        if not self.initial_cost or not self.best_cost:
            return 1.0
        return self.initial_cost / self.best_cost


Progress = Callable[[SearchProgress], None]


class _TimeUp(Exception):
    pass


@dataclass(frozen=True)
class Patience:
    """Stop once `graphs` graphs were explored without the best improving `gain`-fold
    (cost divided by at least `gain`) since the last time it did (or since the input)."""

    graphs: int
    gain: float = 1.0


@dataclass
class _Run:
    """Mutable state of one search run."""

    expand: Expand
    cost_model: CostModel
    alpha: float
    expansion: Expansion
    deadline: float
    started: float
    frontier: Frontier
    seen: SeenGraphs
    best: Entry
    initial: Entry
    explored: int = 0
    candidates: int = 0
    duplicates: int = 0
    cyclic: int = 0
    pruned: int = 0
    invalid: int = 0
    left_behind: int = 0
    best_at: float | None = None
    strict: bool = False
    step: int = DEFAULT_STEP
    patience: Patience | None = None
    mark: float = math.inf  # the best cost when it last improved by the patience's gain
    since_mark: int = 0  # graphs explored since then

    def stalled(self) -> bool:
        return self.patience is not None and self.since_mark >= self.patience.graphs

    def check_time(self) -> None:
        if time.perf_counter() >= self.deadline:
            raise _TimeUp

    def hopeless(self, entry: Entry) -> bool:
        """A queued graph not yet expanded that is no longer within alpha of the best."""
        return not entry.pending and entry is not self.best and entry.cost >= self.alpha * self.best.cost

    def _found(self, entry: Entry) -> None:
        self.best, self.best_at = entry, time.perf_counter()
        if self.patience is not None and entry.cost * self.patience.gain <= self.mark:
            self.mark, self.since_mark = entry.cost, 0

    def explore(self, entry: Entry) -> bool:
        """Price up to `step` of the entry's rewrites; re-queue it if more remain.

        Partial expansion lets the search go deeper on a rewrite that paid off before
        it has priced every other rewrite of the parent: with measured costs a large
        graph has hundreds of rewrites at a fraction of a second each. The parent keeps
        its place in the queue (by its cost) and resumes where it stopped. Later children
        see the parent's moves priced so far; a combination with a move priced later is
        reached from that move's own child, which sees the earlier moves."""
        first_visit = not entry.pending
        if first_visit:
            entry.pending.append(self._rewrites(entry))
        rewrites = entry.pending[0]
        for _ in range(self.step):
            self.check_time()
            try:
                move, rewrite = next(rewrites)
            except StopIteration:
                entry.pending.clear()
                self._combine(entry)
                return first_visit
            entry.moves.append(move)
            cost = self._consider(entry, rewrite)
            entry.deltas.append(math.inf if cost is None else cost - entry.cost)
        self._combine(entry)
        self.frontier.push(entry)
        return first_visit

    def _combine(self, entry: Entry) -> None:
        """One candidate applying all of the entry's improving moves that do not interact.

        Moves whose neighbourhoods are disjoint change disjoint regions, so under the
        region cost model their savings add up: the combined graph costs the entry's cost
        plus the sum of their deltas. Without this a network with twenty independent
        improvements needs twenty levels of search; with it, one step. (The result is
        still checked and measured end to end like any other.)"""
        improving = sorted((d, i) for i, d in enumerate(entry.deltas) if d < 0)
        chosen = {i for _, i in improving}
        if len(chosen) < 2 or chosen == entry.combined:
            return
        entry.combined.clear()
        entry.combined.update(chosen)
        graph, cost, last, touched, applied = entry.graph, entry.cost, entry, set(), 0
        for delta, index in improving:
            move = entry.moves[index]
            rewrite = move.rebase(graph) if move.removed.isdisjoint(touched) else None
            if rewrite is None or dangling_values(graph, rewrite):
                continue
            touched |= move.removed | affected_nodes(graph, rewrite.graph, rewrite)
            graph, cost = rewrite.graph, cost + delta
            last = Entry(graph, cost, last, move.rule_id, None)
            applied += 1
        if applied < 2:
            return
        near = frozenset(i for i in touched if i in graph.nodes)
        last = Entry(graph, cost, last.parent, last.rule_id, near, base=entry)
        try:
            if not self.seen.add(graph):
                return
        except InvalidModelError:
            return
        self.candidates += 1
        if cost < self.best.cost:
            self._found(last)
        self.frontier.push(last)

    def _rewrites(self, entry: Entry) -> Iterator[tuple[Move, Rewrite]]:
        """The parent's moves re-applied (incremental), best first, then fresh rewrites.

        Rebased moves come first, ordered by the cost change they had at the parent: they
        are priced from the cost cache (their regions are unchanged), so a chain of
        independent improvements (e.g. every decomposed activation of a network) is
        followed at the cost of cache lookups before new matches are measured."""
        graph = entry.graph
        incremental = self.expansion is Expansion.INCREMENTAL and entry.parent is not None
        near = entry.near if incremental else None
        if incremental:
            yield from self._rebased(entry)
        for rewrite in self.expand(graph, near):
            self.check_time()
            if near is None or not rewrite.removed.isdisjoint(near):
                yield Move.of(graph, rewrite), rewrite
            # else: a match away from the change; its rebased parent move stands for it

    def _rebased(self, entry: Entry) -> Iterator[tuple[Move, Rewrite]]:
        parent = entry.base or entry.parent
        assert parent is not None
        blocked = entry.near or frozenset()
        known = list(zip(parent.moves, parent.deltas, strict=True))
        order = sorted(range(len(known)), key=lambda i: (known[i][1], i))
        for move, _ in (known[i] for i in order):
            if move.removed.isdisjoint(blocked):
                rewrite = move.rebase(entry.graph)
                if rewrite is not None:
                    yield move, rewrite

    def _consider(self, parent: Entry, rewrite: Rewrite) -> float | None:
        """Price and queue a candidate; its cost, or None if it was dropped unpriced."""
        self.candidates += 1
        child = rewrite.graph
        problems = dangling_values(parent.graph, rewrite)
        if problems:
            self.invalid += 1
            if self.strict:
                path = " -> ".join([*parent.path(), rewrite.rule_id]) or rewrite.rule_id
                raise InvalidRewriteError(f"rewrite path {path} broke the graph: " + "; ".join(problems))
            return None
        try:
            if not self.seen.add(child):
                self.duplicates += 1
                return None
        except InvalidModelError:  # the rewrite closed a cycle: no topological order
            self.cyclic += 1
            return None
        cost = float(self.cost_model.cost_after(parent.graph, parent.cost, rewrite))
        near = affected_nodes(parent.graph, child, rewrite)
        entry = Entry(lighten(child), cost, parent, rewrite.rule_id, near)
        if cost < self.best.cost:
            self._found(entry)
        if entry is self.best or cost < self.alpha * self.best.cost:
            self.frontier.push(entry)
        else:
            self.pruned += 1
        return cost

    def result(self, reason: StopReason) -> SearchResult:
        path = tuple(self.best.path())
        stats = SearchStats(
            self.candidates,
            self.duplicates,
            self.cyclic,
            self.pruned,
            self.frontier.dropped,
            self.seen.collisions,
            self.invalid,
            self.left_behind,
        )
        return SearchResult(
            graph=self.best.graph,
            initial_cost=self.initial.cost,
            best_cost=self.best.cost,
            stop_reason=reason,
            explored=self.explored,
            applied=Counter(path),
            path=path,
            elapsed_s=time.perf_counter() - self.started,
            stats=stats,
            best_found_s=None if self.best_at is None else self.best_at - self.started,
        )


def search(
    graph: Graph,
    expand: Expand,
    cost_model: CostModel,
    *,
    alpha: float = 1.05,
    time_budget_s: float = 10.0,
    max_graphs: int = DEFAULT_MAX_GRAPHS,
    max_queue: int = DEFAULT_MAX_QUEUE,
    expansion: Expansion = Expansion.INCREMENTAL,
    progress: Progress | None = None,
    patience: Patience | None = None,
) -> SearchResult:
    """Search for the cheapest graph reachable from `graph` by `expand`'s rewrites.

    Deterministic for a given graph, `expand` and cost model, unless the time budget
    stops it. `max_graphs` bounds the graphs explored (expanded); `max_queue` the graphs
    waiting (the most expensive are dropped first); `patience`, if given, stops a search
    whose best stopped improving (`STALLED`).
    """
    _check_options(alpha, time_budget_s, max_graphs, max_queue)
    started = time.perf_counter()
    if time_budget_s == 0 or max_graphs == 0:
        return _no_search(graph, started)
    root = Entry(graph, float(cost_model.cost(graph)))
    run = _Run(
        expand, cost_model, alpha, expansion, started + time_budget_s, started,
        Frontier(max_queue), SeenGraphs(), root, root, strict=strict_invariants(), patience=patience,
        mark=root.cost,
    )
    run.seen.add(graph)
    run.frontier.push(root)
    return run.result(_loop(run, max_graphs, progress))


def _loop(run: _Run, max_graphs: int, progress: Progress | None) -> StopReason:
    try:
        run.check_time()
        while run.frontier:
            if run.explored >= max_graphs:
                return StopReason.GRAPH_BUDGET
            run.check_time()
            entry = run.frontier.pop()
            if run.hopeless(entry):
                run.left_behind += 1
                continue
            if run.explore(entry):
                run.explored += 1
                run.since_mark += 1
            if progress is not None:
                progress(_snapshot(run))
            if run.stalled():
                return StopReason.STALLED
    except _TimeUp:
        return StopReason.TIME_BUDGET
    return StopReason.CONVERGED if run.left_behind else StopReason.EXHAUSTED


def _snapshot(run: _Run) -> SearchProgress:
    return SearchProgress(
        run.explored, run.best.cost, run.initial.cost, len(run.frontier),
        time.perf_counter() - run.started,
    )


def _no_search(graph: Graph, started: float) -> SearchResult:
    return SearchResult(
        graph, None, None, StopReason.NO_SEARCH, 0, Counter(), (),
        time.perf_counter() - started, SearchStats(),
    )


def _check_options(alpha: float, time_budget_s: float, max_graphs: int, max_queue: int) -> None:
    if alpha < 1.0:
        raise UsageError(f"alpha must be >= 1.0, got {alpha}")
    if time_budget_s < 0:
        raise UsageError(f"time budget must be >= 0 seconds, got {time_budget_s}")
    if max_graphs < 0 or max_queue < 1:
        raise UsageError(f"need max_graphs >= 0 and max_queue >= 1, got {max_graphs}, {max_queue}")
