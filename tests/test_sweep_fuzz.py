"""Fuzzed rule sweeps: every match of a rule applied at once still computes the same.

The sweep phase applies all non-overlapping matches of one rule in one step, re-applying
each match (`Move.rebase`) to the graph the earlier ones produced and finding matches
next to applied ones again. This checks that machinery on random models: for each rule
that can fire, the swept model is valid, keeps its interface and gives the same outputs
on ONNX Runtime as the original.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings

from taso._onnx_import import import_model
from taso.pipeline._export import export
from taso.pipeline._rewriting import make_expand
from taso.search.sweep import apply_all
from tests.helpers.equivalence import RULES, reachable_rules
from tests.helpers.ort import assert_same_on_ort
from tests.helpers.strategies import Recipe, build, feeds, recipes

pytestmark = pytest.mark.ort

CI_EXAMPLES = 100
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def assert_sweeps_equivalent(recipe: Recipe) -> None:
    model = build(recipe)
    graph, inputs = import_model(model), feeds(recipe)
    rules = reachable_rules(graph, RULES)
    expand = make_expand(rules)
    by_id = {rule.id: rule for rule in rules}
    by_rule: dict[str, list] = {}
    for rewrite in expand(graph, None):
        by_rule.setdefault(rewrite.rule_id, []).append(rewrite)
    for rule_id, found in sorted(by_rule.items()):
        swept, count = apply_all(graph, found, refind=make_expand([by_id[rule_id]]))
        assert count >= 1, rule_id
        assert_same_on_ort(model, export(swept), inputs)
        event(f"swept {rule_id}" + (" (several)" if count > 1 else ""))
    if not by_rule:
        event("no match")


@settings(max_examples=CI_EXAMPLES, deadline=None, suppress_health_check=_SLOW_OK, database=None)
@given(recipes(max_steps=10))
def test_swept_models_compute_the_same(recipe: Recipe) -> None:
    assert_sweeps_equivalent(recipe)


@pytest.mark.fuzz
@settings(deadline=None, suppress_health_check=_SLOW_OK)
@given(recipes(max_steps=14))
def test_fuzz_swept_models_compute_the_same(recipe: Recipe) -> None:
    """The long run: example count from the profile (`--hypothesis-profile long`)."""
    assert_sweeps_equivalent(recipe)
