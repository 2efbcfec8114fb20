"""Resize is written for the model's opset: from opset 13 as x, (no roi), scales; at opsets
11 and 12, whose Resize requires its roi input, with an empty roi (PP-OCR det and rec
exports are opset 11: a channel gate upsampled by Resize was reported unwritable there).
Below opset 11 only the legacy nearest upsampling exists (Resize 10, Upsample 9 and 7); on
whole-number scales it computes the modelled x[i // k], and it is written in that form
(PP-OCR's opset 9 classifier). Before opset 7 nothing is written."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.opspecs import get_spec
from taso.substitutions._emit import OpsetError, emit_nodes
from tests.helpers.graphs import make_graph

_GATE = {"scales": (1.0, 1.0, 3.0, 2.0), "mode": "nearest", "coordinate_transformation_mode": "asymmetric",
         "nearest_mode": "floor"}


def _graph(opset: int):  # noqa: ANN202
    return make_graph([h.make_node("Relu", ["x"], ["y"])], {"x": (1, 2, 2, 2)}, ["y"], opset=opset)


def _model(opset: int) -> onnx.ModelProto:
    emission = emit_nodes(get_spec("Resize"), _GATE, ["x"], ["z"], _graph(opset), opset)
    (node,) = emission.nodes
    proto = h.make_node(node.op_type, list(node.inputs), ["z"], **dict(node.attributes))
    graph = h.make_graph([proto], "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 2, 2])],
                         [h.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, 2, 6, 4])],
                         initializer=[i.proto for i in emission.initializers])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("opset", [11, 12])
def test_at_opsets_11_and_12_the_roi_is_an_empty_input(opset: int) -> None:
    model = _model(opset)
    (node,) = model.graph.node
    assert len(node.input) == 3 and node.input[0] == "x"
    arrays = {i.name: nh.to_array(i) for i in model.graph.initializer}
    assert arrays[node.input[1]].size == 0 and arrays[node.input[2]].tolist() == [1.0, 1.0, 3.0, 2.0]


def test_from_opset_13_there_is_no_roi() -> None:
    (node,) = _model(13).graph.node
    assert len(node.input) == 3 and node.input[1] == ""


@pytest.mark.parametrize(("opset", "op"), [(7, "Upsample"), (8, "Upsample"), (9, "Upsample"), (10, "Resize")])
def test_below_opset_11_the_legacy_op_is_written(opset: int, op: str) -> None:
    (node,) = _model(opset).graph.node
    assert node.op_type == op and [a.s for a in node.attribute if a.name == "mode"] == [b"nearest"]


@pytest.mark.parametrize("opset", [7, 8, 9, 10, 11, 12, 13])
def test_every_written_form_checks_and_runs_as_the_numpy_semantics(opset: int) -> None:
    model = _model(opset)
    onnx.checker.check_model(model, full_check=True)
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x})
    np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 3, axis=2), 2, axis=3))


def test_before_opset_7_resize_is_not_written() -> None:
    with pytest.raises(OpsetError):
        emit_nodes(get_spec("Resize"), _GATE, ["x"], ["z"], _graph(6), 6)
