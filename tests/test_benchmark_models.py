"""Tests for the benchmark model builders in `benchmarks.models`.

Small variants: valid ONNX (full check), run on ONNX Runtime with finite,
non-constant outputs, and build to the same bytes twice. Full variants
(marked slow): parameter counts against the published figures.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from benchmarks.models import MODELS, Origin, Size, build_cached, cache_path, parameter_count

ARCHITECTURES = {
    "resnet50",
    "resnext50_32x4d",
    "inception_v3",
    "squeezenet1_1",
    "nasnet_a_mobile",
    "nasrnn",
    "bert_base",
}
CONVERTER_MODELS = {
    "mobilenetv3_converted", "transformer_exported", "crnn_converted", "yolov8n_exported", "pplcnet_converted",
}
# Relative tolerance against the published count; CRNN's figure has two significant digits,
# PP-LCNet's three.
TOLERANCE = {"crnn_converted": 0.01, "pplcnet_converted": 0.005}


def _session(model: onnx.ModelProto, threads: int = 1) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for value in model.graph.input:
        shape = [dim.dim_value for dim in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    if "attention_mask" in feeds:  # a 0/1 mask, as tokenizers produce
        feeds["attention_mask"] = np.ones_like(feeds["attention_mask"])
    return feeds


@pytest.fixture(scope="module", params=sorted(MODELS))
def small(request: pytest.FixtureRequest) -> tuple[str, onnx.ModelProto]:
    return request.param, MODELS[request.param].build(Size.SMALL)


def test_registry_lists_every_model() -> None:
    assert set(MODELS) == ARCHITECTURES | CONVERTER_MODELS
    for name, builder in MODELS.items():
        expected = Origin.ARCHITECTURE if name in ARCHITECTURES else Origin.CONVERTER
        assert builder.origin is expected, name


def test_small_passes_full_check(small: tuple[str, onnx.ModelProto]) -> None:
    _, model = small
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 10
    assert [(op.domain, op.version) for op in model.opset_import] == [("", 17)]


@pytest.mark.ort
def test_small_runs_with_finite_varied_outputs(small: tuple[str, onnx.ModelProto]) -> None:
    name, model = small
    outputs = _session(model).run(None, _feeds(model))
    for output in outputs:
        assert np.isfinite(output).all(), name
        assert output.std() > 1e-4, f"{name}: output is (nearly) constant"
        assert np.abs(output).max() < 1e3, f"{name}: output is unbounded"


def test_small_is_deterministic(small: tuple[str, onnx.ModelProto]) -> None:
    name, model = small
    assert MODELS[name].build(Size.SMALL).SerializeToString() == model.SerializeToString()


def test_build_cached_writes_once(tmp_path) -> None:
    path = build_cached("squeezenet1_1", Size.SMALL, cache_dir=tmp_path)
    assert path == cache_path("squeezenet1_1", Size.SMALL, tmp_path)
    assert (
        onnx.load(path).SerializeToString()
        == MODELS["squeezenet1_1"].build(Size.SMALL).SerializeToString()
    )
    stamp = path.stat().st_mtime_ns
    assert build_cached("squeezenet1_1", Size.SMALL, cache_dir=tmp_path) == path
    assert path.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_build_cached_rejects_unknown_name(tmp_path) -> None:
    with pytest.raises(KeyError, match="unknown benchmark model"):
        build_cached("alexnet", Size.SMALL, cache_dir=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_parameter_count_matches_published(name: str) -> None:
    builder = MODELS[name]
    model = builder.build(Size.FULL)
    count = parameter_count(model)
    print(
        f"\n{name}: {count:,} parameters, published {builder.published_parameters:,} "
        f"({builder.parameters_source}); {len(model.graph.node)} nodes"
    )
    assert count == pytest.approx(builder.published_parameters, rel=TOLERANCE.get(name, 0.0))


@pytest.mark.ort
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_runs_with_finite_outputs(name: str) -> None:
    model = MODELS[name].build(Size.FULL)
    onnx.checker.check_model(model, full_check=True)
    for output in _session(model, threads=2).run(None, _feeds(model)):
        assert np.isfinite(output).all(), name
        assert output.std() > 1e-4, name
