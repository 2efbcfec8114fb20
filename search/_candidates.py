"""A sweep's candidate graph: one rule's every match applied at once (`apply_all`), with
the prior's prediction, ordered most promising first (`ordered`). Used by the sweep
phase (`taso.search.sweep`) and its joint sweeps (`taso.search._joint`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from taso.errors import InvalidModelError
from taso.ir import INTERNAL_DOMAIN, Graph, Node
from taso.report import SiteNode, SweepSite
from taso.search.cost import CostModel
from taso.search.rewrite import Expand, Move, Rewrite, affected_nodes, dangling_values


@dataclass(frozen=True)
class Candidate:
    """A sweep of `rule_id` (then of each of `joint`'s rules, for a joint sweep) on the
    current graph: the result, its match counts, and what the prior predicts for it."""

    rule_id: str
    graph: Graph
    rewrites: int
    predicted_delta: float
    size_ratio: float  # the prior's cost of the sweep over the current graph's, at least 1
    site: SweepSite | None = None
    removed: frozenset[int] = frozenset()
    """The current graph's nodes that the sweep's matches replace."""
    joint: tuple[tuple[str, int], ...] = ()
    """Further rules swept on top of `rule_id`'s sweep, with their match counts."""

    @property
    def counts(self) -> tuple[tuple[str, int], ...]:
        """Every rule the candidate applied, with its match count."""
        return ((self.rule_id, self.rewrites), *self.joint)


RuleExpand = Callable[[str], Expand]
"""An `Expand` that lists one rule's rewrites only, by rule id."""


def size_ratio(prior_base: float, predicted_delta: float) -> float:
    """How many times the current graph's work the prior predicts a candidate to be (at
    least 1): a screen compiles and profiles the candidate, which takes about that much
    longer. On ResNet-50, TASO's 1x1-enlarging sweep (9x the weights, 4x the latency) took
    5.5 s to screen where the others took 0.5 s, and ran the call 40% past its budget."""
    if prior_base <= 0:
        return 1.0
    return max(1.0, (prior_base + predicted_delta) / prior_base)


def ordered(
    graph: Graph, expand: Expand, expand_rule: RuleExpand | None, prior: CostModel, *, skip: set[str],
    deadline: float = math.inf, clock: Callable[[], float] = time.perf_counter,
) -> list[Candidate]:
    """Every not-yet-judged rule's sweep of `graph`, most promising (by the prior) first
    (the rules still unpriced when `deadline` comes by `clock`, most matches first, are left out)."""
    by_rule: dict[str, list[Rewrite]] = {}
    for rewrite in expand(graph, None):
        if rewrite.rule_id not in skip:
            by_rule.setdefault(rewrite.rule_id, []).append(rewrite)
    base = prior.cost(graph)
    sweeps = []
    for rule_id, found in sorted(by_rule.items(), key=lambda item: (-len(item[1]), item[0])):
        if clock() >= deadline:
            break
        swept, count = apply_all(graph, found, expand_rule(rule_id) if expand_rule else None)
        if count:
            delta = prior.cost(swept) - base
            removed = frozenset().union(*(r.removed for r in found))
            sweeps.append(Candidate(rule_id, swept, count, delta, size_ratio(base, delta), site_of(graph, found[0]),
                                    removed=removed & graph.nodes.keys()))
    return sorted(sweeps, key=lambda s: (s.predicted_delta > 0, s.predicted_delta, s.rule_id))


def site_of(graph: Graph, rewrite: Rewrite) -> SweepSite:
    """The nodes `rewrite` removed from `graph` and those it added, by node id."""
    return SweepSite(
        before=tuple(_site_node(graph.nodes[i]) for i in sorted(rewrite.removed)),
        after=tuple(_site_node(rewrite.graph.nodes[i]) for i in sorted(rewrite.added)),
    )


def _site_node(node: Node) -> SiteNode:
    return SiteNode(node.op_type, node.inputs, node.outputs, folded=node.domain == INTERNAL_DOMAIN)


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
