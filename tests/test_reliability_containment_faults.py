"""A failure inside a cost model, kernel-shape inference, a judge or a sweep never aborts
`optimize_onnx` (issue 16, "containment"): the candidate is skipped or the analytical model
takes over, a warning says so, and the returned model is the original or a checked one.

Each fault is injected with a counter, and each test asserts the fault was hit, so that a
test cannot pass because the faulty code was never reached.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import taso
from taso import CheckStatus
from taso.backends import _kernels, kernel_cost

pytestmark = pytest.mark.ort


def _relu_chain() -> onnx.ModelProto:
    """x -> Relu -> Relu -> Relu -> Mul(2) -> y at 1x64x56x56: rules fire, ORT runs it in ~1 ms."""
    two = onnx.numpy_helper.from_array(np.full((1,), 2.0, np.float32), "two")
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["a"], ["b"]), h.make_node("Relu", ["b"], ["c"]),
             h.make_node("Mul", ["c", "two"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])], [two])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return model


@dataclass
class Fault:
    hits: int = 0

    def wrap(self, _original: Callable[..., object]) -> Callable[..., object]:
        def failing(*args: object, **kwargs: object) -> object:
            self.hits += 1
            raise RuntimeError("injected fault")

        return failing


def _optimized_with_fault(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> taso.OptimizeResult:
    """Optimize `_relu_chain()` with `owner.name` raising; assert the fault was reached."""
    fault = Fault()
    monkeypatch.setattr(owner, name, fault.wrap(getattr(owner, name)))
    result = taso.optimize_onnx(_relu_chain(), time_budget_s=3)
    assert fault.hits > 0
    return result


def _assert_contained(result: taso.OptimizeResult, original: onnx.ModelProto) -> None:
    report = result.report
    assert any("injected fault" in w for w in report.warnings), report.warnings
    same = [n.SerializeToString() for n in result.model.graph.node] == [n.SerializeToString() for n in original.graph.node]
    assert same or report.check is CheckStatus.PASSED, report.summary()


TARGETS = [
    (kernel_cost.KernelCostModel, "cost"),
    (kernel_cost.KernelCostModel, "cost_after"),
    (kernel_cost.KernelCostModel, "seed"),
]


@pytest.mark.parametrize(("owner", "method"), TARGETS, ids=[f"{o.__name__}.{m}" for o, m in TARGETS])
def test_a_failing_cost_model_falls_back(monkeypatch: pytest.MonkeyPatch, owner: type, method: str) -> None:
    _assert_contained(_optimized_with_fault(monkeypatch, owner, method), _relu_chain())


def test_failing_kernel_shape_inference_is_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _optimized_with_fault(monkeypatch, _kernels, "infer_kernel_shapes")
    model = _relu_chain()
    same = [n.SerializeToString() for n in result.model.graph.node] == [n.SerializeToString() for n in model.graph.node]
    assert same or result.report.check is CheckStatus.PASSED


def test_a_failing_judge_keeps_no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    from taso.pipeline import _decide

    monkeypatch.setattr("taso.pipeline.api.MIN_PREDICTED_SPEEDUP", 0.0)  # judge every sweep
    result = _optimized_with_fault(monkeypatch, _decide.MeasuredJudge, "__call__")
    _assert_contained(result, _relu_chain())
    assert not any(s.kept for s in result.report.sweeps)


@pytest.mark.parametrize("target", ["taso.pipeline._rewriting.sweep", "taso.pipeline._rewriting.search"])
def test_a_failing_sweep_or_search_returns_the_original(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    import importlib

    module_name, name = target.rsplit(".", 1)
    result = _optimized_with_fault(monkeypatch, importlib.import_module(module_name), name)
    _assert_contained(result, _relu_chain())


def test_a_candidate_that_cannot_be_exported_gives_the_original(monkeypatch: pytest.MonkeyPatch) -> None:
    from taso.pipeline import _export

    calls = Fault()
    real = _export.check_exported

    def failing(model: onnx.ModelProto) -> None:
        calls.hits += 1
        raise RuntimeError("injected fault")

    monkeypatch.setattr(_export, "check_exported", failing)
    model = _relu_chain()
    result = taso.optimize_onnx(model, time_budget_s=3, backend="analytical", check=False)
    assert calls.hits > 0 and real is not failing
    _assert_contained(result, model)
    assert result.report.applied_rewrites == {}
