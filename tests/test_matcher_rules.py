"""The hand-written fixture rules (tests/helpers/rules.py) are well formed.

`rule` validates each one when it is built; this checks that they survive the JSON round trip.
"""

from __future__ import annotations

from taso.substitutions.rule import rule_from_json, rule_to_json
from tests.helpers.rules import ALL_RULES


def test_rules_round_trip_through_json() -> None:
    for r in ALL_RULES:
        assert rule_from_json(rule_to_json(r)) == r
