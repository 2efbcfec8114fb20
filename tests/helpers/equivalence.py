"""The fuzzer's end-to-end check: an optimized model and a rewritten variant compute the same.

`assert_optimized_equivalent(recipe)` builds the recipe's model, optimizes it with a small
budget on the deterministic analytical cost model and *without* taso's own numeric check
(so that a wrong rewrite reaches the assertion instead of being caught and discarded),
also searches an arbitrary rewritten variant (`adversarial_variant`), and compares both
with the original on ONNX Runtime (`tests.helpers.ort.assert_same_on_ort`). Applied rules
are recorded as Hypothesis events when called from a Hypothesis test.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache

import onnx
from hypothesis import event
from hypothesis.control import currently_in_test_context

import taso
from taso._onnx_import import import_model
from taso.ir import Graph
from taso.opspecs import get_spec, spec_by_name
from taso.pipeline._export import export
from taso.pipeline._rewriting import make_expand
from taso.search import FunctionCost, search
from taso.substitutions._bridge import graph_index
from taso.substitutions.rule import Rule
from tests.helpers.ort import assert_same_on_ort
from tests.helpers.rules import fuzz_rules
from tests.helpers.strategies import Recipe, build, feeds

SEARCH_BUDGET_S = 0.3
ADVERSARIAL_GRAPHS = 30
RULES = fuzz_rules()


def _spec_names(graph: Graph) -> frozenset[str]:
    index = graph_index(graph)
    return frozenset(view.spec.name for node_id in graph.nodes if (view := index.view(node_id)) is not None)


ALWAYS_ADDED = frozenset({"Identity"})
"""Ops a rewrite may add beyond its target pattern: an Identity keeps an aliased graph output."""


@cache
def _emitted(spec_name: str) -> frozenset[str]:
    """The spec names a target node of this spec can appear as: itself, or its decomposition's ops."""
    spec = spec_by_name(spec_name)
    if spec.decomposition is None:
        return frozenset({spec_name})
    steps = spec.decomposition(spec.complete({}))  # op types do not depend on parameter values
    return frozenset({spec_name} | {found.name for step in steps if (found := get_spec(step.op_type)) is not None})


@lru_cache(maxsize=256)
def _reachable(rules: tuple[Rule, ...], present: frozenset[str]) -> tuple[Rule, ...]:
    reachable, kept = set(present | ALWAYS_ADDED), [False] * len(rules)
    grown = True
    while grown:
        grown = False
        for i, rule in enumerate(rules):
            if not kept[i] and {n.op for n in rule.source.nodes} <= reachable:
                kept[i] = grown = True
                reachable.update(*(_emitted(n.op) for n in rule.target.nodes))
    return tuple(rule for rule, keep in zip(rules, kept, strict=True) if keep)


def reachable_rules(graph: Graph, rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """The rules that can match `graph` or any graph rewriting it can reach, in their order.

    A rule matches only where every op of its source pattern is present, and rewriting
    adds only the ops of target patterns (as emitted: decompositions included) and
    `ALWAYS_ADDED`: rules outside this closure can never fire, so leaving them out
    changes no search result, only its speed (the matcher tries all ~600 rules on every
    explored graph otherwise).
    """
    return _reachable(tuple(rules), _spec_names(graph))


def adversarial_variant(graph: Graph, rules: Sequence[Rule], max_graphs: int = ADVERSARIAL_GRAPHS):
    """Search with a pseudo-random cost under which any rewritten graph beats the input.

    The analytical model rarely finds a toy graph cheaper, so the end-to-end run alone
    would seldom export a rewrite; this makes the search return an arbitrary reachable
    variant (deterministically: the cost is a function of the structural hash).
    """
    root = graph.structural_hash

    def cost(g: Graph) -> float:
        return 2.0 if g.structural_hash == root else int.from_bytes(g.structural_hash[:4], "little") / 2**32

    return search(graph, make_expand(reachable_rules(graph, rules)), FunctionCost(cost), alpha=100.0, time_budget_s=30.0,
                  max_graphs=max_graphs)


def assert_optimized_equivalent(recipe: Recipe, rules: Sequence[Rule] = RULES) -> taso.Report:
    """optimize_onnx's output and an arbitrary rewritten variant both compute the same."""
    model = build(recipe)
    onnx.checker.check_model(model, full_check=True)
    inputs = feeds(recipe)
    graph = import_model(model)
    result = taso.optimize_onnx(
        model, backend="analytical", time_budget_s=SEARCH_BUDGET_S, check=False, rules=reachable_rules(graph, rules)
    )
    assert_same_on_ort(model, result.model, inputs)
    variant = adversarial_variant(graph, rules)
    assert_same_on_ort(model, export(variant.graph), inputs)
    if currently_in_test_context():  # also called from plain regression tests
        for rule_id in sorted(set(result.report.applied_rewrites) | set(variant.applied)):
            event(f"applied {rule_id}")
        event("rewritten" if variant.applied else "no match")
    return result.report
