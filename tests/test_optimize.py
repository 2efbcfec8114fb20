"""End to end: optimize_onnx searches, checks against the original, and never returns a wrong model."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import taso
from taso.substitutions.rule import (
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Proof,
    ProofStatus,
    Rule,
    TensorRole,
)
from tests.helpers import models
from tests.helpers.rules import relu_is_identity


def conv_mul_fold(status: ProofStatus = ProofStatus.PROVED) -> Rule:
    """Mul(Conv(x, w), c) = Conv(x, Mul(w, Reshape(c))) for a per-channel constant c."""
    return Rule(
        "conv_mul_fold", "Mul(Conv(x, w), c) = Conv(x, Mul(w, Reshape(c, (-1,1,1,1))))",
        (PatternInput("x"), PatternInput("w", TensorRole.CONST), PatternInput("c", TensorRole.CONST)),
        Pattern((PatternNode("a", "Conv", ("x", "w"), (("pads", ParamVar("p")),)), PatternNode("b", "Mul", ("a", "c")))),
        Pattern((
            PatternNode("r", "Reshape", ("c",), (("shape", (-1, 1, 1, 1)),)),
            PatternNode("m", "Mul", ("w", "r")),
            PatternNode("d", "Conv", ("x", "m"), (("pads", ParamVar("p")),)),
        )),
        (("b", "d"),), ("shape('c') == (1, shape('w')[0], 1, 1)",),
        proof=Proof(status, "test fixture", "", 0.0),
    ).validate()


def _scaled_conv_model(tmp_path: Path) -> Path:
    model = models.conv_net()
    import numpy as np
    from onnx import helper as h
    from onnx import numpy_helper as nh

    model.graph.node[2].output[0] = "c2_raw"
    model.graph.node.insert(3, h.make_node("Mul", ["c2_raw", "chan_scale"], ["c2"], name="scale"))
    model.graph.initializer.append(nh.from_array(np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(1, 8, 1, 1), "chan_scale"))
    path = tmp_path / "scaled.onnx"
    onnx.save_model(model, path)
    return path


@pytest.mark.ort
def test_rewrites_are_applied_checked_and_reported(tmp_path: Path) -> None:
    source = _scaled_conv_model(tmp_path)
    # the analytical cost prices the fold as cheaper, so the search applies it; the measured
    # decision then keeps it only if it is really faster (ORT fuses Conv+Mul itself)
    result = taso.optimize_onnx(source, time_budget_s=5, rules=[conv_mul_fold()], backend="analytical")
    report = result.report
    assert report.check is taso.CheckStatus.PASSED
    assert report.stop_reason in (taso.StopReason.EXHAUSTED, taso.StopReason.TIME_BUDGET)
    assert report.graphs_explored >= 1
    assert report.latency.measured_original_ms and report.latency.measured_optimized_ms
    if report.decision is taso.Decision.OPTIMIZED:
        assert report.applied_rewrites == {"conv_mul_fold": 1}
        assert report.output_nodes == report.input_nodes - 1
    else:  # not measurably faster on this machine: the original comes back unchanged
        assert report.decision is taso.Decision.NOT_FASTER
        assert [n.op_type for n in result.model.graph.node] == [n.op_type for n in onnx.load(str(source)).graph.node]


@pytest.mark.ort
def test_unproved_rules_are_never_used(tmp_path: Path) -> None:
    source = _scaled_conv_model(tmp_path)
    result = taso.optimize_onnx(source, time_budget_s=5, rules=[conv_mul_fold(ProofStatus.TIMEOUT)])
    assert result.report.stop_reason is taso.StopReason.NO_RULES
    assert result.report.applied_rewrites == {}


@pytest.mark.ort
def test_a_wrong_rule_is_caught_by_the_numeric_check(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save_model(models.conv_net(), source)
    out = tmp_path / "out.onnx"
    result = taso.optimize_onnx(source, out, time_budget_s=5, rules=[relu_is_identity()], backend="analytical")
    assert result.report.decision is taso.Decision.MISMATCH
    assert result.report.check is taso.CheckStatus.FAILED
    assert "Relu" in [n.op_type for n in result.model.graph.node]
    assert "Relu" in [n.op_type for n in onnx.load(str(out)).graph.node]


def test_unknown_backend_is_a_usage_error(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save_model(models.conv_net(), source)
    with pytest.raises(taso.InputError):
        taso.optimize_onnx(source, backend="tpu", rules=[conv_mul_fold()])


@pytest.mark.ort
def test_a_candidate_onnxruntime_refuses_is_not_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If ORT runs the original but not the optimized model, the original comes back."""
    from taso.backends import timing
    from taso.errors import BackendError

    source = _scaled_conv_model(tmp_path)
    real_create = timing.create_session

    def refuse_in_memory_models(model: object, config: object) -> object:
        if isinstance(model, onnx.ModelProto):  # the original runs from its file, the candidate from memory
            raise BackendError("simulated: ORT refuses the optimized model")
        return real_create(model, config)  # type: ignore[arg-type]

    monkeypatch.setattr(timing, "create_session", refuse_in_memory_models)
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))  # no verdict cached: the duel builds both sessions
    result = taso.optimize_onnx(source, time_budget_s=5, rules=[conv_mul_fold()], backend="analytical")
    assert result.report.decision is taso.Decision.REJECTED
    assert result.report.applied_rewrites == {}
    assert result.report.rejected_rewrites == {"conv_mul_fold": 1}  # what was tried is still reported
    assert "tried, not kept: conv_mul_fold x1" in result.report.summary()
    assert [n.op_type for n in result.model.graph.node] == [n.op_type for n in onnx.load(str(source)).graph.node]
