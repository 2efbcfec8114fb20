"""What a model's training_info reads or assigns survives optimization (issue 16, item 3).

On main at d2ecee7 `(x + w0) + w1 = x + (w0 + w1)` folded w0 and w1 into one constant and
dropped both initializers, which the training algorithm's bindings still named: the
model passed the checker, but its training step had lost its parameters.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import taso

pytestmark = pytest.mark.ort


def _trainable(reads: tuple[str, ...], *, bind: bool) -> onnx.ModelProto:
    """y = relu((x + w0) + w1); a training algorithm reads `reads`, optionally updates w0 and w1."""
    weights = [nh.from_array(np.full(1000, 0.1 * (k + 1), np.float32), f"w{k}") for k in (0, 1)]
    nodes = [h.make_node("Add", ["x", "w0"], ["s0"]), h.make_node("Add", ["s0", "w1"], ["s1"]),
             h.make_node("Relu", ["s1"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1000])], weights)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    algorithm = h.make_graph(
        [h.make_node("Identity", [name], [f"{name}_new"]) for name in reads], "algorithm", [],
        [h.make_tensor_value_info(f"{name}_new", TensorProto.FLOAT, [1000]) for name in reads],
    )
    info = model.training_info.add()
    info.algorithm.CopyFrom(algorithm)
    if bind:
        for name in ("w0", "w1"):
            binding = info.update_binding.add()
            binding.key, binding.value = name, f"{name}_new"
    onnx.checker.check_model(model, full_check=True)
    return model


def _defined(model: onnx.ModelProto) -> set[str]:
    graph = model.graph
    return ({t.name for t in graph.initializer} | {v.name for v in graph.input}
            | {o for n in graph.node for o in n.output})


def _graph_reads(graph: onnx.GraphProto) -> set[str]:
    inside = {o for n in graph.node for o in n.output}
    return {i for n in graph.node for i in n.input if i and i not in inside}


CASES = [(("w0", "w1"), True), (("s0",), False), (("w0", "s0"), False), (("w1",), False)]


@pytest.mark.parametrize(("reads", "bind"), CASES)
@pytest.mark.parametrize("backend", ["analytical", "ort-cpu"])
def test_names_training_info_reads_survive(reads: tuple[str, ...], bind: bool, backend: str) -> None:
    model = _trainable(reads, bind=bind)
    result = taso.optimize_onnx(model, backend=backend, check=backend != "analytical", time_budget_s=2)
    out = result.model
    onnx.checker.check_model(out, full_check=True)
    needed = set(reads) | {b.key for info in out.training_info for b in info.update_binding}
    for info in out.training_info:
        needed |= _graph_reads(info.algorithm)
    assert needed <= _defined(out), needed - _defined(out)


def test_initializers_a_training_step_updates_are_not_folded_as_constants() -> None:
    model = _trainable(("w0", "w1"), bind=True)
    out = taso.optimize_onnx(model, backend="analytical", check=False, time_budget_s=2).model
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    trained = {"w0": np.full(1000, 5.0, np.float32), "w1": np.full(1000, -7.0, np.float32)}
    # what the inference graph computes after a training step has assigned new weights
    for name, value in trained.items():
        tensor = next(t for t in out.graph.initializer if t.name == name)
        tensor.CopyFrom(nh.from_array(value, name))
    got = _evaluate(out, x)
    np.testing.assert_allclose(got, np.maximum(x + 5.0 - 7.0, 0.0), rtol=1e-6)


def _evaluate(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    del stripped.training_info[:]
    return ReferenceEvaluator(stripped).run(None, {"x": x})[0]

