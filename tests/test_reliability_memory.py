"""Memory-lean paths for large models, checked on small ones (the 2 GB run is tests/test_large_model.py).

* folding evaluates broadcasting binary weight transforms slice by slice: same values, dtype, shape;
* `run_reference` runs the original before the candidate exists and keeps ORT's error instead of raising;
* a session gets the model's bytes without an IR-version suffix when none is needed (no extra copy).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import taso._fold as fold
from taso.backends import _session
from taso.backends.compare import ReferenceRun, run_reference
from taso.errors import BackendError
from taso.opspecs import evaluate_op, spec_by_name

SHAPES = [
    ((7, 5, 3), (7, 5, 3)),  # same shape: both sliced
    ((7, 5, 3), (1, 5, 3)),  # broadcast along axis 0: the second operand whole
    ((7, 5, 3), (3,)),  # lower rank: aligned on trailing axes, whole
    ((1, 5, 3), (9, 5, 3)),  # the first operand broadcasts
    ((200,), ()),  # a scalar
    ((6, 1, 4), (1, 3, 1)),  # both broadcast
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(("shape_a", "shape_b"), SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_sliced_fold_equals_whole_evaluation(monkeypatch, op, shape_a, shape_b, dtype) -> None:
    monkeypatch.setattr(fold, "_SLICE_ELEMENTS", 16)  # force several slices on small arrays
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape_a) * 5 + 1).astype(dtype)
    b = (rng.standard_normal(shape_b) * 5 + 3).astype(dtype)
    b = np.where(b == 0, 1, b).astype(dtype)  # integer Div by zero is not the point here
    spec = spec_by_name(op)
    (want,) = spec.evaluate([a, b], {})
    (got,) = fold._evaluate(evaluate_op, spec.name, [a, b], {})
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _add_model(ir_version: int = 8) -> onnx.ModelProto:
    x = h.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = h.make_graph([h.make_node("Add", ["x", "x"], ["y"])], "g", [x], [y])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


@pytest.mark.ort
def test_reference_run_gives_inputs_and_outputs() -> None:
    reference = run_reference(_add_model())
    np.testing.assert_array_equal(reference.expected()["y"], 2 * reference.inputs["x"])


@pytest.mark.ort
def test_reference_run_keeps_the_backend_error() -> None:
    model = _add_model()
    model.graph.node[0].op_type = "NoSuchOp"
    reference = run_reference(model)
    assert isinstance(reference.error, BackendError)
    with pytest.raises(BackendError):
        reference.expected()
    assert ReferenceRun().expected() == {}


@pytest.mark.ort
def test_session_bytes_get_an_ir_suffix_only_when_needed() -> None:
    loadable = _add_model(ir_version=8)
    assert _session._plan_from_proto(loadable).data == loadable.SerializeToString()
    newer = _add_model(ir_version=_session.max_ir_version() + 1)
    data = _session._plan_from_proto(newer).data
    assert isinstance(data, bytes) and onnx.load_from_string(data).ir_version == _session.max_ir_version()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_, np.uint8])
def test_external_weights_read_for_folding_equal_onnx_loader(tmp_path, dtype) -> None:
    from taso.ir import Initializer, TensorType

    values = [np.arange(k, k + 24).reshape(2, 3, 4).astype(dtype) for k in (0, 50)]
    tensors = [onnx.numpy_helper.from_array(v, f"w{i}") for i, v in enumerate(values)]
    model = _add_model()
    model.graph.initializer.extend(tensors)
    onnx.save_model(model, tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.data", size_threshold=0)
    stored = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    for proto, want in zip(stored.graph.initializer, values, strict=True):
        init = Initializer(proto.name, TensorType(proto.data_type, want.shape), proto, str(tmp_path))
        got = fold._read_external(init)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, init.array())


def test_external_weights_outside_the_model_folder_go_through_onnx_checks(tmp_path) -> None:
    from taso.ir import Initializer, TensorType

    proto = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
    proto.data_location = TensorProto.EXTERNAL
    entry = proto.external_data.add()
    entry.key, entry.value = "location", "../outside.data"
    (tmp_path / "outside.data").write_bytes(np.ones(2, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    with pytest.raises(Exception, match="outside|\\.\\.|directory|path"):
        fold._read_external(Initializer("w", TensorType(TensorProto.FLOAT, (2,)), proto, str(folder)))


@pytest.mark.ort
def test_run_outputs_own_their_memory() -> None:
    """ORT's output arrays can wrap its buffers, which keeps the session's arena alive."""
    outputs = _session.run_model(_add_model(), {"x": np.ones(2, np.float32)})
    assert all(value.base is None for value in outputs.values())
