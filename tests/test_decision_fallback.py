"""A search result measured not faster falls back on the last graph every sweep of which was
confirmed: that graph is checked and decided in its place (`_choose._with_fallback`); last,
a result not returned falls back on the canonical graph alone (`_choose._with_simplified`).

The sweeps run on a stand-in judge and the decisions are scripted (a `Duel` whose verdict
depends on the graph it measures); the check runs on ORT for real."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import onnx
import pytest

from taso._model_io import load_model
from taso._onnx_import import import_model
from taso.backends import AnalyticalCostModel
from taso.backends.compare import run_reference
from taso.ir import Graph
from taso.pipeline import _choose
from taso.pipeline._canonical import canonicalize
from taso.pipeline._choose import Phases, check_and_choose
from taso.pipeline._export import export
from taso.pipeline._rewriting import (
    Fallback,
    SearchOutcome,
    Speculation,
    Sweeping,
    default_rules,
    run_search,
)
from taso.pipeline.api import _with_simplifications
from taso.pipeline.budget import Budget
from taso.report import Decision, StopReason
from taso.search.sweep import Judgement
from tests.helpers.choosing import choose_on, nodes_run, scripted, search_with_a_no_op
from tests.helpers.models import scaled_chain_model


@dataclasses.dataclass
class FirstWholeThenCutShort:
    """Fewer nodes run is faster; once a sweep was judged faster, any other is cut short while ahead."""

    kept: list[bytes] = dataclasses.field(default_factory=list)

    def __call__(self, current: Graph, candidate: Graph, deadline: float, *, look: int = 0) -> Judgement:
        speedup = nodes_run(current) / nodes_run(candidate)
        if self.kept and candidate.structural_hash not in self.kept and speedup > 1:
            return Judgement(1.04, True, complete=False)
        if speedup > 1.01 and not self.kept:
            self.kept.append(candidate.structural_hash)
        return Judgement(speedup, speedup > 1.01)


@pytest.fixture(scope="module")
def searched() -> tuple[Graph, SearchOutcome]:
    graph = import_model(scaled_chain_model())
    outcome = run_search(graph, rules=default_rules(), cost_model=AnalyticalCostModel(), alpha=1.0,
                         budget=Budget.of(30), sweeping=Sweeping(FirstWholeThenCutShort(), AnalyticalCostModel()))
    return graph, outcome


def test_a_search_whose_last_sweep_was_cut_short_leaves_a_fallback(searched: tuple[Graph, SearchOutcome]) -> None:
    graph, outcome = searched
    fallback = outcome.fallback
    assert fallback is not None and fallback.why is Speculation.CUT_SHORT
    assert nodes_run(graph) > nodes_run(fallback.graph) > nodes_run(outcome.graph)
    cut_short = [s for s in outcome.sweeps if s.accepted and not s.complete]
    assert len(cut_short) == 1 and cut_short[0].rule_id not in fallback.applied


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path))


def choose(searched: tuple[Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch, faster: Callable[[Graph], bool],
           deadline: float = math.inf) -> _choose.OptimizeResult:
    """check_and_choose on the searched outcome, its decisions scripted by `faster`."""
    monkeypatch.setattr(_choose, "Duel", scripted(faster))
    graph, outcome = searched
    loaded = load_model(scaled_chain_model())
    return check_and_choose(loaded, graph, export(graph), export(outcome.graph), outcome, run_reference(loaded.model),
                            check=True, profile=None, phases=Phases(), say=lambda _: None, notes=[],
                            measured_costs=False, deadline=deadline)


def test_the_fallback_is_checked_and_returned_when_the_result_is_not_faster(
    searched: tuple[Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, outcome = searched
    assert outcome.fallback is not None
    report = choose(searched, monkeypatch, lambda g: g is outcome.fallback.graph).report  # type: ignore[union-attr]
    assert report.decision is Decision.OPTIMIZED
    assert report.applied_rewrites == outcome.fallback.applied
    cut_short = next(s for s in outcome.sweeps if s.accepted and not s.complete)
    assert report.rejected_rewrites[cut_short.rule_id] == cut_short.rewrites
    assert {**report.applied_rewrites, **report.rejected_rewrites} == outcome.applied
    assert report.output_nodes == len(export(outcome.fallback.graph).graph.node)
    assert report.latency.measured_optimized_ms == 8.0
    assert any("checked and measured instead" in w for w in report.warnings)


def test_a_fallback_not_faster_either_returns_the_original(
    searched: tuple[Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, outcome = searched
    report = choose(searched, monkeypatch, lambda g: False).report
    assert report.decision is Decision.NOT_FASTER and report.applied_rewrites == {}
    assert report.rejected_rewrites == outcome.applied
    assert any("was not returned either" in w for w in report.warnings)


def test_no_fallback_decision_past_the_deadline(
    searched: tuple[Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, outcome = searched
    report = choose(searched, monkeypatch, lambda g: g is outcome.fallback.graph,  # type: ignore[union-attr]
                    deadline=0.0).report
    assert report.decision is Decision.NOT_FASTER
    assert any("no time was left" in w for w in report.warnings)


# ----- last: the canonical graph alone ------------------------------------------------------------
@pytest.fixture(scope="module")
def simplified_search() -> tuple[onnx.ModelProto, Graph, SearchOutcome]:
    return search_with_a_no_op()


def test_the_canonical_graph_is_left_to_fall_back_on_when_the_search_changed_it(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome],
) -> None:
    _, graph, outcome = simplified_search
    simplified = outcome.simplified
    assert simplified is not None and simplified.applied == {"canonical/no-op-arithmetic": 1}
    assert simplified.graph.structural_hash == canonicalize(graph).graph.structural_hash
    assert set(outcome.applied) > set(simplified.applied)  # rules were applied on top
    unsearched = SearchOutcome(simplified.graph, {}, StopReason.CONVERGED)
    assert _with_simplifications(unsearched, canonicalize(graph)).simplified is None  # nothing else to fall back on


def test_the_canonical_graph_is_returned_when_the_result_is_not_faster(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, _, outcome = simplified_search
    simplified = outcome.simplified
    assert simplified is not None and outcome.fallback is None
    report = choose_on(simplified_search, monkeypatch, lambda g: g is simplified.graph).report
    assert report.decision is Decision.OPTIMIZED and report.applied_rewrites == simplified.applied
    assert {**report.applied_rewrites, **report.rejected_rewrites} == outcome.applied
    assert report.output_nodes == len(export(simplified.graph).graph.node)
    assert any("the canonical form alone was checked and measured instead" in w for w in report.warnings)


def test_the_canonical_graph_is_returned_when_the_result_computes_something_else(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, _, outcome = simplified_search
    simplified = outcome.simplified
    assert simplified is not None
    report = choose_on(simplified_search, monkeypatch, lambda g: True, differs=outcome.graph).report
    assert report.decision is Decision.OPTIMIZED and report.applied_rewrites == simplified.applied
    assert any(w.startswith("outputs differ from the original") for w in report.warnings)


def test_the_canonical_graph_comes_after_the_fallback(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, graph, outcome = simplified_search
    simplified = outcome.simplified
    assert simplified is not None
    fallback = Fallback(export_graph(outcome.graph), dict(outcome.applied), Speculation.CUT_SHORT)
    decided: list[Graph] = []

    def faster(g: Graph) -> bool:
        decided.append(g)
        return g is simplified.graph

    with_both = (model, graph, dataclasses.replace(outcome, fallback=fallback))
    report = choose_on(with_both, monkeypatch, faster).report
    assert decided == [outcome.graph, fallback.graph, simplified.graph]
    assert report.decision is Decision.OPTIMIZED and report.applied_rewrites == simplified.applied


def test_the_original_is_returned_when_the_canonical_graph_is_not_faster_either(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, _, outcome = simplified_search
    report = choose_on(simplified_search, monkeypatch, lambda g: False).report
    assert report.decision is Decision.NOT_FASTER and report.applied_rewrites == {}
    assert report.rejected_rewrites == outcome.applied
    assert any("the canonical form alone was not returned either" in w for w in report.warnings)
    late = choose_on(simplified_search, monkeypatch, lambda g: g is outcome.simplified.graph, deadline=0.0).report  # type: ignore[union-attr]
    assert late.decision is Decision.NOT_FASTER
    assert any("no time was left to decide on the canonical form alone" in w for w in late.warnings)


def export_graph(graph: Graph) -> Graph:
    """A graph equal to `graph` but not the same object (the scripted decisions tell them apart by identity)."""
    return import_model(export(graph))
