"""Graph cost models: region extraction, cached differential measurement, analytical."""

from __future__ import annotations

import dataclasses

import onnx
import pytest

from benchmarks._variants import all_variants, double_relu, relu_as_max, split_conv
from taso._onnx_import import import_model
from taso.backends import CostCache, run_model
from taso.backends._region import extract_region, fusion_closure, neighbourhood
from taso.backends.graph_cost import (
    AnalyticalCostModel,
    CostSource,
    Folds,
    MeasuredCostModel,
    Timing,
)
from taso.backends.inputs import make_inputs
from taso.ir import INTERNAL_DOMAIN
from taso.search import Rewrite
from tests.helpers.models import conv_net

FAST = Timing(target_s=0.01, min_repeats=5, max_repeats=50, warmup=1)


def _graph(channels: int = 16, batch: int | str = 1):
    return import_model(conv_net(channels=channels, batch=batch))


def _first(graph, site) -> Rewrite:
    return next(r for i in sorted(graph.nodes) if (r := site(graph, i)) is not None)


@pytest.mark.ort
def test_regions_are_valid_onnx_that_runs_on_ort(tmp_path) -> None:
    graph = _graph()
    model = MeasuredCostModel(cache=CostCache(tmp_path), timing=FAST)
    shapes = model.shapes_for(graph).shape
    for rewrite in all_variants(graph):
        for region in model.regions(graph, rewrite):
            onnx.checker.check_model(region.model, full_check=True)
            outputs = run_model(region.model, make_inputs(region.model))
            assert outputs and all(v.size for v in outputs.values())
    whole = extract_region(graph, graph.nodes, shapes)
    assert [o.name for o in whole.model.graph.output] == ["y"]


def test_region_border_is_shared_by_parent_and_child(tmp_path) -> None:
    graph = _graph()
    rewrite = _first(graph, relu_as_max)
    before, after = MeasuredCostModel(cache=CostCache(tmp_path), hops=1).regions(graph, rewrite)
    assert before.node_ids - rewrite.removed == after.node_ids - rewrite.added
    assert fusion_closure(graph, neighbourhood(graph, rewrite.removed, 1)) <= before.node_ids


def test_a_region_reaches_back_to_the_conv_its_border_would_fuse_into() -> None:
    graph = _graph()
    ids = {node.name: i for i, node in graph.nodes.items()}
    by_name = lambda names: {ids[n] for n in names}  # noqa: E731
    # conv1 -> relu1 -> conv2 -> add -> gap: chains stop at the convs (fusion anchors)
    assert fusion_closure(graph, by_name(["relu1"])) == by_name(["conv1", "relu1"])
    assert fusion_closure(graph, by_name(["add"])) == by_name(["conv2", "add", "gap"])
    assert fusion_closure(graph, by_name(["add"]), steps=0) == by_name(["add"])


