"""A single sweep the screen ruled out is carried to the next round unpriced when the sweep
kept there does not meet its matches, and priced again when it does (`taso.search.sweep`);
on toy chains, with a fake screen that logs every graph it prices."""

from __future__ import annotations

import dataclasses

from taso.ir import Graph
from taso.search.sweep import Judgement, Skipped, sweep
from tests.helpers.search_toys import Expander, OpWeights, chain, ops_of, swap

WEIGHTS = {"A": 3.0, "B": 2.9, "C": 2.9, "E": 3.5, "X": 1.0}
"""A->B is a small win (the round goes on to price C->E); C->E is predicted slower; A->C a
small win that makes a new C."""

RULES = {"A->B": swap("A", "B"), "C->E": swap("C", "E"), "A->C": swap("A", "C")}


@dataclasses.dataclass(frozen=True)
class LoggingScreen(OpWeights):
    priced: list[list[str]] = dataclasses.field(default_factory=list)

    def cost(self, graph: Graph) -> float:
        self.priced.append(ops_of(graph))
        return super().cost(graph)


def _judge(current: Graph, candidate: Graph, deadline: float, *, look: int = 0) -> Judgement:
    weights = OpWeights(WEIGHTS)
    speedup = weights.cost(current) / weights.cost(candidate)
    return Judgement(speedup, speedup >= 1.01)


def _swept(graph: Graph, kept: str = "A->B") -> tuple[object, LoggingScreen]:
    screen = LoggingScreen(WEIGHTS)
    rules = {rule_id: RULES[rule_id] for rule_id in (kept, "C->E")}
    result = sweep(graph, Expander(tuple(rules.values())), _judge, prior=OpWeights(WEIGHTS), time_budget_s=10,
                   screen=screen, min_predicted=1.005, expand_rule=lambda rule: Expander((rules[rule],)))
    return result, screen


def _screens_of_e(screen: LoggingScreen, after: list[str]) -> int:
    """How often a graph with an E was priced after the last pricing of `after` (the graph
    the second round starts from)."""
    last = len(screen.priced) - 1 - screen.priced[::-1].index(after)
    return sum("E" in ops for ops in screen.priced[last + 1:])


def test_a_ruled_out_sweep_far_from_the_kept_one_is_not_priced_again() -> None:
    result, screen = _swept(chain("A", "X", "X", "C"))
    assert ops_of(result.graph) == ["B", "X", "X", "C"]
    ruled_out = [step for step in result.steps if step.rule_id == "C->E"]
    assert len(ruled_out) == 2  # reported in both rounds
    assert all(step.skipped is Skipped.PREDICTED_NOT_FASTER and not step.accepted for step in ruled_out)
    assert ruled_out[0].predicted_speedup == ruled_out[1].predicted_speedup
    assert _screens_of_e(screen, after=["B", "X", "X", "C"]) == 0  # priced in the first round only


def test_a_ruled_out_sweep_next_to_the_kept_one_is_priced_again() -> None:
    result, screen = _swept(chain("A", "X", "C"))  # one op between the two matches: they meet
    assert ops_of(result.graph) == ["B", "X", "C"]
    assert len([step for step in result.steps if step.rule_id == "C->E"]) == 2
    assert _screens_of_e(screen, after=["B", "X", "C"]) == 1


def test_a_ruled_out_sweep_with_new_matches_is_priced_again() -> None:
    result, screen = _swept(chain("A", "X", "X", "C"), kept="A->C")  # a new C, far from the old one
    assert ops_of(result.graph) == ["C", "X", "X", "C"]
    assert len([step for step in result.steps if step.rule_id == "C->E"]) == 2
    assert _screens_of_e(screen, after=["C", "X", "X", "C"]) == 1
