"""Clip is written for the model's opset: its bounds are attributes at opsets 6-10 and
constant inputs from opset 11 (a rule that writes a Clip into an opset-10 export, as
PP-HGNetV2's ``relu(y) * s + t -> clip(y * s + t; min t)``, must use the older form)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.opspecs import get_spec
from taso.substitutions._emit import emit_nodes
from tests.helpers.graphs import make_graph


def _graph(opset: int):  # noqa: ANN202
    return make_graph([h.make_node("Relu", ["x"], ["y"])], {"x": (1, 2, 3, 3)}, ["y"], opset=opset)


@pytest.mark.parametrize("opset", [6, 10])
def test_below_opset_11_the_bounds_are_attributes(opset: int) -> None:
    emission = emit_nodes(get_spec("Clip"), {"min": -0.125, "max": 6.0}, ["x"], ["z"], _graph(opset), opset)
    (node,) = emission.nodes
    assert (node.op_type, node.inputs, emission.initializers) == ("Clip", ("x",), ())
    assert dict(node.attributes) == {"min": -0.125, "max": 6.0}


def test_an_unbounded_side_is_left_out_below_opset_11() -> None:
    emission = emit_nodes(get_spec("Clip"), {"min": 0.5}, ["x"], ["z"], _graph(10), 10)
    (node,) = emission.nodes
    assert dict(node.attributes) == {"min": 0.5}


@pytest.mark.parametrize("opset", [11, 17])
def test_from_opset_11_the_bounds_are_constant_inputs(opset: int) -> None:
    emission = emit_nodes(get_spec("Clip"), {"min": -0.125}, ["x"], ["z"], _graph(opset), opset)
    (node,) = emission.nodes
    assert node.attributes == () and node.inputs[0] == "x" and len(node.inputs) == 2
    (init,) = emission.initializers
    assert init.name == node.inputs[1]
    assert nh.to_array(init.proto).reshape(-1).tolist() == [-0.125]


def test_the_older_form_passes_the_onnx_checker() -> None:
    emission = emit_nodes(get_spec("Clip"), {"min": -0.125}, ["x"], ["z"], _graph(10), 10)
    (node,) = emission.nodes
    proto = h.make_node("Clip", list(node.inputs), ["z"], **dict(node.attributes))
    graph = h.make_graph([proto], "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                         [h.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 10)])
    model.ir_version = 5
    onnx.checker.check_model(model, full_check=True)
    assert np.float32(proto.attribute[0].f) == np.float32(-0.125)
