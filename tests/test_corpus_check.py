"""`python -m benchmarks.corpus check` flags degenerate models, and stale weights rebuild.

A corpus model with random weights is degenerate when, on standard normal inputs, a
float output is mostly saturated (at its own min or max), non-finite, or huge: numeric
checks on it amplify rounding differences and it resembles no trained model. The check
warns about it (exit status 0). A cached model made before the weights recipe changed is
rebuilt even though the converter versions are the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.corpus import BY_NAME, __main__, _build, _cache, _verify
from benchmarks.corpus._registry import FAMILIES

SHAPE = [1, 4, 8, 8]


def _sigmoid_model(gain: float) -> onnx.ModelProto:
    """y = Sigmoid(gain * x): a large gain saturates it the way an unnormalized net does."""
    scale = numpy_helper.from_array(np.array(gain, np.float32), "gain")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "gain"], ["z"]), helper.make_node("Sigmoid", ["z"], ["y"])],
        "sigmoid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
        [scale],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _manifest(name: str, versions: dict[str, str], weights: str = "") -> _cache.Manifest:
    return _cache.Manifest(
        name=name, converter="onnx.helper", versions=versions, opset={"ai.onnx": 17},
        ir_version=8, ir_version_written=8, input_shapes={"x": SHAPE}, source="tests",
        build_seconds=0.0, weights=weights,
    )


def _cache_with(root: Path, models: dict[str, onnx.ModelProto]) -> Path:
    for name, model in models.items():
        folder = _cache.entry_dir(root, name)
        folder.mkdir(parents=True)
        onnx.save(model, folder / _cache.MODEL_FILE)
        _cache.write_manifest(folder, _manifest(name, {"onnx": onnx.__version__}))
    return root


def test_a_mostly_saturated_output_is_degenerate() -> None:
    values = np.concatenate([np.zeros(40), np.ones(30), np.linspace(0.1, 0.9, 30)])
    stats = _verify.output_stats("y", values.astype(np.float32))
    assert stats is not None and stats.saturated == pytest.approx(0.7)
    assert "saturated" in (_verify.degenerate_reason([stats]) or "")


def test_a_constant_output_is_degenerate() -> None:
    stats = _verify.output_stats("y", np.full((2, 50), 3.0, np.float32))
    assert stats is not None and stats.saturated == 1.0
    assert _verify.degenerate_reason([stats]) is not None


def test_non_finite_and_huge_outputs_are_degenerate() -> None:
    rng = np.random.default_rng(0)
    with_nan = rng.standard_normal(100).astype(np.float32)
    with_nan[3] = np.nan
    huge = rng.standard_normal(100).astype(np.float32) * 1e5
    for values, word in ((with_nan, "non-finite"), (huge, "max |y|")):
        stats = _verify.output_stats("y", values)
        assert stats is not None
        assert word in (_verify.degenerate_reason([stats]) or "")


def test_a_spread_out_output_is_not_degenerate() -> None:
    softmax = np.random.default_rng(0).dirichlet(np.ones(1000), size=4).astype(np.float32)
    stats = _verify.output_stats("probabilities", softmax)
    assert stats is not None and stats.saturated < 0.01 and stats.finite
    assert _verify.degenerate_reason([stats]) is None


def test_integer_and_tiny_outputs_are_not_judged() -> None:
    assert _verify.output_stats("labels", np.zeros(100, np.int64)) is None
    assert _verify.output_stats("score", np.array([0.5], np.float32)) is None


@pytest.mark.ort
def test_check_warns_about_a_degenerate_model_without_failing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = _cache_with(tmp_path, {"healthy": _sigmoid_model(1.0), "saturated": _sigmoid_model(1e3)})
    assert __main__.main(["check", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if "degenerate" in line]
    assert len(warnings) == 1 and "saturated" in warnings[0]
    rows = {row.name: row for row in map(lambda found: _verify.check(*found),
                                          _cache.cached_entries(cache))}
    assert rows["healthy"].warning is None and rows["saturated"].warning is not None
    assert rows["saturated"].problem is None and rows["saturated"].ort_ms is not None
    assert rows["saturated"].saturated > 0.5 > rows["healthy"].saturated


def test_a_model_made_with_other_weights_is_rebuilt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    entry = BY_NAME["ppocrv4_det_p2o1"]
    versions = {"onnx": "1", "paddle2onnx": "1.2.0"}
    monkeypatch.setattr(_build, "_versions", lambda entry, cache: dict(versions))
    monkeypatch.setattr(_build, "_convert", lambda entry, cache, versions: _build.BuildResult(
        entry.name, _build.Outcome.BUILT, "converted"))
    folder = _cache.entry_dir(tmp_path, entry.name)
    folder.mkdir()
    (folder / _cache.MODEL_FILE).write_bytes(b"")
    _cache.write_manifest(folder, _manifest(entry.name, versions))  # made before the recipe
    assert _build.build_entry(entry, tmp_path).outcome is _build.Outcome.BUILT
    current = _manifest(entry.name, versions, FAMILIES[entry.family].weights)
    _cache.write_manifest(folder, current)
    assert _build.build_entry(entry, tmp_path).outcome is _build.Outcome.CACHED


def test_every_family_says_how_its_weights_were_made() -> None:
    for family, info in FAMILIES.items():
        assert info.weights, family
    assert "BatchNorm statistics re-estimated" in FAMILIES[BY_NAME["tv_resnet18"].family].weights
    assert "LearnableAffineBlock" in FAMILIES[BY_NAME["ppocrv4_det"].family].weights


def test_an_old_manifest_without_weights_still_reads(tmp_path: Path) -> None:
    folder = _cache.entry_dir(tmp_path, "old")
    folder.mkdir()
    (folder / _cache.MODEL_FILE).write_bytes(b"")
    fields = json.loads(_manifest("old", {"onnx": "1"}).to_json())
    del fields["weights"]
    (folder / _cache.MANIFEST_FILE).write_text(json.dumps(fields))
    manifest = _cache.read_manifest(tmp_path, "old")
    assert manifest is not None and manifest.weights == ""
