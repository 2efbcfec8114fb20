"""The backend table: each name means one device for the check, the judge and the decision.

Before it, `backend="ort-cuda"` was accepted and then checked, judged and priced on the
CPU (issue 17). Here a stand-in runner with its own provider options proves that every
session the pipeline creates for an `ort-cuda` run (reference, check, cost model, sweep
judge, decision) uses the runner's providers; on a
machine with onnxruntime-gpu and a GPU the `gpu` test runs the real thing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import taso
from taso.backends import _session
from taso.backends.ort_backends import OrtCudaBackend
from taso.backends.registry import BACKENDS, Pricing, backend_names, backend_spec
from taso.pipeline.cli import main as cli_main


def _relu_chain() -> onnx.ModelProto:
    """x -> Relu -> Relu -> Mul(2) -> y at 1x64x56x56: rules fire, ORT runs it in about a millisecond."""
    two = nh.from_array(np.full((1,), 2.0, np.float32), "two")
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["a"], ["b"]), h.make_node("Mul", ["b", "two"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])], [two])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return model


MARKED = (("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"}),)
"""CPU providers with an option no default session uses: a session made with them is ours."""


@dataclass(frozen=True)
class StandInRunner:
    providers: tuple = MARKED
    device: str = "stand-in:0"
    threads: int = 2
    exact_providers: tuple = MARKED


EXACT = (("CPUExecutionProvider", {"arena_extend_strategy": "kNextPowerOfTwo"}),)
"""A second marked option: the stand-in's providers for comparing outputs (CUDA without TF32)."""


@dataclass(frozen=True)
class RoundingStandIn(StandInRunner):
    """A device whose timed sessions round (TF32 on CUDA) and whose check sessions do not."""

    exact_providers: tuple = EXACT


def _spy_sessions(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    seen: list[tuple] = []
    real = _session.create_session

    def spy(model: object, config: _session.SessionConfig) -> object:
        seen.append(config.providers)
        return real(model, config)

    monkeypatch.setattr(_session, "create_session", spy)
    for module in ("taso.backends.timing", "taso.backends._session"):
        monkeypatch.setattr(f"{module}.create_session", spy, raising=False)
    return seen


def test_every_name_has_one_row() -> None:
    assert backend_names() == ("ort-cpu", "ort-cuda", "analytical")
    assert backend_spec("ort-cpu").pricing is Pricing.KERNELS
    assert not backend_spec("analytical").judges_sweeps
    with pytest.raises(taso.UsageError, match="unknown backend"):
        backend_spec("tensorrt")


@pytest.mark.skipif(OrtCudaBackend.available(), reason="a CUDA device is present")
def test_ort_cuda_without_a_gpu_is_refused_not_replaced(tmp_path, capsys) -> None:
    with pytest.raises(taso.UsageError, match="ort-cuda"):
        taso.optimize_onnx(_relu_chain(), backend="ort-cuda")
    path = tmp_path / "in.onnx"
    onnx.save_model(_relu_chain(), path)
    assert cli_main(["optimize", str(path), "-o", str(tmp_path / "out.onnx"), "--backend", "ort-cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not available" in err[0]
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.ort
def test_an_ort_cuda_run_checks_judges_and_decides_on_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "ort-cuda", BACKENDS["ort-cuda"].__class__(
        "ort-cuda", StandInRunner, Pricing.MEASURED, judges_sweeps=True))
    seen = _spy_sessions(monkeypatch)
    result = taso.optimize_onnx(_relu_chain(), backend="ort-cuda", time_budget_s=3)
    assert seen, "no session was created"
    assert all(p == MARKED for p in seen), [p for p in seen if p != MARKED]
    assert result.report.check in (taso.CheckStatus.PASSED, taso.CheckStatus.SKIPPED)


@pytest.mark.ort
def test_outputs_are_compared_on_the_exact_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA, TF32 (ORT's default) made the PP-OCRv4 detector's own outputs differ by
    1.1e-2 between graphs, and every check failed: the check's two runs (the original's
    expected outputs and the candidate's) go to the exact providers, timing stays on the
    device's defaults."""
    monkeypatch.setitem(BACKENDS, "ort-cuda", BACKENDS["ort-cuda"].__class__(
        "ort-cuda", RoundingStandIn, Pricing.MEASURED, judges_sweeps=True))
    compared: list[tuple] = []
    real_run = _session.run_model

    def spy_run(model: object, inputs: object, **kwargs: object) -> object:
        compared.append(kwargs.get("providers"))
        return real_run(model, inputs, **kwargs)

    for module in ("taso.backends.compare", "taso.pipeline._decide"):
        monkeypatch.setattr(f"{module}.run_model", spy_run)
    seen = _spy_sessions(monkeypatch)
    result = taso.optimize_onnx(_relu_chain(), backend="ort-cuda", time_budget_s=3)
    assert result.report.check is taso.CheckStatus.PASSED
    assert compared.count(EXACT) == 2, compared  # the original's expected outputs, the candidate's
    assert MARKED in seen and EXACT in seen and all(p in (MARKED, EXACT) for p in seen), seen


def test_cuda_checks_without_tf32() -> None:
    cuda = OrtCudaBackend.__new__(OrtCudaBackend)  # no device needed to read its options
    object.__setattr__(cuda, "device_id", 0)
    timed, exact = dict(cuda.providers[0][1]), dict(cuda.exact_providers[0][1])
    assert "use_tf32" not in timed and exact["use_tf32"] == "0"


@pytest.mark.gpu
@pytest.mark.ort
def test_ort_cuda_on_a_real_gpu() -> None:
    if not OrtCudaBackend.available():
        pytest.skip("needs onnxruntime-gpu and a CUDA device")
    result = taso.optimize_onnx(_relu_chain(), backend="ort-cuda", time_budget_s=5)
    assert result.report.decision is not None
