"""Tests for the check machinery of taso.backends: sessions, profiles, inputs, comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from taso.backends import (
    DEFAULT_DIM,
    GraphOptimization,
    OutputStatus,
    ShapeProfile,
    Tolerance,
    _session,
    compare_outputs,
    make_inputs,
    max_ir_version,
    resolve_shapes,
    run_model,
)
from taso.backends.profiles import SEQUENCE_DIM
from taso.errors import BackendError, TasoError, UsageError

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, initializers=(), opsets=OPSET) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=opsets)


def _float_input(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _output(name: str, elem_type=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, None)


def _matmul_model(scale: float = 1.0) -> onnx.ModelProto:
    weight = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) / 100 * scale
    return _model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        [_float_input("x", ["batch", 16])],
        [_output("y")],
        [numpy_helper.from_array(weight, "w")],
    )


def _embedding_model(vocab: int = 50, cast: bool = False) -> onnx.ModelProto:
    table = numpy_helper.from_array(np.ones((vocab, 4), dtype=np.float32), "table")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    nodes = [helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32)]
    nodes.append(helper.make_node("Gather", ["table", "ids32" if cast else "input_ids"], ["emb"]))
    nodes.append(helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT))
    nodes.append(helper.make_node("Unsqueeze", ["maskf", "axes"], ["mask3"]))
    nodes.append(helper.make_node("Mul", ["emb", "mask3"], ["y"]))
    axes = numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")
    return _model(nodes, [ids, mask], [_output("y")], [table, axes])


# --- sessions -------------------------------------------------------------------------


@pytest.mark.ort
def test_max_ir_version_is_loadable_and_cached():
    version = max_ir_version()
    assert 7 <= version <= onnx.IR_VERSION
    assert max_ir_version() == version


@pytest.mark.ort
def test_run_model_accepts_newest_ir_version_proto():
    model = _matmul_model()
    model.ir_version = onnx.IR_VERSION
    x = np.ones((2, 16), dtype=np.float32)
    outputs = run_model(model, {"x": x})
    expected = np.maximum(x @ numpy_helper.to_array(model.graph.initializer[0]), 0)
    np.testing.assert_allclose(outputs["y"], expected, rtol=1e-6)
    assert model.ir_version == onnx.IR_VERSION  # the caller's proto is untouched


@pytest.mark.ort
@pytest.mark.parametrize("optimization", list(GraphOptimization))
def test_run_model_every_optimization_level(optimization):
    outputs = run_model(
        _matmul_model(), {"x": np.ones((1, 16), np.float32)}, optimization=optimization
    )
    assert outputs["y"].shape == (1, 8)


@pytest.mark.ort
@pytest.mark.parametrize("ir_version", [8, onnx.IR_VERSION])
def test_run_model_from_path_with_external_data(tmp_path: Path, ir_version: int):
    model = _matmul_model()
    on_disk = _matmul_model()
    on_disk.ir_version = ir_version
    path = tmp_path / "sub" / "model.onnx"
    path.parent.mkdir()
    onnx.save_model(on_disk, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    x = np.ones((3, 16), dtype=np.float32)
    np.testing.assert_array_equal(run_model(path, {"x": x})["y"], run_model(model, {"x": x})["y"])
    assert run_model(str(path), {"x": x})["y"].shape == (3, 8)


def test_proto_with_unloaded_external_data_is_refused(tmp_path: Path):
    path = tmp_path / "model.onnx"
    onnx.save_model(_matmul_model(), path, save_as_external_data=True, size_threshold=0)
    unloaded = onnx.load_model(path, load_external_data=False)
    with pytest.raises(BackendError, match="external data"):
        run_model(unloaded, {"x": np.ones((1, 16), np.float32)})


@pytest.mark.ort
def test_large_proto_goes_through_a_file(monkeypatch):
    monkeypatch.setattr(_session, "_PROTO_SIZE_LIMIT", 100)
    model = _matmul_model()
    x = np.ones((2, 16), dtype=np.float32)
    outputs = run_model(model, {"x": x})
    monkeypatch.undo()
    np.testing.assert_array_equal(outputs["y"], run_model(model, {"x": x})["y"])
    assert not any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)


@pytest.mark.ort
def test_custom_domain_op_raises_backend_error_one_line():
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    opsets = [*OPSET, helper.make_opsetid("com.example", 1)]
    model = _model([node], [_float_input("x", [2])], [_output("y")], opsets=opsets)
    with pytest.raises(BackendError) as caught:
        run_model(model, {"x": np.ones(2, np.float32)})
    assert isinstance(caught.value, TasoError)
    assert "\n" not in str(caught.value)


@pytest.mark.ort
def test_bad_inputs_and_missing_file_raise_backend_error(tmp_path: Path):
    with pytest.raises(BackendError):
        run_model(_matmul_model(), {"x": np.ones((2, 5), np.float32)})
    with pytest.raises(BackendError, match="not found"):
        run_model(tmp_path / "missing.onnx", {})
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00not a model")
    with pytest.raises(BackendError):
        run_model(garbage, {})


# --- profiles -------------------------------------------------------------------------


def test_profile_parse_shapes_and_dims():
    profile = ShapeProfile.parse("images=1x3x640x640, batch=4")
    assert profile.shape_of("images") == (1, 3, 640, 640)
    assert profile.dim_of("batch") == 4
    assert ShapeProfile.parse(["images=1x3x640x640", "batch=4"]) == profile
    assert ShapeProfile.parse(str(profile)) == profile


@pytest.mark.parametrize("bad", ["images", "=4", "x=1xa", "x=-1"])
def test_profile_parse_errors(bad):
    with pytest.raises(UsageError):
        ShapeProfile.parse(bad)


def test_dynamic_dims_defaults_and_profile():
    model = _embedding_model()
    assert resolve_shapes(model) == {
        "input_ids": (1, SEQUENCE_DIM),
        "attention_mask": (1, SEQUENCE_DIM),
    }
    shapes = resolve_shapes(model, ShapeProfile.parse("batch=2,seq=128"))
    assert shapes == {"input_ids": (2, 128), "attention_mask": (2, 128)}
    # An explicit shape binds the symbols for every other input.
    shapes = resolve_shapes(model, ShapeProfile.parse("input_ids=3x7"))
    assert shapes["attention_mask"] == (3, 7)


def test_unnamed_dynamic_dims_and_rank1_inputs():
    inputs = [_float_input("a", [None, None, 5]), _float_input("lengths", ["n_items"])]
    nodes = [
        helper.make_node("Identity", ["a"], ["y"]),
        helper.make_node("Identity", ["lengths"], ["z"]),
    ]
    model = _model(nodes, inputs, [_output("y"), _output("z")])
    assert resolve_shapes(model) == {"a": (1, DEFAULT_DIM, 5), "lengths": (DEFAULT_DIM,)}
    assert resolve_shapes(model, ShapeProfile.parse("n_items=6"))["lengths"] == (6,)


@pytest.mark.parametrize(
    "spec", ["nothing=3", "input_ids=1x2x3", "input_ids=2x3,batch=4", "ghost=1x2"]
)
def test_profile_mismatch_is_a_usage_error(spec):
    with pytest.raises(UsageError):
        resolve_shapes(_embedding_model(), ShapeProfile.parse(spec))


def test_unknown_rank_needs_a_profile_shape():
    model = _model(
        [helper.make_node("Identity", ["x"], ["y"])], [_float_input("x", None)], [_output("y")]
    )
    with pytest.raises(UsageError, match="unknown rank"):
        resolve_shapes(model)
    assert resolve_shapes(model, ShapeProfile.parse("x=2x3")) == {"x": (2, 3)}


def test_fixed_dim_conflict_is_a_usage_error():
    with pytest.raises(UsageError, match="fixed shape"):
        resolve_shapes(_matmul_model(), ShapeProfile.parse("x=2x17"))


# --- inputs ---------------------------------------------------------------------------


@pytest.mark.ort
@pytest.mark.parametrize("cast", [False, True])
def test_token_ids_stay_in_vocabulary(cast):
    model = _embedding_model(vocab=50, cast=cast)
    inputs = make_inputs(model, profile=ShapeProfile.parse("batch=4,seq=256"))
    ids = inputs["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (4, 256)
    assert ids.min() >= 0 and ids.max() < 50
    assert len(np.unique(ids)) > 10
    np.testing.assert_array_equal(inputs["attention_mask"], np.ones((4, 256), np.int64))
    assert run_model(model, inputs)["y"].shape == (4, 256, 4)


def test_inputs_are_deterministic_and_skip_initializer_inputs():
    model = _matmul_model()
    model.graph.input.append(_float_input("w", [16, 8]))  # an overridable initializer
    first = make_inputs(model, seed=3)
    assert set(first) == {"x"}
    np.testing.assert_array_equal(first["x"], make_inputs(model, seed=3)["x"])
    assert not np.array_equal(first["x"], make_inputs(model, seed=4)["x"])


@pytest.mark.ort
def test_inputs_of_various_dtypes():
    declared = {
        "half": TensorProto.FLOAT16,
        "double": TensorProto.DOUBLE,
        "flag": TensorProto.BOOL,
        "pixels": TensorProto.UINT8,
        "count": TensorProto.INT32,
    }
    inputs = [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in declared.items()]
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in declared]
    model = _model(nodes, inputs, [_output(f"{n}_out", t) for n, t in declared.items()])
    values = make_inputs(model)
    assert {n: v.dtype for n, v in values.items()} == {
        "half": np.float16,
        "double": np.float64,
        "flag": np.bool_,
        "pixels": np.uint8,
        "count": np.int32,
    }
    assert 0 <= values["count"].min() and values["count"].max() < 8
    outputs = run_model(model, values)
    for name, value in values.items():
        np.testing.assert_array_equal(outputs[f"{name}_out"], value)


def test_model_path_inputs(tmp_path: Path):
    path = tmp_path / "model.onnx"
    onnx.save_model(_embedding_model(vocab=7), path, save_as_external_data=True, size_threshold=0)
    assert make_inputs(path)["input_ids"].max() < 7


# --- comparison -----------------------------------------------------------------------


@pytest.mark.ort
def test_identical_model_passes_and_is_bit_identical():
    model = _matmul_model()
    inputs = make_inputs(model, profile=ShapeProfile.parse("batch=4"))
    comparison = compare_outputs(run_model(model, inputs), run_model(model, inputs))
    assert comparison.passed and comparison.bit_identical
    assert comparison.max_abs_diffs() == {"y": 0.0}


@pytest.mark.ort
def test_real_mismatch_is_detected():
    inputs = make_inputs(_matmul_model(), profile=ShapeProfile.parse("batch=4"))
    reference = run_model(_matmul_model(), inputs)
    comparison = compare_outputs(reference, run_model(_matmul_model(scale=1.01), inputs))
    result = comparison.by_name()["y"]
    assert not comparison.passed and result.status is OutputStatus.VALUE_MISMATCH
    assert result.max_abs_diff > 0 and 0.005 < result.max_rel_diff < 0.02
    assert result.mismatched > 0 and "y: value mismatch" in comparison.summary()


def test_tolerance_and_bit_identity_are_distinct():
    reference = {"y": np.array([1.0, 2.0, 0.0], np.float32)}
    close = {"y": np.array([1.0, 2.0 + 1e-6, -0.0], np.float32)}
    comparison = compare_outputs(reference, close)
    assert comparison.passed and not comparison.bit_identical
    strict = compare_outputs(reference, close, tolerance=Tolerance(atol=0.0, rtol=0.0))
    assert not strict.passed


def test_nan_and_inf_handling():
    reference = {"y": np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)}
    assert compare_outputs(reference, {"y": reference["y"].copy()}).passed
    moved = {"y": np.array([1.0, np.inf, -np.inf, np.nan], np.float32)}
    assert compare_outputs(reference, moved).outputs[0].status is OutputStatus.NAN_MISMATCH
    flipped = {"y": np.array([np.nan, -np.inf, -np.inf, 1.0], np.float32)}
    assert compare_outputs(reference, flipped).outputs[0].status is OutputStatus.VALUE_MISMATCH


def test_structural_mismatches_are_reported_not_raised():
    reference = {"a": np.zeros((2, 3), np.float32), "b": np.zeros(2, np.float32), "c": np.zeros(1)}
    candidate = {"a": np.zeros((3, 2), np.float32), "b": np.zeros(2, np.float64), "d": np.zeros(1)}
    statuses = {o.name: o.status for o in compare_outputs(reference, candidate).outputs}
    assert statuses == {
        "a": OutputStatus.SHAPE_MISMATCH,
        "b": OutputStatus.DTYPE_MISMATCH,
        "c": OutputStatus.MISSING,
        "d": OutputStatus.UNEXPECTED,
    }


def test_integer_bool_and_string_outputs():
    reference = {"i": np.array([1, 2, 3]), "s": np.array(["a", "b"], dtype=object)}
    assert compare_outputs(reference, {k: v.copy() for k, v in reference.items()}).bit_identical
    changed = {"i": np.array([1, 2, 4]), "s": np.array(["a", "c"], dtype=object)}
    assert {o.name for o in compare_outputs(reference, changed).outputs if not o.passed} == {
        "i",
        "s",
    }
    flags = {"f": np.array([True, False])}
    assert not compare_outputs(flags, {"f": np.array([True, True])}).passed
