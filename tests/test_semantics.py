"""Outputs that differ from the original as ORT runs it, judged against what both models
compute unoptimized (backends/semantics.py), and the check's use of it (pipeline/_choose.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper as nh

from taso.backends import compare_semantics
from taso.backends.semantics import (
    MAX_RATIO,
    MEAN_RATIO,
    OutputDeviation,
    SemanticComparison,
    output_deviations,
)
from taso.ir import Graph
from taso.pipeline import _choose
from taso.pipeline._rewriting import SearchOutcome
from taso.report import CheckStatus, Decision
from tests.helpers.choosing import choose_on, search_with_a_no_op
from tests.helpers.qdq import qdq_pair

STEP = 0.08  # one quantization step of the output


def quantized_outputs(seed: int = 0) -> np.ndarray:
    return np.round(np.random.default_rng(seed).standard_normal((2, 50)) / STEP) * STEP


def moved(values: np.ndarray, where: slice, steps: float) -> np.ndarray:
    out = values.copy()
    out.reshape(-1)[where] += steps * STEP
    return out


def deviation(spec: np.ndarray, original: np.ndarray, candidate: np.ndarray) -> OutputDeviation:
    (only,) = output_deviations({"y": spec}, {"y": original}, {"y": candidate})
    return only


# ----- the bounds ------------------------------------------------------------------------------
def test_a_candidate_as_far_from_the_spec_as_the_original_passes() -> None:
    spec = quantized_outputs()
    original = moved(spec, slice(0, 30), 1)  # ORT's kernels: 30 of 100 elements a step off
    candidate = moved(spec, slice(5, 35), 1)  # other elements, as many
    assert deviation(spec, original, candidate).passed
    assert deviation(spec, original, moved(candidate, slice(40, 41), 0.5)).passed  # half a step more at one


def test_a_candidate_further_from_the_spec_than_the_original_is_refused() -> None:
    spec = quantized_outputs()
    original = moved(spec, slice(0, 30), 1)
    assert not deviation(spec, original, moved(spec, slice(0, 1), 2)).passed  # 2x the largest: past MAX_RATIO
    assert MAX_RATIO < 2
    assert not deviation(spec, original, moved(spec, slice(0, 40), 1)).passed  # no larger, but 40 off: mean 1.33x
    assert MEAN_RATIO < 40 / 30
    assert not deviation(spec, spec, moved(spec, slice(0, 1), 1)).passed  # the original exact: nothing allowed
    assert deviation(spec, spec, spec + 1e-6).passed  # but float rounding, as the plain comparison allows


def test_non_finite_and_non_float_outputs_are_not_excused() -> None:
    spec = quantized_outputs()
    with_nan = spec.copy()
    with_nan[0, 0] = np.nan
    assert not deviation(spec, spec, with_nan).passed
    assert deviation(with_nan, with_nan, with_nan).passed  # NaN where the spec has it
    labels = np.arange(10)
    assert not deviation(labels, labels, labels[::-1].copy()).passed
    assert not deviation(spec, spec, spec[:1]).passed
    (missing,) = output_deviations({"y": spec}, {"y": spec}, {})
    assert not missing.passed


# ----- run unoptimized -------------------------------------------------------------------------
def run_all(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.ort
def test_a_candidate_computing_other_values_is_refused_whatever_its_outputs() -> None:
    original, _ = qdq_pair()
    other = onnx.ModelProto()
    other.CopyFrom(original)
    weight = next(t for t in other.graph.initializer if t.name == "w2_i8")
    weight.CopyFrom(nh.from_array(-nh.to_array(weight), "w2_i8"))
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    outputs = {"y_dq": run_all(original, x)}
    result = compare_semantics(original, other, {"x": x}, outputs, outputs)  # even given the original's outputs
    assert not result.unoptimized.passed and not result.passed
    assert "compute different values" in result.summary()


@pytest.mark.ort
def test_the_uint8_form_is_judged_by_how_far_ort_runs_it_from_the_spec() -> None:
    original, candidate = qdq_pair()
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    spec = ort.InferenceSession(original.SerializeToString(), _unoptimized(), providers=["CPUExecutionProvider"])
    expected, exact = run_all(original, x), spec.run(None, {"x": x})[0]
    got = run_all(candidate, x)
    result = compare_semantics(original, candidate, {"x": x}, {"y_dq": expected}, {"y_dq": got})
    assert result.unoptimized.passed  # the same values, run unoptimized
    assert np.array_equal(expected, exact)  # the premise: ORT leaves the original's convs float
    # on this AVX2 host ORT's fused u8 x s8 kernels saturate: 4-8 off where the original is exact
    assert result.passed is bool(np.allclose(got, exact, atol=1e-4, rtol=1e-3))


def _unoptimized() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


# ----- the check -------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path))


@pytest.fixture(scope="module")
def simplified_search() -> tuple[onnx.ModelProto, Graph, SearchOutcome]:
    return search_with_a_no_op()


def judged(passed: bool, calls: list[object]) -> object:
    def fake(*args: object, **kwargs: object) -> SemanticComparison:
        calls.append(args)
        unoptimized = _choose.compare_outputs({"y": np.zeros(1)}, {"y": np.zeros(1)})
        return SemanticComparison(unoptimized, (OutputDeviation("y", 0.1, 0.1, 0.01, 0.01, passed),))

    return fake


@pytest.mark.ort
@pytest.mark.parametrize("passed", [True, False])
def test_the_check_asks_compare_semantics_only_where_values_differ(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch, passed: bool,
) -> None:
    _, _, outcome = simplified_search
    calls: list[object] = []
    monkeypatch.setattr(_choose, "compare_semantics", judged(passed, calls))
    report = choose_on(simplified_search, monkeypatch, lambda g: True, differs=outcome.graph).report
    assert len(calls) == 1  # the result's outputs (the canonical graph's are the original's)
    if passed:
        assert report.decision is Decision.OPTIMIZED and report.check is CheckStatus.PASSED
        assert report.applied_rewrites == outcome.applied
        assert any("no further from them than the original" in w for w in report.warnings)
    else:
        assert report.applied_rewrites == outcome.simplified.applied  # the canonical graph computes the same
        assert any(w.startswith("outputs differ from the original") and "against the ONNX semantics: y: largest"
                   in w for w in report.warnings)
    calls.clear()
    assert choose_on(simplified_search, monkeypatch, lambda g: True).report.check is CheckStatus.PASSED
    assert calls == []  # equal outputs: not asked
