"""Hypothesis profiles for the fuzz tests.

    pytest -m fuzz --hypothesis-profile long     # >= 5,000 fuzzed models
    pytest -m fuzz --hypothesis-profile ci       # a quick bounded run

The CI suite itself does not need a profile: its fuzz test fixes its own example count.
Profiles only set what they name; every other test keeps Hypothesis's defaults.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile(
    "long", max_examples=5_000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)
