"""Realistic defaults for dynamic dims, and the record of the shapes a call used.

Image-like spatial dims default to 224 (or follow the static one), sequence-like dims to
128, batch-like dims to 1; the report and the CLI say, per dim, whether it was given or
defaulted.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import taso
from taso.backends.profiles import (
    BATCH_DIM,
    DEFAULT_DIM,
    IMAGE_DIM,
    SEQUENCE_DIM,
    ShapeProfile,
    input_shapes,
    resolve_shapes,
)
from taso.pipeline.cli import main
from taso.report import (
    CheckStatus,
    Decision,
    DimSource,
    DynamicDim,
    InputShape,
    Latency,
    Report,
    StopReason,
    shapes_line,
)
from tests.helpers.models import scaled_chain_model

Dims = list[int | str | None]


def _model(**inputs: Dims) -> onnx.ModelProto:
    nodes = [h.make_node("Identity", [name], [f"{name}_out"]) for name in inputs]
    values = [h.make_tensor_value_info(name, TensorProto.FLOAT, dims) for name, dims in inputs.items()]
    outputs = [h.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None) for name in inputs]
    return h.make_model(h.make_graph(nodes, "dims", values, outputs), opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("dims", "expected"),
    [
        (["?", 3, "?", "?"], (BATCH_DIM, 3, IMAGE_DIM, IMAGE_DIM)),  # paddle2onnx's detector
        (["N", 3, "height", "width"], (1, 3, IMAGE_DIM, IMAGE_DIM)),  # named spatial dims
        (["?", 1, "?", "?"], (1, 1, IMAGE_DIM, IMAGE_DIM)),  # grayscale
        (["?", "?", "?", 3], (1, IMAGE_DIM, IMAGE_DIM, 3)),  # channels last (tf2onnx)
        (["?", 3, 48, "?"], (1, 3, 48, 320)),  # a text line: PP-OCR's recognizer at its real width
        (["?", 3, 32, "?"], (1, 3, 32, 224)),  # a text line of 32: 213 rounded to a multiple of 32
        (["?", 3, 640, "?"], (1, 3, 640, 640)),  # a larger static side: square
        (["?", 3, "?", 300], (1, 3, 288, 300)),  # a multiple of 32 near the static side
        (["?", 8, "?", "?"], (1, 8, DEFAULT_DIM, DEFAULT_DIM)),  # 8 channels: not an image
        (["?", 3, "?"], (1, 3, DEFAULT_DIM)),  # rank 3: not an image
    ],
)
def test_image_like_spatial_dims(dims: Dims, expected: tuple[int, ...]) -> None:
    assert resolve_shapes(_model(x=dims)) == {"x": expected}


@pytest.mark.parametrize("name", ["seq", "sequence", "seq_len", "sequence_length", "max_length", "num_tokens"])
def test_sequence_like_names_default_to_128(name: str) -> None:
    model = _model(input_ids=["batch", name], attention_mask=["batch", name])
    assert resolve_shapes(model) == {"input_ids": (1, SEQUENCE_DIM), "attention_mask": (1, SEQUENCE_DIM)}


def test_a_sequence_name_wins_over_the_leading_axis() -> None:
    # time-major RNN input [seq, batch, features]: the leading axis is the sequence here
    assert resolve_shapes(_model(x=["seq", "batch", 16])) == {"x": (SEQUENCE_DIM, BATCH_DIM, 16)}


@pytest.mark.parametrize("dims", [["batch_size", 4], ["B", 4], ["n", 3, "?", "?"], [None, 4], ["anything", 4]])
def test_batch_like_names_and_axis_zero_default_to_1(dims: Dims) -> None:
    assert resolve_shapes(_model(x=dims))["x"][0] == BATCH_DIM


def test_other_dims_keep_the_old_default() -> None:
    assert resolve_shapes(_model(x=["batch", "features"], lengths=["n_items"])) == {
        "x": (1, DEFAULT_DIM), "lengths": (DEFAULT_DIM,),
    }


def test_given_shapes_are_kept_exactly() -> None:
    model = _model(x=["?", 3, "?", "?"], ids=["batch", "seq"])
    shapes = resolve_shapes(model, ShapeProfile.parse("x=2x3x48x192,seq=7"))
    assert shapes == {"x": (2, 3, 48, 192), "ids": (1, 7)}


def test_the_record_says_which_dims_were_given_and_which_defaulted() -> None:
    model = _model(x=["batch", 3, 48, "w"], ids=["batch", "seq"])
    record = input_shapes(model, ShapeProfile.parse("w=320"))
    assert record == (
        InputShape("x", (1, 3, 48, 320), (DynamicDim("batch", 1, DimSource.DEFAULT), DynamicDim("w", 320, DimSource.GIVEN))),
        InputShape("ids", (1, SEQUENCE_DIM), (DynamicDim("batch", 1, DimSource.DEFAULT),
                                              DynamicDim("seq", SEQUENCE_DIM, DimSource.DEFAULT))),
    )
    assert shapes_line(record) == (
        "shapes: x=1x3x48x320, ids=1x128 (dynamic dims: batch=1 (default), w=320 (--shape), seq=128 (default))"
    )


def test_anonymous_dims_are_named_by_input_and_axis() -> None:
    model = _model(x=["?", 3, "?", "?"])
    record = input_shapes(model, ShapeProfile.parse("x=1x3x48x320"))
    assert [d.name for d in record[0].dynamic] == ["x[0]", "x[2]", "x[3]"]
    assert {d.source for d in record[0].dynamic} == {DimSource.GIVEN}
    assert shapes_line(input_shapes(model)) == (
        "shapes: x=1x3x224x224 (dynamic dims: x[0]=1 (default), x[2]=224 (default), x[3]=224 (default))"
    )


def test_a_static_model_has_no_dynamic_dims_to_report() -> None:
    record = input_shapes(_model(x=[1, 3, 8, 8]))
    assert shapes_line(record) == "shapes: x=1x3x8x8"


def test_a_shape_that_cannot_be_resolved_leaves_the_record_empty() -> None:
    assert input_shapes(_model(x=None)) == ()  # unknown rank: the run says so, not the record


def test_the_report_carries_the_shapes_and_the_time_to_best() -> None:
    shapes = (InputShape("x", (1, 3, 48, 320), (DynamicDim("x[3]", 320, DimSource.GIVEN),)),)
    report = Report(
        input_nodes=3, output_nodes=2, applied_rewrites={"r": 1}, latency=Latency(), max_abs_diff={},
        check=CheckStatus.SKIPPED, decision=Decision.UNCHECKED, stop_reason=StopReason.CONVERGED,
        graphs_explored=4, phase_seconds={}, time_to_best_s=1.234, shapes=shapes,
    )
    data = json.loads(report.to_json())
    assert data["stop_reason"] == "converged" and data["time_to_best_s"] == 1.234
    assert data["shapes"] == [{"input": "x", "shape": [1, 3, 48, 320],
                               "dynamic": [{"name": "x[3]", "size": 320, "source": "given"}]}]
    summary = report.summary()
    assert "search: converged" in summary and "best found after 1.2 s" in summary
    assert "shapes: x=1x3x48x320 (dynamic dims: x[3]=320 (--shape))" in summary.splitlines()


def test_the_optimize_report_records_the_shapes_used() -> None:
    result = taso.optimize_onnx(scaled_chain_model(), time_budget_s=0, check=False, backend="analytical")
    assert result.report.shapes == (InputShape("x", (1, 3, 8, 8), (DynamicDim("N", 1, DimSource.DEFAULT),)),)


def test_the_cli_prints_the_shapes_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.onnx"
    onnx.save(scaled_chain_model(), source)
    argv = ["optimize", str(source), "-o", str(tmp_path / "out.onnx"), "--time-budget", "0", "--no-check",
            "--backend", "analytical", "--shape", "N=2"]
    assert main(argv) == 0
    assert "shapes: x=2x3x8x8 (dynamic dims: N=2 (--shape))" in capsys.readouterr().err.splitlines()  # the summary
