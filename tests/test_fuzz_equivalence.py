"""Fuzzed equivalence: whatever random valid model goes in, the optimized one computes the same.

Each example builds a random model (`tests.helpers.strategies.recipes`), optimizes it with
a small budget on the deterministic analytical cost model and *without* taso's own numeric
check (so that a wrong rewrite reaches the assertion instead of being caught and discarded),
and compares original and optimized on ONNX Runtime with the same inputs. It also checks
that the result passes the full onnx checker and keeps the interface (names, types, symbolic
dims). Applied rules are recorded as Hypothesis events (`--hypothesis-show-statistics`).
The check itself is `tests.helpers.equivalence.assert_optimized_equivalent`.

    pytest tests/test_fuzz_equivalence.py                          # CI: a bounded run
    pytest -m fuzz --hypothesis-profile long tests/test_fuzz_equivalence.py   # >= 5,000

A failure shrinks to a `Recipe`; paste it into `tests/regressions/test_fuzz_regressions.py`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.helpers.equivalence import assert_optimized_equivalent
from tests.helpers.strategies import Recipe, recipes

pytestmark = pytest.mark.ort

CI_EXAMPLES = 60
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


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
