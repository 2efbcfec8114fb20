"""The kernel cost model: ORT's compiled graph, its inferred shapes, pricing from the cache.

Behaviour only, never wall-clock values: shapes agree with what ORT's profiler reports,
graphs ORT compiles alike cost the same, a warm cache prices without running anything.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.models import MODELS, Size
from taso._onnx_import import import_model
from taso.backends import CostCache, kernel_cost
from taso.backends._kernel_shapes import KernelShapeError, infer_kernel_shapes
from taso.backends._kernels import (
    KernelGraph,
    KernelProfile,
    ProfileRuns,
    compile_kernels,
    fastest_runs,
    nchwc_block,
    profile_kernels,
)
from taso.backends.inputs import make_inputs
from taso.backends.kernel_cost import KernelCostModel

pytestmark = pytest.mark.ort

_QUICK = ProfileRuns(target_ms=20.0, min_runs=3, max_runs=10, warmup=1)


def _conv_model(*, mul_after: bool, relus: int = 1, channels: int = 32) -> onnx.ModelProto:
    """Conv [-> Mul by a per-channel constant] -> Relu x `relus`."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1, "w")
    s = numpy_helper.from_array(rng.uniform(0.5, 1.5, (channels, 1, 1)).astype(np.float32), "s")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    current = "c"
    if mul_after:
        nodes.append(helper.make_node("Mul", ["c", "s"], ["m"]))
        current = "m"
    for k in range(relus):
        nodes.append(helper.make_node("Relu", [current], [f"r{k}"]))
        current = f"r{k}"
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 28, 28])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, None)], [w, s],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("name", ["mobilenetv3_converted", "yolov8n_exported", "transformer_exported", "nasrnn"])
def test_inferred_shapes_give_the_signatures_the_profiler_reports(name: str, tmp_path) -> None:
    model = MODELS[name].build(Size.SMALL)
    inferred = compile_kernels(model, tmp_path)
    assert inferred.shapes_known
    unsigned = KernelGraph(inferred.kernels, inferred.path, shapes_known=False)
    profile = profile_kernels(unsigned, make_inputs(model), runs=_QUICK)
    assert {k.name: k.signature for k in inferred.kernels} == dict(profile.signatures)
    assert set(profile.kernel_ms) == {k.name for k in inferred.kernels}


