"""Outputs within the original's own float32 rounding floor (backends/rounding.py), and the
check's use of it (pipeline/_choose.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.backends import run_model
from taso.backends.compare import compare_outputs
from taso.backends.rounding import (
    FLOOR_RATIO,
    RoundingComparison,
    RoundingDeviation,
    compare_rounding,
    perturbed,
)
from taso.backends.semantics import SemanticComparison
from taso.ir import Graph
from taso.pipeline import _choose
from taso.pipeline._rewriting import SearchOutcome
from taso.report import CheckStatus, Decision
from tests.helpers.choosing import choose_on, search_with_a_no_op

WIDTH, OUT = 64, 16


def _model(nodes: list[onnx.NodeProto], weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, WIDTH])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, OUT])],
                         [nh.from_array(w.astype(np.float32), name) for name, w in weights.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def cancelling(scale: float) -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """`x @ w + x @ v` with `v = -w + s`: two terms of size `scale` that cancel down to
    `x @ s` (ill-conditioned for a large `scale`); and the two weights."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((WIDTH, OUT)) * scale).astype(np.float32)
    v = (-w.astype(np.float64) + rng.standard_normal((WIDTH, OUT))).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("MatMul", ["x", "v"], ["b"]),
             h.make_node("Add", ["a", "b"], ["y"])]
    return _model(nodes, {"w": w, "v": v}), w, v


def merged(w: np.ndarray, v: np.ndarray, times: float = 1.0) -> onnx.ModelProto:
    """`x @ (w + v)`, the sum folded in float64: exact in the reals; times 1.05, wrong."""
    return _model([h.make_node("MatMul", ["x", "wv"], ["y"])], {"wv": (w.astype(np.float64) + v) * times})


def judged(original: onnx.ModelProto, candidate: onnx.ModelProto) -> tuple[bool, RoundingComparison]:
    x = {"x": np.random.default_rng(1).standard_normal((1, WIDTH)).astype(np.float32)}
    expected, got = run_model(original, x), run_model(candidate, x)
    comparison = compare_outputs(expected, got)
    return comparison.passed, compare_rounding(original, x, comparison, expected, got)


@pytest.mark.ort
def test_a_reassociation_of_an_ill_conditioned_model_passes_within_its_rounding_floor() -> None:
    original, w, v = cancelling(scale=3e4)
    plain, result = judged(original, merged(w, v))
    assert not plain  # the premise: terms of 3e4 cancel to about 8, the plain tolerance refuses the merge
    (deviation,) = result.deviations
    assert result.passed and deviation.floor_max > 1e-3
    assert deviation.candidate_max <= FLOOR_RATIO * deviation.floor_max


@pytest.mark.ort
def test_a_wrong_rewrite_of_the_same_model_is_refused() -> None:
    original, w, v = cancelling(scale=3e4)
    plain, result = judged(original, merged(w, v, times=1.05))
    assert not plain and not result.passed
    assert "rounding floor" in result.summary()


@pytest.mark.ort
def test_a_well_conditioned_model_gets_no_more_than_the_plain_tolerance() -> None:
    original, w, v = cancelling(scale=1.0)
    plain, result = judged(original, merged(w, v))
    assert plain  # nothing cancels: the merge passes as it is
    plain, result = judged(original, merged(w, v, times=1.002))  # 0.2% off: past rtol 1e-3 somewhere
    assert not plain and not result.passed
    assert result.deviations[0].floor_max < 1e-4


