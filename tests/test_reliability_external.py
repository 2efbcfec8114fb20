"""Models whose weights are external data files, optimized: small versions of the 2 GB case.

The optimized model keeps referencing the input's data files for the weights no rewrite
touched, so checking it (onnx checker) and running it (ORT) must use the input's folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import taso
from taso._model_io import check_model, load_model
from taso._onnx_import import import_model
from taso.backends import AnalyticalCostModel, run_model
from taso.backends.compare import run_reference, runnable
from taso.errors import InvalidModelError
from taso.pipeline._decide import MeasuredJudge
from taso.pipeline._export import export
from taso.pipeline._rewriting import run_search
from taso.pipeline.api import _data_folder
from taso.pipeline.budget import Budget
from tests.helpers.rules import FIXTURE_RULES

pytestmark = pytest.mark.ort


def write_external_model(folder: Path) -> Path:
    """x + w0 + w1 -> Relu -> + w3, every weight in one external data file.

    `(x + a) + b = x + (a + b)` folds w0 and w1; w3 stays in the input's data file.
    """
    weights = [nh.from_array(np.full(1000, 0.1 * (k + 1), np.float32), f"w{k}") for k in (0, 1, 3)]
    nodes = [
        h.make_node("Add", ["x", "w0"], ["s0"]), h.make_node("Add", ["s0", "w1"], ["s1"]),
        h.make_node("Relu", ["s1"], ["s2"]), h.make_node("Add", ["s2", "w3"], ["y"]),
    ]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1000])], weights)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    path = folder / "m.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    return path


def _candidate(path: Path) -> onnx.ModelProto:
    loaded = load_model(path)
    graph = import_model(loaded.model, base_dir=loaded.base_dir)
    outcome = run_search(graph, rules=FIXTURE_RULES, cost_model=AnalyticalCostModel(), alpha=1.05, budget=Budget.of(2.0))
    assert outcome.applied
    return export(outcome.graph)


def test_an_optimized_model_with_external_weights_passes_the_checker(tmp_path: Path) -> None:
    candidate = _candidate(write_external_model(tmp_path))
    assert any(t.data_location == TensorProto.EXTERNAL for t in candidate.graph.initializer)
    check_model(candidate)  # the data files are in tmp_path, not the working directory


def test_the_checker_still_refuses_a_broken_model_with_external_weights(tmp_path: Path) -> None:
    candidate = _candidate(write_external_model(tmp_path))
    candidate.graph.node[0].input[0] = "no_such_value"
    with pytest.raises(InvalidModelError):
        check_model(candidate)


def test_an_optimized_model_with_external_weights_runs_from_the_input_folder(tmp_path: Path) -> None:
    path = write_external_model(tmp_path)
    x = {"x": np.linspace(-1, 1, 1000, dtype=np.float32)}
    want = run_model(path, x)["y"]
    got = run_model(runnable(_candidate(path), str(tmp_path)), x)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_optimizing_without_check_writes_a_model_that_keeps_external_data(tmp_path: Path) -> None:
    path = write_external_model(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = taso.optimize_onnx(path, out / "m.onnx", backend="analytical", time_budget_s=2.0, check=False,
                                rules=FIXTURE_RULES)
    assert result.report.applied_rewrites
    written = onnx.load(str(out / "m.onnx"), load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in written.graph.initializer)
    x = {"x": np.linspace(-1, 1, 1000, dtype=np.float32)}
    np.testing.assert_allclose(run_model(out / "m.onnx", x)["y"], run_model(path, x)["y"], rtol=1e-6)


@pytest.mark.parametrize("budget", [0.0, 2.0])
def test_optimizing_with_check_accepts_a_model_with_external_weights(tmp_path: Path, budget: float) -> None:
    result = taso.optimize_onnx(write_external_model(tmp_path), backend="analytical", time_budget_s=budget,
                                rules=FIXTURE_RULES)
    # at budget 0 nothing is applied, and an unchanged model needs no check
    expected = taso.CheckStatus.PASSED if budget else taso.CheckStatus.SKIPPED
    assert result.report.check is expected, result.report.warnings


def test_the_sweep_judge_runs_candidates_that_reference_external_weights(tmp_path: Path, monkeypatch) -> None:
    """A candidate of a model with external weights keeps referencing the input's data
    file; the judge hands ORT that folder (without it ORT refused every candidate, so
    sweeps of torch.onnx dynamo exports, which write external data, were never judged)."""
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))
    path = write_external_model(tmp_path)
    loaded = load_model(path)
    graph = import_model(loaded.model, base_dir=loaded.base_dir)
    reference = run_reference(runnable(loaded.model, loaded.base_dir))
    judge = MeasuredJudge.for_reference(reference, data_folder=_data_folder(graph))
    assert judge is not None
    candidate = run_search(graph, rules=FIXTURE_RULES, cost_model=AnalyticalCostModel(), alpha=1.05,
                           budget=Budget.of(2.0)).graph
    verdict = judge(graph, candidate)
    assert verdict.complete and verdict.speedup > 0  # measured (a refused candidate is judged 0.0)


def test_sweeps_are_judged_for_a_model_with_external_weights(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))
    report = taso.optimize_onnx(write_external_model(tmp_path), time_budget_s=4, rules=FIXTURE_RULES).report
    assert report.sweeps, report.summary()
