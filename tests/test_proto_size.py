"""Size bounds used instead of `ByteSize()` (which encodes the whole message under upb)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._proto_size import model_byte_bound, tensor_byte_bound
from tests.helpers import models


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int8, np.bool_, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (3, 5), (64, 64, 3, 3)])
def test_tensor_bound_is_an_upper_bound_and_tight(dtype: type, shape: tuple[int, ...]) -> None:
    tensor = nh.from_array(np.ones(shape, dtype), "a_weight_name")
    size = tensor.ByteSize()
    assert size <= tensor_byte_bound(tensor) <= size + 200


def test_typed_field_and_string_tensors_are_measured_exactly() -> None:
    typed = h.make_tensor("t", TensorProto.INT64, [4], [-1, 2, -3, 4])  # varints, not raw data
    strings = h.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"cde"])
    assert tensor_byte_bound(typed) == typed.ByteSize() and tensor_byte_bound(strings) == strings.ByteSize()


def test_external_tensors_count_only_their_reference() -> None:
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1024, 1024])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "w.bin"
    assert tensor_byte_bound(tensor) < 200


def test_model_bound_is_an_upper_bound() -> None:
    for model in (models.conv_net(), _with_big_weight()):
        size = model.ByteSize()
        assert size <= model_byte_bound(model) <= size + 4096


def _with_big_weight() -> onnx.ModelProto:
    x = h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 512])
    weight = nh.from_array(np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32), "w")
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [weight])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], doc_string="a model")
