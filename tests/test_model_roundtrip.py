"""`optimize_onnx(time_budget_s=0)` on every benchmark and example model: a lossless round trip.

Small variants run in CI; `-m slow` runs the full-size models (5-340 MB each).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest

import taso
from benchmarks.models import MODELS, Size, build_cached
from taso.backends import make_inputs, run_model

pytestmark = pytest.mark.ort

ROOT = Path(__file__).parent.parent


def _example_models() -> dict[str, onnx.ModelProto]:
    spec = importlib.util.spec_from_file_location("make_example_model", ROOT / "examples" / "make_example_model.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return {"example_cnn": module.build()}


def _assert_lossless(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    result = taso.optimize_onnx(source, out, time_budget_s=0)
    original = onnx.load(str(source))
    written = onnx.load(str(out))
    assert list(written.graph.node) == list(original.graph.node)
    assert [t.name for t in written.graph.initializer] == [t.name for t in original.graph.initializer]
    assert result.report.check is taso.CheckStatus.SKIPPED  # nothing applied: compared below, bit for bit
    inputs = make_inputs(source)
    expected, got = run_model(source, inputs), run_model(out, inputs)
    for name in expected:
        assert expected[name].tobytes() == got[name].tobytes(), name
    assert all(np.isfinite(v).all() for v in got.values())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_small_benchmark_model_roundtrips_bit_identically(name: str, tmp_path: Path) -> None:
    _assert_lossless(build_cached(name, Size.SMALL, cache_dir=tmp_path / "cache"), tmp_path)


@pytest.mark.parametrize("name", sorted(_example_models()))
def test_example_model_roundtrips_bit_identically(name: str, tmp_path: Path) -> None:
    source = tmp_path / f"{name}.onnx"
    onnx.save_model(_example_models()[name], source)
    _assert_lossless(source, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_benchmark_model_roundtrips_bit_identically(name: str, tmp_path: Path) -> None:
    _assert_lossless(build_cached(name, Size.FULL), tmp_path)