def test_symbolic_dims_are_filled_from_the_profile(tmp_path) -> None:
    from taso.backends import ShapeProfile

    graph = _graph(batch="N")
    model = MeasuredCostModel(profile=ShapeProfile.of(dims={"N": 2}), cache=CostCache(tmp_path), timing=FAST)
    before, _ = model.regions(graph, _first(graph, relu_as_max))
    dims = [d.dim_value for d in before.model.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == 2 and all(d > 0 for d in dims)


@pytest.mark.ort
def test_second_pricing_is_a_cache_hit(tmp_path) -> None:
    graph = _graph()
    rewrite = _first(graph, split_conv)
    first = MeasuredCostModel(cache=CostCache(tmp_path), timing=FAST)
    cost = first.cost(graph)
    child = first.cost_after(graph, cost, rewrite)
    assert {r.source for r in first.records} == {CostSource.MEASURED}
    second = MeasuredCostModel(cache=CostCache(tmp_path), timing=FAST)
    assert second.cost(graph) == cost
    assert second.cost_after(graph, cost, rewrite) == child
    assert {r.source for r in second.records} == {CostSource.CACHED}
    assert len(CostCache(tmp_path)) == 3  # the whole graph and two regions


@pytest.mark.ort
def test_incremental_cost_is_parent_plus_region_delta(tmp_path) -> None:
    graph = _graph()
    model = MeasuredCostModel(cache=CostCache(tmp_path), timing=FAST)
    cost = model.cost(graph)
    rewrite = _first(graph, double_relu)
    child = model.cost_after(graph, cost, rewrite)
    parent_region, child_region = model.records[-2:]
    delta = child_region.ms - parent_region.ms
    if abs(delta) < FAST.noise_floor * parent_region.ms:  # below the noise floor: priced 0
        delta = 0.0
    assert child == pytest.approx(cost + delta)
    assert child_region.nodes == parent_region.nodes + 1


def test_unmeasurable_regions_fall_back_to_the_analytical_delta(tmp_path) -> None:
    graph = _graph()
    rewrite = _first(graph, relu_as_max)
    index = min(rewrite.added)
    internal = dataclasses.replace(rewrite.graph.nodes[index], domain=INTERNAL_DOMAIN)
    nodes = {**rewrite.graph.nodes, index: internal}
    odd = Rewrite("internal", dataclasses.replace(rewrite.graph, nodes=nodes), rewrite.removed, rewrite.added)
    model = MeasuredCostModel(cache=CostCache(tmp_path), timing=FAST)
    delta = model.delta(graph, odd)
    assert model.records[-1].source is CostSource.ANALYTICAL
    assert "not a constant" in model.records[-1].note  # an internal op over an activation
    assert delta == pytest.approx(model.fallback.delta(graph, odd))


def test_analytical_model_ranks_a_bigger_conv_as_costlier() -> None:
    small, big = _graph(channels=8), _graph(channels=64)
    assert AnalyticalCostModel().cost(big) > AnalyticalCostModel().cost(small)


def test_analytical_model_is_exactly_incremental() -> None:
    graph = _graph()
    model = AnalyticalCostModel()
    cost = model.cost(graph)
    for rewrite in all_variants(graph):
        fresh = AnalyticalCostModel().cost(rewrite.graph)
        assert model.cost_after(graph, cost, rewrite) == pytest.approx(fresh)


def _node_cost(graph, op_type: str, folds: Folds = Folds.ORT) -> float:
    model = AnalyticalCostModel(folds=folds)
    return sum(model.node_cost(graph, n) for n in graph.nodes.values() if n.op_type == op_type)


def test_analytical_model_prices_what_ort_folds_into_a_conv_as_free() -> None:
    from onnx import helper as h

    from tests.helpers.graphs import make_graph, weight

    def net(first: str, *, second_reader: bool = False):  # noqa: ANN202
        nodes = [h.make_node(first, ["x", "w"] if first == "Conv" else ["x"], ["c"]),
                 h.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])]
        outputs = ["y"]
        if second_reader:
            nodes.append(h.make_node("Relu", ["c"], ["z"]))
            outputs.append("z")
        inits = [weight("w", (4, 4, 1, 1), 1), *(weight(n, (4,), i) for i, n in enumerate("sbmv", 2))]
        return make_graph(nodes, {"x": [1, 4, 8, 8]}, outputs, inits)

    assert _node_cost(net("Conv"), "BatchNormalization") == 0.0
    assert _node_cost(net("Relu"), "BatchNormalization") > 0.0
    assert _node_cost(net("Conv", second_reader=True), "BatchNormalization") > 0.0
    assert _node_cost(_graph(), "Add") == 0.0  # conv_net's per-channel Add after a Conv
    assert _node_cost(net("Conv"), "BatchNormalization", Folds.NONE) > 0.0  # a plain roofline


def test_analytical_model_with_ort_folds_is_exactly_incremental() -> None:
    graph = _graph()  # its per-channel Add is free until split-conv puts a Concat before it
    model = AnalyticalCostModel(folds=Folds.ORT)
    cost = model.cost(graph)
    for rewrite in all_variants(graph):
        fresh = AnalyticalCostModel(folds=Folds.ORT).cost(rewrite.graph)
        assert model.cost_after(graph, cost, rewrite) == pytest.approx(fresh)


def test_analytical_model_prices_narrow_groups_below_peak() -> None:
    from taso.substitutions.generate._axiom_families import regroup_rule
    from taso.substitutions.matching import apply, find_matches
    from tests.helpers.graphs import grouped_net

    for channels, group, width, cheaper in ((4, 8, 16, True), (16, 4, 32, False)):
        model = AnalyticalCostModel()  # one per graph family: it infers shapes once
        graph = grouped_net(channels, group, size=64)  # compute-bound
        rule = regroup_rule(width, depthwise=False)
        wide = apply(graph, rule, find_matches(graph, rule)[0])
        # 4 -> 16 wide: 4x the FLOPs, but in full NCHWc blocks; 16 -> 32: just 2x the FLOPs
        assert (model.cost(wide) < model.cost(graph)) is cheaper
