"""A patient search stops once its best stops improving by a margin (`STALLED`), and after
sweeps the pipeline keeps a backtracking result only if priced at least `MIN_SEARCH_GAIN` faster."""

from __future__ import annotations

import dataclasses

import pytest

from taso._onnx_import import import_model
from taso.backends import AnalyticalCostModel
from taso.ir import Graph
from taso.pipeline._rewriting import MIN_SEARCH_GAIN, Sweeping, run_search
from taso.pipeline.budget import Budget
from taso.report import StopReason
from taso.search import FunctionCost, Patience, Rewrite, apply_rewrite, search
from taso.search.sweep import Judgement
from tests.helpers.models import wide_model
from tests.helpers.rules import FIXTURE_RULES
from tests.helpers.search_toys import Expander, OpWeights, chain, ops_of

SLIGHTLY_BETTER = OpWeights({"A": 10.0, "B": 9.99})  # each A -> B saves 0.1% of an 8-op chain


def first_a_to_b(graph: Graph, node_id: int) -> Rewrite | None:
    """A -> B at the first A of the chain only: one improvement a graph, one level at a time."""
    node = graph.nodes[node_id]
    producer = graph.producers.get(node.inputs[0])
    if node.op_type != "A" or (producer is not None and graph.nodes[producer[0]].op_type == "A"):
        return None
    return apply_rewrite(graph, "A->B", remove=[node_id], add=[dataclasses.replace(node, op_type="B")])


def test_a_search_whose_best_stops_improving_by_the_margin_stalls() -> None:
    patient = search(chain(*"AAAAAAAA"), Expander((first_a_to_b,)), SLIGHTLY_BETTER, alpha=1.0, time_budget_s=60,
                     patience=Patience(graphs=3, gain=1.01))
    assert patient.stop_reason is StopReason.STALLED
    assert patient.explored == 3 and ops_of(patient.graph) == list("BBBAAAAA")


def test_gains_of_the_margin_keep_a_patient_search_going() -> None:
    kept_going = search(chain(*"AAAAAAAA"), Expander((first_a_to_b,)), SLIGHTLY_BETTER, alpha=1.0, time_budget_s=60,
                        patience=Patience(graphs=3, gain=1.0001))
    unbounded = search(chain(*"AAAAAAAA"), Expander((first_a_to_b,)), SLIGHTLY_BETTER, alpha=1.0, time_budget_s=60)
    for result in (kept_going, unbounded):
        assert result.stop_reason is StopReason.EXHAUSTED and ops_of(result.graph) == list("BBBBBBBB")


@dataclasses.dataclass
class NeverFaster:
    """A judge that finds no sweep faster, and counts its judgements."""

    calls: int = 0

    def __call__(self, current: Graph, candidate: Graph, deadline: float, *, look: int = 0) -> Judgement:
        self.calls += 1
        return Judgement(1.0, False)


@pytest.mark.parametrize(("per_conv", "kept"), [(0.001, False), (100.0, True)])
def test_after_sweeps_a_backtracking_gain_under_the_margin_is_not_kept(per_conv: float, kept: bool) -> None:
    """Merging the wide model's parallel convs pays: priced 1000 + `per_conv` a conv, the
    search's best is a gain far under `MIN_SEARCH_GAIN` (dropped) or far over it (kept)."""
    graph = import_model(wide_model())
    cost = FunctionCost(lambda g: 1000.0 + per_conv * sum(n.op_type == "Conv" for n in g.nodes.values()))
    outcome = run_search(graph, rules=FIXTURE_RULES, cost_model=cost, alpha=1.0, budget=Budget.of(60),
                         sweeping=Sweeping(NeverFaster(), AnalyticalCostModel()))
    assert not any(step.accepted for step in outcome.sweeps)
    assert bool(outcome.applied) is kept
    assert (outcome.graph.structural_hash == graph.structural_hash) is not kept
    assert (cost.cost(outcome.graph) < cost.cost(graph) / MIN_SEARCH_GAIN) is kept


@dataclasses.dataclass
class FirstSweepOnly:
    """A pooling judge that finds every candidate faster at first sight, and confirms only
    the first sweep it judged: everything after it, the search's result included, is refuted."""

    confirms: list[bool] = dataclasses.field(default_factory=list)

    def __call__(self, current: Graph, candidate: Graph, deadline: float, *, look: int = 0,
                 confirm: Judgement | None = None) -> Judgement:
        if confirm is not None:
            self.confirms.append(not self.confirms)
            return Judgement(1.2, self.confirms[-1], evidence=(0.2,) * 8)
        return Judgement(1.2, True, evidence=(0.2,) * 4)


def test_after_sweeps_a_backtracking_result_is_kept_only_if_confirmed() -> None:
    """The search's result (merging the Relus the sweeps refuted, priced far faster) is
    judged against the swept graph as a sweep is: found faster, then confirmed; refuted,
    the swept graph stands."""
    graph = import_model(wide_model())
    cost = FunctionCost(lambda g: 1000.0 + 100.0 * sum(n.op_type in ("Conv", "Relu") for n in g.nodes.values()))
    judge = FirstSweepOnly()
    outcome = run_search(graph, rules=FIXTURE_RULES, cost_model=cost, alpha=1.0, budget=Budget.of(60),
                         sweeping=Sweeping(judge, AnalyticalCostModel()))
    kept = [step for step in outcome.sweeps if step.accepted]
    assert len(kept) == 1 and judge.confirms[0] and not any(judge.confirms[1:])
    assert len(judge.confirms) == len(outcome.sweeps) + 1  # each sweep judged faster, then the search's result
    assert sum(outcome.applied.values()) == kept[0].rewrites  # the search's result was not kept