@pytest.mark.ort
def test_a_floor_from_a_discrete_flip_excuses_nothing() -> None:
    """`x @ w + Floor(c) * 100`, c all 3.0: a last-place move of a 3.0 down floors it to 2,
    moving an output by 100; that is no rounding floor, and a candidate 3 off (`* 101`) is refused."""
    def model(big: float) -> onnx.ModelProto:
        nodes = [h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("Floor", ["c"], ["f"]),
                 h.make_node("Mul", ["f", "big"], ["fb"]), h.make_node("Add", ["a", "fb"], ["y"])]
        w = np.random.default_rng(0).standard_normal((WIDTH, OUT))
        return _model(nodes, {"w": w, "c": np.full((1, OUT), 3.0), "big": np.full((1, OUT), big)})

    plain, result = judged(model(100.0), model(101.0))
    (deviation,) = result.deviations
    assert not plain and deviation.floor_max >= 50  # the premise: a draw floored a 3.0 to 2
    assert not result.passed


@pytest.mark.ort
def test_only_value_mismatches_are_judged() -> None:
    original, w, v = cancelling(scale=3e4)
    x = {"x": np.ones((1, WIDTH), np.float32)}
    expected = run_model(original, x)
    got = {"y": expected["y"][:, :1]}
    result = compare_rounding(original, x, compare_outputs(expected, got), expected, got)
    assert result.deviations == () and not result.passed


def test_perturbed_moves_float_weights_in_their_last_place_only() -> None:
    original, w, _ = cancelling(scale=1.0)
    original.graph.initializer.append(nh.from_array(np.arange(4, dtype=np.int64), "shape"))
    original.graph.node.append(h.make_node("Constant", [], ["c"], value=nh.from_array(np.full(8, 3.0, np.float32))))
    before = original.SerializeToString()
    moved = perturbed(original, seed=0)
    assert original.SerializeToString() == before  # the original is not touched
    got = nh.to_array(moved.graph.initializer[0])
    assert not np.array_equal(got, w)
    assert np.all(np.abs(got.astype(np.float64) - w) <= 2 * np.spacing(np.abs(w)))  # a unit or so in the last place
    assert np.array_equal(nh.to_array(moved.graph.initializer[2]), np.arange(4))
    constant = nh.to_array(moved.graph.node[-1].attribute[0].t)
    assert not np.array_equal(constant, np.full(8, 3.0, np.float32))
    assert np.all(np.abs(constant - 3.0) <= 2 * np.spacing(np.float32(3.0)))
    assert perturbed(original, seed=0).SerializeToString() == moved.SerializeToString()  # a seed, one draw


# ----- the check -------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path))


@pytest.fixture(scope="module")
def simplified_search() -> tuple[onnx.ModelProto, Graph, SearchOutcome]:
    return search_with_a_no_op()


def _refused_semantics(*args: object, **kwargs: object) -> SemanticComparison:
    unoptimized = _choose.compare_outputs({"y": np.zeros(1)}, {"y": np.ones(1)})
    return SemanticComparison(unoptimized, ())


@pytest.mark.ort
@pytest.mark.parametrize("passed", [True, False])
def test_the_check_asks_compare_rounding_where_the_semantics_do_not_excuse_the_outputs(
    simplified_search: tuple[onnx.ModelProto, Graph, SearchOutcome], monkeypatch: pytest.MonkeyPatch, passed: bool,
) -> None:
    _, _, outcome = simplified_search
    calls: list[object] = []

    def fake(*args: object, **kwargs: object) -> RoundingComparison:
        calls.append(args)
        return RoundingComparison((RoundingDeviation("y", 2.0, 0.5, 1.0, 0.25, passed),))

    monkeypatch.setattr(_choose, "compare_semantics", _refused_semantics)
    monkeypatch.setattr(_choose, "compare_rounding", fake)
    report = choose_on(simplified_search, monkeypatch, lambda g: True, differs=outcome.graph).report
    assert len(calls) == 1
    if passed:
        assert report.decision is Decision.OPTIMIZED and report.check is CheckStatus.PASSED
        assert report.applied_rewrites == outcome.applied
        assert any("float32 weight moved in its last place" in w and "rounding floor of 2" in w
                   for w in report.warnings)
    else:
        assert report.applied_rewrites == outcome.simplified.applied
        assert any(w.startswith("outputs differ from the original") and "own float32 rounding: y: largest 1"
                   in w for w in report.warnings)
