"""The backtracking search on toy rewrites with a fake, deterministic cost model."""

from __future__ import annotations

import dataclasses

import pytest

from taso.errors import UsageError
from taso.ir import Graph, Node
from taso.search import (
    Expansion,
    InvalidRewriteError,
    SearchProgress,
    StopReason,
    apply_rewrite,
    dangling_values,
    search,
    structural_defects,
)
from taso.search.backtracking import STRICT_ENV
from tests.helpers.search_toys import (
    Expander,
    OpWeights,
    add_identity,
    chain,
    drop_identity,
    ops_of,
    swap,
)

WEIGHTS = OpWeights({"A": 10.0, "B": 11.5, "C": 1.0, "Id": 1.0, "R": 2.0})


def test_finds_the_optimum_and_counts_rules_along_the_path() -> None:
    graph = chain("R", "Id", "R", "Id", "Id", "R")
    result = search(graph, Expander((drop_identity,)), WEIGHTS, time_budget_s=60)
    assert ops_of(result.graph) == ["R", "R", "R"]
    assert result.applied == {"drop-id": 3}
    assert result.path == ("drop-id",) * 3
    assert (result.initial_cost, result.best_cost) == (9.0, 6.0)
    assert result.stop_reason is StopReason.CONVERGED  # the single removals left are no longer within alpha
    result.graph.validate()


def test_alpha_one_stays_in_a_local_minimum_and_relaxation_escapes_it() -> None:
    graph = chain("A")  # A (10) -> B (11.5, worse) -> C (1, best)
    expand = Expander((swap("A", "B"), swap("B", "C")))
    strict = search(graph, expand, WEIGHTS, alpha=1.0, time_budget_s=60)
    relaxed = search(graph, expand, WEIGHTS, alpha=1.2, time_budget_s=60)
    assert ops_of(strict.graph) == ["A"] and strict.stats.pruned == 1
    assert ops_of(relaxed.graph) == ["C"]
    assert relaxed.path == ("A->B", "B->C")


def test_duplicates_are_found_by_structural_hash() -> None:
    # removing two Ids in either order reaches the same graph (alpha: expand both single removals)
    result = search(chain("R", "Id", "R", "Id", "R"), Expander((drop_identity,)), WEIGHTS, alpha=100.0)
    assert result.stats.duplicates >= 1
    assert result.explored == 4  # input, two single removals, both removed


def test_forced_hash_collisions_are_resolved_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = chain("R", "Id", "R", "Id", "R")
    honest = search(graph, Expander((drop_identity,)), WEIGHTS)
    monkeypatch.setattr(Graph, "structural_hash", property(lambda self: b"\0" * 16))
    colliding = search(chain("R", "Id", "R", "Id", "R"), Expander((drop_identity,)), WEIGHTS)
    assert colliding.explored == honest.explored
    assert colliding.best_cost == honest.best_cost
    assert colliding.stats.duplicates == honest.stats.duplicates
    assert colliding.stats.hash_collisions > 0


def test_graph_budget_stops_an_infinite_space() -> None:
    result = search(chain("R", "R", "R"), Expander((add_identity,)), WEIGHTS, alpha=10.0, max_graphs=5)
    assert result.stop_reason is StopReason.GRAPH_BUDGET
    assert result.explored == 5


