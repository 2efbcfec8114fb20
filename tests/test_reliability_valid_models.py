"""Valid models are optimized, or returned as they are with a reason; never refused or crashed
(issue 16, items 6, 8 and 9). Each case was seen failing on main at d2ecee7: non-tensor
inputs were refused, a sparse initializer failed the input check, a huge declared input
ended in MemoryError, and a model ORT would not run came back rewritten and unchecked.
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
from taso import CheckStatus, Decision
from taso.pipeline.cli import main as cli_main

pytestmark = pytest.mark.ort

X = h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
Y = h.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           **graph_fields: object) -> onnx.ModelProto:
    model = h.make_model(h.make_graph(nodes, "g", inputs, outputs, **graph_fields),
                         opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _relus(source: str) -> list[onnx.NodeProto]:
    return [h.make_node("Relu", [source], ["r"]), h.make_node("Relu", ["r"], ["y"])]


def sequence_output() -> onnx.ModelProto:
    nodes = [*_relus("x"), h.make_node("SequenceConstruct", ["y", "x"], ["seq"])]
    return _model(nodes, [X], [h.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)])


def optional_input() -> onnx.ModelProto:
    optional = h.make_value_info("o", h.make_optional_type_proto(h.make_tensor_type_proto(TensorProto.FLOAT, [4, 8])))
    return _model([h.make_node("OptionalGetElement", ["o"], ["x"]), *_relus("x")], [optional], [Y])


def sequence_input() -> onnx.ModelProto:
    sequence = h.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [4, 8])
    return _model([h.make_node("SequenceAt", ["s", "i0"], ["x"]), *_relus("x")], [sequence], [Y],
                  initializer=[nh.from_array(np.array(0, np.int64), "i0")])


def sparse_initializer() -> onnx.ModelProto:
    values = nh.from_array(np.array([1.0, -2.0], np.float32), "sp")
    sparse = h.make_sparse_tensor(values, nh.from_array(np.array([1, 5], np.int64), "sp_idx"), [4, 8])
    model = h.make_model(h.make_graph([h.make_node("Add", ["x", "sp"], ["a"]), *_relus("a")], "g", [X], [Y],
                                      sparse_initializer=[sparse]), opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)  # onnx's strict inference types "sp" sparse; ORT densifies it
    return model


VALID = {"sequence output": sequence_output, "optional input": optional_input, "sequence input": sequence_input,
         "sparse initializer": sparse_initializer}


@pytest.mark.parametrize("budget", [0.0, 2.0])
@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_models_of_every_value_type_are_optimized(tmp_path: Path, name: str, budget: float) -> None:
    path = tmp_path / "in.onnx"
    onnx.save_model(VALID[name](), path)
    result = taso.optimize_onnx(path, tmp_path / "out.onnx", time_budget_s=budget)
    if budget:
        assert result.report.check is CheckStatus.PASSED or result.report.decision is not Decision.OPTIMIZED
        assert not any("ONNX Runtime cannot run" in w for w in result.report.warnings), result.report.warnings
    assert cli_main(["optimize", str(path), "-o", str(tmp_path / "cli.onnx"), "--time-budget", str(budget), "-q"]) == 0


def test_inputs_too_large_for_the_machine_are_refused_before_allocating(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    x = h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "h", "w"])
    path = tmp_path / "in.onnx"
    onnx.save_model(_model(_relus("x"), [x], [y]), path)
    code = cli_main(["optimize", str(path), "-o", str(tmp_path / "out.onnx"), "--shape", "x=1x3x100000x100000",
                     "--time-budget", "2", "-q"])
    assert code == 0
    assert "GiB" in capsys.readouterr().err
    assert onnx.load(tmp_path / "out.onnx").graph.node == onnx.load(path).graph.node


def duplicate_node_names() -> onnx.ModelProto:
    nodes = [h.make_node("Relu", ["x"], ["r"], name="n"), h.make_node("Relu", ["r"], ["y"], name="n")]
    return _model(nodes, [X], [Y])


def test_a_model_ort_cannot_run_comes_back_unrewritten_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    model = duplicate_node_names()
    result = taso.optimize_onnx(model, time_budget_s=2)
    assert result.model.graph.node == model.graph.node
    assert result.report.applied_rewrites == {}
    assert any("ONNX Runtime cannot run" in w for w in result.report.warnings)
    assert result.report.stop_reason is taso.StopReason.UNCHECKABLE


def test_an_empty_axis_is_a_size_not_a_dynamic_dim() -> None:
    x = h.make_tensor_value_info("x", TensorProto.FLOAT, [0, 8])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, [0, 8])
    result = taso.optimize_onnx(_model(_relus("x"), [x], [y]), time_budget_s=2)
    assert not any("ONNX Runtime cannot run" in w for w in result.report.warnings), result.report.warnings
    assert result.report.decision is not Decision.OPTIMIZED or result.report.check is CheckStatus.PASSED