def test_nchwc_reorders_pad_channels_to_the_block(tmp_path) -> None:
    block = nchwc_block()
    assert block in (1, 8, 16)
    kernels = compile_kernels(_conv_model(mul_after=False, channels=20), tmp_path)
    structure = onnx.load(str(kernels.path), load_external_data=False)
    shapes = infer_kernel_shapes(structure, block)
    if block > 1:
        reordered = [n for n in structure.graph.node if n.op_type == "ReorderInput"]
        assert reordered and shapes[reordered[0].output[0]].shape[1] == -(-20 // block) * block


def test_unknown_shapes_are_refused_not_guessed() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    node = helper.make_node("NonZero", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(KernelShapeError):
        infer_kernel_shapes(model, 16)


def test_a_graph_without_inferable_shapes_is_priced_from_the_profile(tmp_path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Cast", ["nz"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    cost_model = KernelCostModel(cache=CostCache(tmp_path), runs=_QUICK)
    assert cost_model.cost(import_model(model)) > 0
    assert cost_model.records[-1].new_kernels == 2


def test_graphs_ort_compiles_alike_cost_the_same(tmp_path) -> None:
    """ORT folds a per-channel Mul into the Conv before it: the same kernels, the same cost."""
    cost_model = KernelCostModel(cache=CostCache(tmp_path), runs=_QUICK)
    plain = cost_model.cost(import_model(_conv_model(mul_after=False)))
    with_mul = cost_model.cost(import_model(_conv_model(mul_after=True)))
    assert with_mul == plain
    assert cost_model.records[-1].new_kernels == 0  # priced from the first graph's kernels


def test_a_warm_cache_prices_without_running(tmp_path) -> None:
    graph = import_model(_conv_model(mul_after=False, relus=3))
    first = KernelCostModel(cache=CostCache(tmp_path), runs=_QUICK)
    cost = first.cost(graph)
    assert first.records[-1].new_kernels > 0
    again = KernelCostModel(cache=CostCache(tmp_path), runs=_QUICK)
    assert again.cost(graph) == cost
    assert again.records[-1].new_kernels == 0


def test_more_kernels_cost_more(tmp_path) -> None:
    cost_model = KernelCostModel(cache=CostCache(tmp_path), runs=_QUICK)
    one = cost_model.cost(import_model(_conv_model(mul_after=False, relus=1)))  # Relu fused into the Conv
    three = cost_model.cost(import_model(_conv_model(mul_after=False, relus=3)))  # two Relus run on their own
    assert three > one


def test_a_kernel_costs_its_fastest_run() -> None:
    """Another process slows some runs of a kernel and never speeds one up: the fastest
    of the timed runs (the warm-up runs before them left out) is the least disturbed."""
    durations = {"conv": [0.1, 2.0, 1.0, 5.0, 1.1, 4.0], "relu": [0.5, 0.01, 0.3, 0.3, 0.02, 0.3]}
    assert fastest_runs(durations, timed=5) == {"conv": 1.0, "relu": 0.01}


def test_profiles_span_their_target_time_within_a_bound_on_kernel_events() -> None:
    """A fast graph is run often enough that its fastest runs span `target_ms` (one slow
    stretch cannot cover them all); a graph of many kernels within the trace's bound."""
    runs = ProfileRuns(target_ms=100.0, min_runs=5, max_runs=60, max_kernel_runs=3000)
    assert runs.runs_for(0.8, kernels=100) == 30  # 3000 kernel runs / 100 kernels
    assert runs.runs_for(4.0, kernels=50) == 25  # 100 ms / 4 ms
    assert runs.runs_for(0.1, kernels=20) == 60  # at most max_runs
    assert runs.runs_for(17.0, kernels=360) == 5  # at least min_runs


def test_a_kernel_price_does_not_depend_on_the_rest_of_its_profile(tmp_path, monkeypatch) -> None:
    """A candidate's new kernels are measured in another profile than the kernels they
    replace. Whatever else that profile holds, each new kernel adds its own time, and a
    machine running the whole profile twice as slow is read off the known kernels: two
    extra Relus cost two Relus."""
    slowdown = [1.0]

    def fake_profile(graph: KernelGraph, inputs: object, **_: object) -> KernelProfile:
        times = {"com.microsoft:FusedConv": 1.0, ":Relu": 0.01}
        return KernelProfile({k.name: times.get(k.op, 0.05) * slowdown[0] for k in graph.kernels}, {})

    monkeypatch.setattr(kernel_cost, "profile_kernels", fake_profile)
    cost_model = KernelCostModel(cache=CostCache(tmp_path), runs=_QUICK)
    one = cost_model.cost(import_model(_conv_model(mul_after=False, relus=1)))  # Relu fused into the Conv
    slowdown[0] = 2.0
    three = cost_model.cost(import_model(_conv_model(mul_after=False, relus=3)))  # two Relus on their own
    assert cost_model.records[-1].new_kernels == 1
    assert three - one == pytest.approx(0.02)


def _upsampling_model(how: str, opset: int, mode: str) -> onnx.ModelProto:
    """Conv (32 channels: NCHWc) -> Resize by `scales` or `sizes`, or Upsample by its
    `scales` input (opset 9) or attribute (opset 7): x2 on both spatial axes."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.1, "w")]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    sizes = numpy_helper.from_array(np.array([1, 32, 40, 40], np.int64), "sizes")
    empty = numpy_helper.from_array(np.array([], np.float32), "empty")  # roi; no scales (opset 11)
    upsample = {
        "resize-scales": (["c", "empty", "scales"], [scales, empty], {}),
        "resize-sizes": (["c", "empty", "empty", "sizes"], [sizes, empty], {}),
        "upsample-input": (["c", "scales"], [scales], {}),
        "upsample-attribute": (["c"], [], {"scales": [1.0, 1.0, 2.0, 2.0]}),
    }
    inputs, constants, attributes = upsample[how]
    op = "Resize" if how.startswith("resize") else "Upsample"
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node(op, inputs, ["y"], mode=mode, **attributes),
    ]
    graph = helper.make_graph(
        nodes, "upsampling", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 20, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights + constants,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize(
    ("how", "opset", "mode"),
    [
        ("resize-scales", 11, "nearest"),
        ("resize-scales", 13, "linear"),
        ("resize-sizes", 11, "linear"),
        ("resize-sizes", 13, "nearest"),
        ("upsample-input", 9, "nearest"),
        ("upsample-input", 9, "linear"),
        ("upsample-attribute", 7, "nearest"),
    ],
)
def test_resize_and_upsample_after_an_nchwc_conv_are_priced(how: str, opset: int, mode: str, tmp_path) -> None:
    """Detectors and FPN heads upsample by four scales; ORT turns some of these into its
    NCHWc Upsample, whose shapes used to crash the kernel graph's shape inference."""
    model = _upsampling_model(how, opset, mode)
    assert compile_kernels(model, tmp_path).shapes_known
    cost_model = KernelCostModel(cache=CostCache(tmp_path / "cache"), runs=_QUICK)
    assert cost_model.cost(import_model(model)) > 0


def _reorder_output_model(**attributes: object) -> onnx.ModelProto:
    """ReorderInput -> ReorderOutput, as ORT's NCHWc layout writes them, with `attributes`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 4, 4])
    nodes = [
        helper.make_node("ReorderInput", ["x"], ["b"], domain="com.microsoft.nchwc"),
        helper.make_node("ReorderOutput", ["b"], ["y"], domain="com.microsoft.nchwc", **attributes),
    ]
    graph = helper.make_graph(nodes, "reorders", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft.nchwc", 1)]
    )


def test_a_rule_that_meets_an_unexpected_attribute_form_raises_kernel_shape_error() -> None:
    """The caller's fallback (learning shapes from ORT's profiler) catches KernelShapeError
    only: a rule's KeyError or ValueError would crash the pricing instead."""
    assert infer_kernel_shapes(_reorder_output_model(channels=32), 16)["y"].shape == (1, 32, 4, 4)
    with pytest.raises(KernelShapeError, match="ReorderOutput"):
        infer_kernel_shapes(_reorder_output_model(), 16)  # no `channels`
