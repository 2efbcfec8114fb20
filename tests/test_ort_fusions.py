"""The analytical model's idea of what ORT folds into a Conv, against what ORT does.

Before: any one-element constant counted as folded; ORT 1.32 folds a Mul by a 0-d
scalar, but neither an Add by a scalar nor anything by a (1,) or (1, 1, 1, 1) constant
(found on PP-OCRv4's LearnableAffineBlocks, whose scalar shift stayed between the conv
and its activation).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.backends._ort_fusions import conv_context, folded_into_conv

C = 8


def _conv_then(op: str, shape: tuple[int, ...]) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.random((C, 4, 3, 3), dtype=np.float32), "w"),
             nh.from_array(rng.random(C, dtype=np.float32), "b"),
             nh.from_array(np.full(shape, 1.5, np.float32), "c")]
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]), h.make_node(op, ["y", "c"], ["z"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])],
                         [h.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _ort_folds(model: onnx.ModelProto, tmp_path) -> bool:  # noqa: ANN001
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "basic.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node] == ["Conv"]


@pytest.mark.ort
@pytest.mark.parametrize("op", ["Mul", "Add"])
@pytest.mark.parametrize("shape", [(), (1,), (1, 1, 1, 1), (C, 1, 1), (1, C, 1, 1)])
def test_folded_into_conv_agrees_with_ort(op: str, shape: tuple[int, ...], tmp_path) -> None:  # noqa: ANN001
    model = _conv_then(op, shape)
    graph = import_model(model)
    node = next(n for n in graph.nodes.values() if n.op_type == op)
    assert folded_into_conv(graph, node, conv_context(graph, node)) == _ort_folds(model, tmp_path)
