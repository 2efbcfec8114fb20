"""Anonymous dims (`?`, empty, or neither value nor param) are independent; named dims unify.

paddle2onnx writes `x: float[-1,3,?,?]`: the spatial dims share the dim_param `?`, which
names no dimension, so `--shape x=1x3x48x192` must give H=48 and W=192, not be refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.backends.inputs import make_inputs
from taso.backends.profiles import BATCH_DIM, IMAGE_DIM, ShapeProfile, resolve_shapes
from taso.errors import UsageError
from taso.pipeline.cli import main

Dims = list[int | str | None]


def _identity_model(**inputs: Dims) -> onnx.ModelProto:
    """One Identity per input: the model's inputs are all that matters here."""
    nodes = [h.make_node("Identity", [name], [f"{name}_out"]) for name in inputs]
    values = [h.make_tensor_value_info(name, TensorProto.FLOAT, dims) for name, dims in inputs.items()]
    outputs = [h.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None) for name in inputs]
    model = h.make_model(h.make_graph(nodes, "dims", values, outputs), opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def _paddle_conv() -> onnx.ModelProto:
    """Conv -> Relu on `x: float[?,3,?,?]`, as paddle2onnx exports it."""
    weight = nh.from_array((np.random.default_rng(0).standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32), "w")
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["y"])]
    graph = h.make_graph(
        nodes, "paddle_conv",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["?", 3, "?", "?"])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["?", 8, "?", "?"])],
        [weight],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def test_question_mark_dims_take_the_given_shape():
    shapes = resolve_shapes(_paddle_conv(), ShapeProfile.parse("x=1x3x48x192"))
    assert shapes == {"x": (1, 3, 48, 192)}


def test_question_mark_dims_default_independently():
    # axis 0 of a rank-4 input is the batch (1); the spatial dims of an RGB image get an image's size
    assert resolve_shapes(_paddle_conv()) == {"x": (BATCH_DIM, 3, IMAGE_DIM, IMAGE_DIM)}


@pytest.mark.parametrize("anonymous", ["?", "", None])
def test_anonymous_dims_are_independent_across_inputs(anonymous: str | None):
    model = _identity_model(a=[anonymous, 3], b=[anonymous, 5])
    profile = ShapeProfile.parse("a=2x3,b=7x5")
    assert resolve_shapes(model, profile) == {"a": (2, 3), "b": (7, 5)}
    assert resolve_shapes(model, ShapeProfile.parse("a=2x3")) == {"a": (2, 3), "b": (BATCH_DIM, 5)}


def test_named_dims_are_still_unified_across_inputs():
    model = _identity_model(a=["batch", 3], b=["batch", 5])
    assert resolve_shapes(model, ShapeProfile.parse("a=4x3")) == {"a": (4, 3), "b": (4, 5)}
    with pytest.raises(UsageError, match="'batch' gets two values"):
        resolve_shapes(model, ShapeProfile.parse("a=4x3,b=2x5"))


def test_named_dim_repeated_in_one_input_is_still_refused_two_values():
    model = _identity_model(x=["side", "side"])
    assert resolve_shapes(model, ShapeProfile.parse("x=6x6")) == {"x": (6, 6)}
    with pytest.raises(UsageError, match="'side' gets two values"):
        resolve_shapes(model, ShapeProfile.parse("x=6x7"))


def test_question_mark_is_not_a_symbol_to_set():
    with pytest.raises(UsageError, match="neither a dimension nor an input"):
        resolve_shapes(_paddle_conv(), ShapeProfile.parse("?=5"))


def test_make_inputs_uses_the_given_spatial_dims():
    inputs = make_inputs(_paddle_conv(), profile=ShapeProfile.parse("x=1x3x48x192"))
    assert inputs["x"].shape == (1, 3, 48, 192)


@pytest.mark.ort
@pytest.mark.parametrize("budget", ["0", "2"])
def test_cli_optimizes_a_paddle_style_input(tmp_path: Path, monkeypatch, budget: str):
    monkeypatch.setenv("TASO_CACHE_DIR", str(tmp_path / "cache"))
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_paddle_conv(), source)
    argv = ["optimize", str(source), "-o", str(target), "--shape", "x=1x3x48x192", "--time-budget", budget]
    assert main(argv) == 0
    onnx.checker.check_model(onnx.load(target), full_check=True)
