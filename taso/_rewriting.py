"""Glue between the rule library, the matcher and the search: what `optimize_onnx` runs.

    rules (shipped library or the caller's) -> expand(graph, near) -> search(...) -> outcome

Only rules whose proof record says PROVED are used: an unproved rule never rewrites a
user's model, whatever file it came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from taso.errors import UsageError
from taso.ir import Graph
from taso.report import StopReason
from taso.search import CostModel, Rewrite, SearchProgress, search
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import ProofStatus, Rule, RuleLibrary, load_rules

RulesArg = str | os.PathLike[str] | RuleLibrary | Sequence[Rule] | None


@dataclass(frozen=True)
class SearchOutcome:
    graph: Graph
    applied: dict[str, int]
    stop_reason: StopReason
    explored: int = 0
    predicted_original_ms: float | None = None
    predicted_best_ms: float | None = None


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
    """The proved rules to search with; a rule file that cannot be read is a usage error."""
    if rules is None:
        chosen = default_rules()
    elif isinstance(rules, RuleLibrary):
        chosen = rules.rules
    elif isinstance(rules, str | os.PathLike):
        path = Path(rules)
        if not path.is_file():
            raise UsageError(f"{path}: no such rule file")
        chosen = load_rules(path).rules
    else:
        chosen = tuple(rules)
    return tuple(r for r in chosen if r.proof.status is ProofStatus.PROVED)


def is_commutation(rule: Rule) -> bool:
    """`op(a, b) = op(b, a)` for a commutative op: the matcher already tries both orders."""
    from taso.opspecs import spec_by_name

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


def make_expand(
    rules: Sequence[Rule], *, priority: Priority | None = None
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
                variant = apply(graph, rule, match)
                if variant is None:
                    continue
                removed = frozenset(graph.nodes.keys() - variant.nodes.keys())
                added = frozenset(variant.nodes.keys() - graph.nodes.keys())
                yield Rewrite(rule.id, variant, removed, added)

    def expand(graph: Graph, near: frozenset[int] | None) -> Iterator[Rewrite]:
        if priority is None:
            yield from rewrites(graph, near)
            return
        found = list(rewrites(graph, near))
        keys = [priority(graph, r) for r in found]
        order = sorted(range(len(found)), key=lambda i: (keys[i], i))
        yield from (found[i] for i in order)

    return expand


def run_search(
    graph: Graph,
    *,
    rules: Sequence[Rule],
    cost_model: CostModel,
    alpha: float,
    time_budget_s: float,
    progress: Callable[[SearchProgress], None] | None = None,
    priority: Priority | None = None,
) -> SearchOutcome:
    if time_budget_s == 0:
        return SearchOutcome(graph, {}, StopReason.NO_SEARCH)
    if not rules:
        return SearchOutcome(graph, {}, StopReason.NO_RULES)
    result = search(
        graph, make_expand(rules, priority=priority), cost_model, alpha=alpha, time_budget_s=time_budget_s, progress=progress
    )
    return SearchOutcome(
        graph=result.graph,
        applied=dict(sorted(result.applied.items())),
        stop_reason=result.stop_reason,
        explored=result.explored,
        predicted_original_ms=result.initial_cost,
        predicted_best_ms=result.best_cost,
    )
