"""The fidelity tool: candidates, Spearman correlation, and the CLI on a tiny model."""

from __future__ import annotations

import onnx
import pytest

from benchmarks.fidelity import main, make_candidates, spearman
from taso._onnx_import import import_model
from taso.backends.graph_cost import AnalyticalCostModel
from tests.helpers.models import conv_net


def test_spearman_ranks_with_ties() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [5, 5, 9]) == pytest.approx(1.0)


def test_candidates_are_distinct_and_priced_incrementally() -> None:
    graph = import_model(conv_net(channels=16))
    model = AnalyticalCostModel()
    candidates = make_candidates(graph, model, count=20, seed=1)
    assert len(candidates) == 20
    assert len({c.graph.structural_hash for c in candidates}) == 20
    for candidate in candidates:
        candidate.graph.validate()
        assert candidate.predicted == pytest.approx(AnalyticalCostModel().cost(candidate.graph))


@pytest.mark.ort
def test_cli_reports_a_correlation(tmp_path, capsys) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(conv_net(channels=16), path)
    assert main([str(path), "--analytical", "--candidates", "20", "--repeats", "3"]) == 0
    assert "spearman rank correlation" in capsys.readouterr().out


def test_rule_candidates_are_partial_sweeps_priced_rewrite_by_rewrite() -> None:
    from benchmarks.models import MODELS, Size
    from taso.pipeline._rewriting import default_rules, make_expand

    graph = import_model(MODELS["mobilenetv3_converted"].build(Size.SMALL))
    model = AnalyticalCostModel()
    candidates = make_candidates(graph, model, count=8, seed=1, expand=make_expand(default_rules()))
    assert len(candidates) == 8 and candidates[0].rules == ()
    assert len({c.graph.structural_hash for c in candidates}) == 8
    for candidate in candidates[1:]:
        assert all(" x" in rule for rule in candidate.rules)
        # the analytical model is exactly incremental: pricing along the chain = pricing the result
        assert candidate.predicted == pytest.approx(model.cost(candidate.graph), rel=1e-9)


def test_resolvable_graphs_are_those_timing_can_tell_from_the_input() -> None:
    from benchmarks.fidelity import Candidate, FidelityReport

    graph = import_model(conv_net(channels=16))
    predicted = [10.0, 9.0, 10.1, 12.0, 9.9]
    measured = (10.0, 9.0, 10.2, 11.0, 10.05)  # 10.2 and 10.05 are within 3% of the input
    report = FidelityReport(tuple(Candidate(graph, (), p) for p in predicted), measured, spearman(predicted, measured))
    assert report.resolvable() == [(10.0, 10.0), (9.0, 9.0), (12.0, 11.0)]
    assert "over the 3 graphs measured more than 3% from the input (and the input): 1.000" in report.table()


@pytest.mark.ort
def test_cli_judges_the_kernel_cost_model_by_default(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.onnx"
    onnx.save(conv_net(channels=16), path)
    assert main([str(path), "--candidates", "20", "--repeats", "3"]) == 0
    captured = capsys.readouterr()
    assert "spearman rank correlation" in captured.out
    assert "entirely from cached kernels" in captured.err
