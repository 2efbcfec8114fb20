"""Fuzzed equivalence: whatever random valid model goes in, the optimized one computes the same.

Each example builds a random model (`tests.strategies.recipes`), optimizes it with a small
budget on the deterministic analytical cost model and *without* taso's own numeric check
(so that a wrong rewrite reaches the assertion instead of being caught and discarded), and
compares original and optimized on ONNX Runtime with the same inputs. It also checks that
the result passes the full onnx checker and keeps the interface (names, types, symbolic
dims). Applied rules are recorded as Hypothesis events (`--hypothesis-show-statistics`).

    pytest tests/test_fuzz_equivalence.py                          # CI: a bounded run
    pytest -m fuzz --hypothesis-profile long tests/test_fuzz_equivalence.py   # >= 5,000

A failure shrinks to a `Recipe`; paste it into `tests/regressions/test_fuzz_regressions.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, event, given, settings
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
from tests.strategies import Recipe, build, feeds, recipes
from tests.test_fuzz_rules import fuzz_rules

SEARCH_BUDGET_S = 0.3
CI_EXAMPLES = 60
ADVERSARIAL_GRAPHS = 30
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
RULES = fuzz_rules()


ORT_BROKEN_FUSIONS = ("ConvAddActivationFusion",)
"""ORT graph transformers the oracle turns off because they are wrong, not taso: in ORT 1.31,
ConvAddActivationFusion folds a grouped, biased Conv into the Add that reads it and drops the
Conv's output even when it is a graph output, so the *unoptimized* model fails to load ("Failed
to find node output or a constant initializer producing output"). Minimal case:
tests/regressions/test_ort_workarounds.py."""


def _session(model: onnx.ModelProto, disabled: Sequence[str]) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled)
    )


def run_on_ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return _session(model, ORT_BROKEN_FUSIONS).run(None, inputs)


def loads_on_default_ort(model: onnx.ModelProto) -> bool:
    """Whether ORT with every transformer on (what users run) accepts the model."""
    try:
        _session(model, ())
    except Exception:  # noqa: BLE001  (ORT raises plain RuntimeError/Fail)
        return False
    return True


def _interface(model: onnx.ModelProto) -> list[tuple[str, bytes]]:
    values = list(model.graph.input) + list(model.graph.output)
    return [(v.name, v.type.SerializeToString(deterministic=True)) for v in values]


def assert_same_on_ort(model: onnx.ModelProto, optimized: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    """Valid, same interface, and the same outputs on ORT (relative to each output's scale)."""
    onnx.checker.check_model(optimized, full_check=True)
    assert _interface(optimized) == _interface(model)
    expected, actual = run_on_ort(model, inputs), run_on_ort(optimized, inputs)
    if loads_on_default_ort(model):  # taso must not turn a model ORT runs into one it rejects
        assert loads_on_default_ort(optimized), "the optimized model no longer loads on ORT's default settings"
    for name, want, got in zip([o.name for o in model.graph.output], expected, actual, strict=True):
        assert got.shape == want.shape, name
        scale = max(1.0, float(np.nanmax(np.abs(want)))) if want.size else 1.0
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale, equal_nan=True, err_msg=name)


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


@settings(max_examples=CI_EXAMPLES, deadline=None, suppress_health_check=_SLOW_OK, database=None)
@given(recipes(max_steps=10))
def test_optimized_models_compute_the_same(recipe: Recipe) -> None:
    assert_optimized_equivalent(recipe)


@pytest.mark.fuzz
@settings(deadline=None, suppress_health_check=_SLOW_OK)
@given(recipes(max_steps=14))
def test_fuzz_optimized_models_compute_the_same(recipe: Recipe) -> None:
    """The long run: example count from the profile (`--hypothesis-profile long`: 5,000)."""
    assert_optimized_equivalent(recipe)
