"""Tests for taso.backends measurement: timing, cost cache, backends and the registry.

Timing tests check behaviour (sample counts, consistency of the statistics), never
wall-clock values.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from taso.backends import (
    CACHE_DIR_ENV,
    AnalyticalBackend,
    Backend,
    CostCache,
    CostKey,
    OrtCpuBackend,
    OrtCudaBackend,
    ShapeProfile,
    UnknownBackendError,
    backend_names,
    compare_outputs,
    default_cache_dir,
    get_backend,
    make_inputs,
    measure_interleaved,
    measure_latency,
)
from taso.errors import BackendError, TasoError, UsageError


def _conv_model(channels: int = 8, layers: int = 1) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, weights, current = [], [], "x"
    for i in range(layers):
        weight = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1
        weights.append(numpy_helper.from_array(weight, f"w{i}"))
        nodes.append(helper.make_node("Conv", [current, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        current = f"r{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", channels, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


PROFILE = ShapeProfile.parse("batch=1,h=8,w=8")


@pytest.fixture
def cache(tmp_path: Path) -> CostCache:
    return CostCache(tmp_path / "cache")


# --- timing ---------------------------------------------------------------------------


@pytest.mark.ort
def test_measure_latency_keeps_samples_and_orders_percentiles():
    model = _conv_model()
    stats = measure_latency(model, make_inputs(model, profile=PROFILE), repeats=7, warmup=1)
    assert len(stats.samples_ms) == 7 and all(s > 0 for s in stats.samples_ms)
    assert stats.min_ms <= stats.p10_ms <= stats.p25_ms <= stats.median_ms
    assert stats.median_ms <= stats.p75_ms <= stats.p90_ms and stats.iqr_ms >= 0


@pytest.mark.ort
def test_measure_interleaved_pairs_samples():
    model = _conv_model()
    inputs = make_inputs(model, profile=PROFILE)
    timing = measure_interleaved(model, _conv_model(layers=2), inputs, repeats=6, warmup=1)
    assert len(timing.a.samples_ms) == len(timing.b.samples_ms) == 6
    assert timing.ratio == pytest.approx(timing.b.median_ms / timing.a.median_ms)
    assert timing.paired_ratio_p10 <= timing.paired_ratio <= timing.paired_ratio_p90
    assert timing.speedup == pytest.approx(1 / timing.paired_ratio)


@pytest.mark.ort
def test_timing_errors():
    model = _conv_model()
    with pytest.raises(UsageError):
        measure_latency(model, {}, repeats=0)
    with pytest.raises(BackendError):
        measure_latency(model, {"x": np.ones((1, 3), np.float32)}, repeats=1)


# --- cost cache -----------------------------------------------------------------------


def test_cache_round_trip_and_key_parts(cache: CostCache):
    key = CostKey("ort-cpu", "cpu x2", "1.31", "sig")
    assert not cache.path.exists()  # nothing touches the disk before first use
    assert cache.get(key) is None
    cache.put(key, 1.5)
    cache.put(key, 2.5)  # replaces
    assert cache.get(key) == 2.5 and len(cache) == 1
    for other in (
        CostKey("ort-cuda", "cpu x2", "1.31", "sig"),
        CostKey("ort-cpu", "cpu x4", "1.31", "sig"),
        CostKey("ort-cpu", "cpu x2", "1.30", "sig"),
        CostKey("ort-cpu", "cpu x2", "1.31", "sig2"),
    ):
        assert cache.get(other) is None
    assert CostCache(cache.directory).get(key) == 2.5  # persistent
    cache.clear()
    assert len(cache) == 0


def test_cache_directory_from_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    assert CostCache().path == tmp_path / "env" / "costs.sqlite3"
    monkeypatch.delenv(CACHE_DIR_ENV)
    assert "taso-onnx" in str(default_cache_dir())


def test_unusable_cache_directory_falls_back_to_memory(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CostCache(blocker / "cache")
    with pytest.warns(RuntimeWarning, match="kept in memory"):
        assert cache.get(CostKey("a", "b", "c", "d")) is None
    assert not cache.persistent  # more in tests/test_cost_cache_faults.py


_WORKER = textwrap.dedent(
    """
    import sys
    from taso.backends import CostCache, CostKey
    cache, worker = CostCache(sys.argv[1]), int(sys.argv[2])
    for i in range(60):
        cache.put(CostKey("ort-cpu", "dev", "v", f"w{worker}-{i}"), worker * 1000 + i)
        cache.put(CostKey("ort-cpu", "dev", "v", "shared"), float(worker))
        assert cache.get(CostKey("ort-cpu", "dev", "v", f"w{worker}-{i}")) == worker * 1000 + i
        cache.get(CostKey("ort-cpu", "dev", "v", f"w{(worker + 1) % 4}-{i}"))
    """
)


def test_cache_is_safe_under_concurrent_processes(tmp_path: Path):
    directory = tmp_path / "shared-cache"
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(directory), str(worker)])
        for worker in range(4)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0, 0]
    cache = CostCache(directory)
    assert len(cache) == 4 * 60 + 1
    for worker in range(4):
        assert cache.get(CostKey("ort-cpu", "dev", "v", f"w{worker}-59")) == worker * 1000 + 59
    assert cache.get(CostKey("ort-cpu", "dev", "v", "shared")) in {0.0, 1.0, 2.0, 3.0}


# --- backends and registry ------------------------------------------------------------


def test_registry_names_and_unknown_backend():
    assert backend_names() == ("ort-cpu", "ort-cuda", "analytical")
    assert isinstance(get_backend("ort-cpu"), OrtCpuBackend)
    assert isinstance(get_backend("analytical"), AnalyticalBackend)
    with pytest.raises(UnknownBackendError, match="ort-cpu") as caught:
        get_backend("tensorrt")
    assert isinstance(caught.value, TasoError) and isinstance(caught.value, ValueError)


@pytest.mark.ort
@pytest.mark.parametrize("backend", [OrtCpuBackend(cache=None), AnalyticalBackend()])
def test_backends_follow_the_protocol_and_agree(backend: Backend):
    assert isinstance(backend, Backend) and backend.name and backend.device
    model = _conv_model()
    inputs = make_inputs(model, profile=PROFILE)
    reference = OrtCpuBackend(cache=None).run(model, inputs)
    assert compare_outputs(reference, backend.run(model, inputs)).passed
    assert backend.cost_of(model, profile=PROFILE) > 0


@pytest.mark.ort
def test_ort_cpu_cost_uses_the_cache(cache: CostCache):
    backend = OrtCpuBackend(cache=cache, repeats=3, warmup=0)
    model = _conv_model()
    measured = backend.cost_of(model, profile=PROFILE, signature="conv8")
    assert measured > 0 and len(cache) == 1
    key = CostKey("ort-cpu", backend.device, ort.__version__, f"conv8|profile={PROFILE}")
    assert cache.get(key) == measured
    cache.put(key, 123.0)
    assert backend.cost_of(model, profile=PROFILE, signature="conv8") == 123.0
    backend.cost_of(model, profile=PROFILE)  # no signature: measured, not cached
    assert len(cache) == 1


@pytest.mark.ort
def test_ort_cpu_cost_of_failing_model_raises_backend_error(cache: CostCache):
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph(
        [node],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(BackendError):
        OrtCpuBackend(cache=cache).cost_of(model, signature="bad")
    assert len(cache) == 0


def test_analytical_cost_ranks_bigger_models_higher():
    backend = AnalyticalBackend()
    small = backend.cost_of(_conv_model(channels=8), profile=PROFILE)
    deeper = backend.cost_of(_conv_model(channels=8, layers=3), profile=PROFILE)
    wider = backend.cost_of(_conv_model(channels=32), profile=PROFILE)
    assert small < deeper and small < wider
    larger_input = backend.cost_of(
        _conv_model(channels=32), profile=ShapeProfile.parse("h=64,w=64")
    )
    assert larger_input > wider


def test_analytical_counts_matmul_and_conv_flops():
    from taso.backends.analytical import infer_shapes, node_flops

    model = _conv_model(channels=4)
    shapes = infer_shapes(model, {"x": (2, 4, 5, 5)})
    conv = model.graph.node[0]
    assert node_flops(conv, shapes) == 2 * (2 * 4 * 5 * 5) * (4 * 3 * 3)
    matmul = helper.make_node("MatMul", ["a", "b"], ["c"])
    graph = helper.make_graph(
        [matmul],
        "mm",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 7, 5]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [5, 11]),
        ],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
    )
    mm_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mm_shapes = infer_shapes(mm_model, {"a": (3, 7, 5), "b": (5, 11)})
    assert node_flops(matmul, mm_shapes) == 2 * 3 * 7 * 11 * 5


def test_cuda_backend_unavailable_raises_cleanly():
    if OrtCudaBackend.available():
        pytest.skip("a CUDA device is available")
    with pytest.raises(BackendError, match="ort-cuda is unavailable"):
        OrtCudaBackend()
    with pytest.raises(BackendError):
        get_backend("ort-cuda")


@pytest.mark.ort
@pytest.mark.gpu
def test_cuda_backend_runs_and_measures(cache: CostCache):
    if not OrtCudaBackend.available():
        pytest.skip("needs onnxruntime-gpu and a CUDA device")
    backend = OrtCudaBackend(cache=cache, repeats=3, warmup=1)
    model = _conv_model()
    inputs = make_inputs(model, profile=PROFILE)
    reference = OrtCpuBackend(cache=None).run(model, inputs)
    assert compare_outputs(reference, backend.run(model, inputs)).passed
    assert backend.cost_of(model, profile=PROFILE, signature="conv") > 0


def test_public_api_is_pinned():
    import taso.backends

    assert sorted(taso.backends.__all__) == sorted(
        [
            "CACHE_DIR_ENV",
            "DEFAULT_DIM",
            "AnalyticalBackend",
            "AnalyticalCostModel",
            "KernelCostModel",
            "KernelRecord",
            "CostSource",
            "MeasuredCostModel",
            "RegionRecord",
            "Timing",
            "Backend",
            "Comparison",
            "CostCache",
            "CostKey",
            "GraphOptimization",
            "InterleavedTiming",
            "LatencyStats",
            "ModelSource",
            "ModelWithData",
            "OrtCpuBackend",
            "OrtCudaBackend",
            "OutputComparison",
            "OutputDeviation",
            "OutputStatus",
            "RoundingComparison",
            "RoundingDeviation",
            "SemanticComparison",
            "ShapeProfile",
            "Spinning",
            "Tolerance",
            "UnknownBackendError",
            "backend_names",
            "compare_outputs",
            "compare_rounding",
            "compare_semantics",
            "default_cache_dir",
            "get_backend",
            "make_inputs",
            "max_ir_version",
            "measure_interleaved",
            "measure_latency",
            "nchwc_block",
            "resolve_shapes",
            "run_model",
        ]
    )
    assert all(hasattr(taso.backends, name) for name in taso.backends.__all__)