class FakeClock:
    """Replaces time.perf_counter in the search; advances one second per cost call."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_time_budget_is_checked_between_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr("taso.search.backtracking.time", clock)

    @dataclasses.dataclass(frozen=True)
    class Slow(OpWeights):
        def cost(self, graph: Graph) -> float:
            clock.now += 1.0
            return super().cost(graph)

    slow = Slow(WEIGHTS.weights)
    result = search(chain("R", "R", "R"), Expander((add_identity,)), slow, alpha=10.0, time_budget_s=5)
    assert result.stop_reason is StopReason.TIME_BUDGET
    assert len(slow.calls) == 5  # priced at t=0..4, stopped before the candidate at t=5
    assert clock.now == 5.0 and result.elapsed_s == clock.now  # fake seconds: it stopped at its budget


def test_zero_budget_means_no_search() -> None:
    result = search(chain("R"), Expander((drop_identity,)), WEIGHTS, time_budget_s=0)
    assert result.stop_reason is StopReason.NO_SEARCH
    assert result.best_cost is None and result.explored == 0


def test_is_deterministic() -> None:
    def run() -> tuple:
        expand = Expander((add_identity, drop_identity, swap("A", "B"), swap("B", "C")))
        result = search(chain("A", "R", "A", "R"), expand, WEIGHTS, alpha=1.3, max_graphs=60)
        return result.path, result.explored, result.stats, result.graph.structural_hash

    assert run() == run()


def test_progress_reports_every_explored_graph() -> None:
    seen: list[SearchProgress] = []
    result = search(chain("R", "Id", "R", "Id", "Id"), Expander((drop_identity,)), WEIGHTS, progress=seen.append)
    assert [p.explored for p in seen] == list(range(1, result.explored + 1))
    costs = [p.best_cost for p in seen]
    assert costs == sorted(costs, reverse=True) and costs[-1] == result.best_cost


def test_incremental_expansion_matches_full_expansion_with_less_matching() -> None:
    graph = chain("A", "Id", "R", "A", "Id", "R", "A", "Id", "R")
    rules = (drop_identity, swap("A", "B"), swap("B", "C"))
    full, incremental = Expander(rules), Expander(rules)
    # alpha so large that both explore the whole (finite) space, whatever the order
    a = search(graph, full, WEIGHTS, alpha=100.0, expansion=Expansion.FULL)
    b = search(graph, incremental, WEIGHTS, alpha=100.0, expansion=Expansion.INCREMENTAL)
    assert a.stop_reason is b.stop_reason is StopReason.EXHAUSTED
    assert (a.best_cost, a.explored, a.stats.candidates) == (b.best_cost, b.explored, b.stats.candidates)
    assert b.applied == {"drop-id": 3, "A->B": 3, "B->C": 3}
    assert all(near is None for near in full.nears)
    assert incremental.nears[0] is None and all(near is not None for near in incremental.nears[1:])
    assert incremental.visited < full.visited / 2


def test_an_expand_that_ignores_near_is_still_correct() -> None:
    graph = chain("A", "Id", "R", "A")
    rules = (drop_identity, swap("A", "B"), swap("B", "C"))
    exact = search(graph, Expander(rules), WEIGHTS, alpha=100.0)
    sloppy = search(graph, Expander(rules, honour_near=False), WEIGHTS, alpha=100.0)
    assert (exact.best_cost, exact.explored) == (sloppy.best_cost, sloppy.explored)
    assert exact.stats == sloppy.stats  # matches away from `near` are dropped, not re-priced


def test_rebased_rewrites_get_fresh_names_when_they_clash() -> None:
    # every add-id picks the name "t__taso0"; applying two of them needs a rename
    result = search(chain("R", "R", "R"), Expander((add_identity,)), OpWeights({"R": 2.0, "Id": -1.0}), max_graphs=4)
    assert ops_of(result.graph).count("Id") >= 2
    result.graph.validate()
    assert len(set(result.graph.producers)) == sum(len(n.outputs) for n in result.graph.nodes.values())


def test_rewrites_that_close_a_cycle_are_skipped() -> None:
    def loop_back(graph: Graph, node_id: int):
        node = graph.nodes[node_id]
        if node_id != min(graph.nodes):
            return None
        last = graph.nodes[max(graph.nodes)]
        looped = Node("Add", "toy", (node.inputs[0], last.outputs[0]), node.outputs)
        return apply_rewrite(graph, "loop", remove=[node_id], add=[looped])

    result = search(chain("R", "R"), Expander((loop_back,)), OpWeights({"R": 2.0, "Add": 0.0}))
    assert result.stats.cyclic == 1 and result.applied == {}


@pytest.mark.parametrize(
    ("options", "message"),
    [({"alpha": 0.9}, "alpha"), ({"time_budget_s": -1}, "time budget"), ({"max_queue": 0}, "max_queue")],
)
def test_bad_options_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        search(chain("R"), Expander(()), WEIGHTS, **options)


def test_queue_is_capped_by_dropping_the_most_expensive() -> None:
    result = search(chain("R", "R", "R", "R"), Expander((add_identity,)), WEIGHTS, alpha=100.0, max_graphs=30, max_queue=3)
    assert result.stats.queue_dropped > 0


# ----- the structural invariant: broken candidates are dropped, never returned ----------


def _drop_last_producer(graph: Graph, node_id: int):
    """A broken rewrite: deletes the producer of the graph output (and claims it is cheap)."""
    node = graph.nodes[node_id]
    if node.outputs[0] not in graph.outputs:
        return None
    return apply_rewrite(graph, "lose-output", remove=[node_id], add=[Node("C", "toy", node.inputs, ("elsewhere",))])


def _read_undefined(graph: Graph, node_id: int):
    """A broken rewrite: the replacement reads a value nothing defines."""
    node = graph.nodes[node_id]
    if node.op_type != "R" or node_id != min(graph.nodes):
        return None
    return apply_rewrite(graph, "read-undefined", remove=[node_id], add=[dataclasses.replace(node, inputs=("ghost",))])


@pytest.mark.parametrize("broken", [_drop_last_producer, _read_undefined])
def test_structurally_broken_candidates_are_dropped_and_counted(broken, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STRICT_ENV, raising=False)
    graph = chain("R", "Id", "R")
    weights = OpWeights({"R": 2.0, "Id": 1.0, "C": 0.0})
    result = search(graph, Expander((broken, drop_identity)), weights, time_budget_s=60)
    assert result.stats.invalid == 2  # at the input and again after drop-id
    assert not structural_defects(result.graph)
    assert ops_of(result.graph) == ["R", "R"] and result.applied == {"drop-id": 1}


def test_strict_invariants_raise_with_the_rule_and_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(InvalidRewriteError, match=r"lose-output broke the graph: graph output '\w+' lost its producer"):
        search(chain("R", "R"), Expander((_drop_last_producer,)), OpWeights({"R": 2.0, "C": 0.0}), time_budget_s=60)


def test_dangling_values_sees_a_second_producer_and_a_stale_reader() -> None:
    graph = chain("R", "R", "R")
    first, second = sorted(graph.nodes)[:2]
    a = graph.nodes[first].outputs[0]
    twin = apply_rewrite(graph, "twin", remove=[], add=[Node("C", "toy", graph.inputs, (a,))])
    assert any("two producers" in p for p in dangling_values(graph, twin))
    assert any("2 producers" in p for p in structural_defects(twin.graph))
    stale = apply_rewrite(graph, "stale", remove=[first], add=[Node("C", "toy", graph.inputs, ("other",))])
    assert dangling_values(graph, stale) == [f"R reads '{a}', whose producer was removed"]
    assert structural_defects(stale.graph) == [f"R reads '{a}', which nothing defines"]
    assert not dangling_values(graph, apply_rewrite(graph, "same", remove=[second], add=[graph.nodes[second]]))


def test_independent_improvements_are_combined_into_one_step() -> None:
    """Eight Identity nodes far apart: one combined candidate drops them all at once."""
    graph = chain(*(["R", "R", "Id"] * 8), "R")
    result = search(graph, Expander((drop_identity,)), WEIGHTS, time_budget_s=60, max_graphs=2)
    assert "Id" not in ops_of(result.graph)
    assert result.applied == {"drop-id": 8}
    assert result.best_cost == WEIGHTS.cost(graph) - 8 * 1.0
