"""Kernel shapes checked against ONNX Runtime itself, op type by op type.

Each row of `ROWS` is a small model and the kernels (domain:op_type) ORT compiles it to;
the benchmark corpus adds its own models. ORT compiles each (ORT_ENABLE_ALL, NCHWc
layout), runs the kernel graph once under its profiler, and the input and output shapes
it reports for every kernel must equal the ones `infer_kernel_shapes` gives: from ORT's
own shape inference (the default) and from the rules alone (the fallback), so that every
rule is checked on every op type of the corpus that it covers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.models import MODELS, Size
from taso.backends._kernel_shapes import (
    KernelShapeError,
    ShapeSource,
    TypedShape,
    infer_kernel_shapes,
)
from taso.backends._kernels import ReportedShapes, compile_kernels, nchwc_block, profile_shapes
from taso.backends.inputs import make_inputs

pytestmark = pytest.mark.ort

NCHWC = "com.microsoft.nchwc"
MS = "com.microsoft"


# ----- the models ---------------------------------------------------------------------


def _weight(name: str, *shape: int) -> onnx.TensorProto:
    rng = np.random.default_rng(len(name) + sum(shape))
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)


def _const(name: str, values: object, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype), name)


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Sequence[int]],
    constants: Sequence[onnx.TensorProto],
    *,
    opset: int = 17,
) -> onnx.ModelProto:
    """A model of `nodes` whose output is the last node's first output."""
    graph = helper.make_graph(
        nodes, "row", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)], constants,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _conv_then(node: onnx.NodeProto, constants: Sequence[onnx.TensorProto], *, opset: int = 17) -> onnx.ModelProto:
    """x[1, 32, 8, 8] -> 1x1 Conv (NCHWc) -> `node`, which reads "c"."""
    conv = helper.make_node("Conv", ["x", "w"], ["c"])
    return _model([conv, node], {"x": [1, 32, 8, 8]}, [_weight("w", 32, 32, 1, 1), *constants], opset=opset)


def _resize(mode: str, *, scales: Sequence[float] = (), sizes: Sequence[int] = (), opset: int = 13, **attrs: object):
    empty = _const("empty", [])  # roi, and the scales when sizes are given (opset 11 wants them named)
    constants = [empty]
    if scales:
        constants.append(_const("scales", scales))
    if sizes:
        constants.append(_const("sizes", sizes, np.int64))
    inputs = ["c", "empty", "scales" if scales else "empty", *(["sizes"] if sizes else [])]
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, **attrs)
    return lambda: _conv_then(node, constants, opset=opset)


def _upsample(mode: str, *, opset: int):
    if opset >= 9:
        node = helper.make_node("Upsample", ["c", "scales"], ["y"], mode=mode)
        return lambda: _conv_then(node, [_const("scales", [1, 1, 2, 2])], opset=opset)
    node = helper.make_node("Upsample", ["c"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 3.0])
    return lambda: _conv_then(node, [], opset=opset)


def _convs() -> onnx.ModelProto:
    """NCHWc Convs (20 channels: padded to the block; strided, from an NCHW input; with a
    residual Sum and Relu), then a grouped Conv (FusedConv) and a 1-D Conv (Conv)."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["a", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["b", "a"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("Conv", ["r", "w3"], ["g"], group=4, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["g"], ["gr"]),
        helper.make_node("Reshape", ["gr", "flat"], ["line"]),
        helper.make_node("Conv", ["line", "w4"], ["y"], pads=[1, 1], auto_pad="NOTSET"),
    ]
    constants = [
        _weight("w1", 20, 3, 3, 3), _weight("w2", 20, 20, 3, 3), _weight("w3", 20, 5, 3, 3),
        _weight("w4", 8, 20, 3), _const("flat", [1, 20, 49], np.int64),
    ]
    return _model(nodes, {"x": [1, 3, 13, 13]}, constants)


def _pools() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("GlobalMaxPool", ["a"], ["gm"]),
        helper.make_node("GlobalAveragePool", ["a"], ["ga"]),
        helper.make_node("Add", ["gm", "ga"], ["y"]),
    ]
    conv = helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])
    return _model([conv, *nodes], {"x": [1, 32, 15, 15]}, [_weight("w", 32, 32, 3, 3)])


def _activations() -> onnx.ModelProto:
    """HardSigmoid, Clip, Sigmoid, Tanh, Mul and Sub on an NCHWc Conv's output."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["a"]),
        helper.make_node("HardSigmoid", ["a"], ["h"], alpha=1 / 6),
        helper.make_node("Clip", ["a", "lo", "hi"], ["k"]),
        helper.make_node("Sigmoid", ["k"], ["s"]),
        helper.make_node("Tanh", ["a"], ["t"]),
        helper.make_node("Mul", ["h", "s"], ["m"]),
        helper.make_node("Sub", ["m", "t"], ["y"]),
    ]
    constants = [_weight("w", 32, 32, 3, 3), _const("lo", 0.0), _const("hi", 6.0)]
    return _model(nodes, {"x": [1, 32, 8, 8]}, constants)


def _split_slice_concat() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Split", ["c", "halves"], ["s1", "s2"], axis=1),
        helper.make_node("Slice", ["s2", "starts", "ends", "axes"], ["sl"]),
        helper.make_node("Concat", ["s1", "sl", "x"], ["y"], axis=1),
    ]
    constants = [
        _weight("w", 32, 32, 1, 1), _const("halves", [16, 16], np.int64),
        _const("starts", [4], np.int64), _const("ends", [12], np.int64), _const("axes", [1], np.int64),
    ]
    return _model(nodes, {"x": [1, 32, 8, 8]}, constants)


def _gemms() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["g"], transB=1),
        helper.make_node("Relu", ["g"], ["r"]),
        helper.make_node("Gemm", ["r", "w2"], ["y"], transA=0),
    ]
    return _model(nodes, {"x": [4, 32]}, [_weight("w1", 64, 32), _weight("b1", 64), _weight("w2", 64, 16)])


def _matmuls() -> onnx.ModelProto:
    """A batched MatMul by a transposed operand and a scale: one FusedMatMul."""
    nodes = [
        helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["a", "bt"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    return _model(nodes, {"a": [2, 8, 16], "b": [2, 8, 16]}, [_const("half", 0.5)])


def _transformer_block() -> onnx.ModelProto:
    """MatMul + bias -> erf Gelu -> MatMul -> residual Add -> LayerNormalization ->
    Softmax, and a QuickGelu (x * sigmoid(1.702 x)) beside it."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["mm"]),
        helper.make_node("Add", ["mm", "b1"], ["z"]),
        helper.make_node("Div", ["z", "sqrt2"], ["zd"]),
        helper.make_node("Erf", ["zd"], ["ze"]),
        helper.make_node("Add", ["ze", "one"], ["za"]),
        helper.make_node("Mul", ["z", "za"], ["zm"]),
        helper.make_node("Mul", ["zm", "half"], ["gelu"]),
        helper.make_node("Mul", ["gelu", "k"], ["gk"]),
        helper.make_node("Sigmoid", ["gk"], ["gs"]),
        helper.make_node("Mul", ["gelu", "gs"], ["quick"]),
        helper.make_node("MatMul", ["quick", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "x"], ["res"]),
        helper.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Softmax", ["ln"], ["y"], axis=-1),
    ]
    constants = [
        _weight("w1", 32, 64), _weight("b1", 64), _weight("w2", 64, 32), _weight("gamma", 32), _weight("beta", 32),
        _const("sqrt2", math.sqrt(2)), _const("one", 1.0), _const("half", 0.5), _const("k", 1.702),
    ]
    return _model(nodes, {"x": [1, 8, 32]}, constants)


@dataclass(frozen=True)
class Row:
    """A model and the kernels (domain:op_type) ORT must compile it to, so that the row
    keeps checking them if ORT's fusions change."""

    name: str
    build: Callable[[], onnx.ModelProto]
    kernels: frozenset[str]


_DOMAINS = {"nchwc": NCHWC, "ms": MS}


def _row(name: str, build: Callable[[], onnx.ModelProto], *kernels: str) -> Row:
    """`kernels` as "nchwc:Conv", "ms:FusedConv" or "Conv" (a standard op)."""
    full = {f"{_DOMAINS[d]}:{op}" if op else f":{d}" for d, _, op in (k.partition(":") for k in kernels)}
    return Row(name, build, frozenset(full))


ROWS = [
    _row("convs", _convs, "nchwc:Conv", "nchwc:ReorderOutput", "ms:FusedConv", "Reshape", "Conv"),
    _row("pools", _pools, "nchwc:ReorderInput", "nchwc:MaxPool", "nchwc:AveragePool", "nchwc:GlobalMaxPool",
         "nchwc:GlobalAveragePool"),
    _row("activations", _activations, "Add", "HardSigmoid", "Clip", "Sigmoid", "Tanh", "Mul", "Sub"),
    _row("split-slice-concat", _split_slice_concat, "Split", "Slice", "Concat"),
    _row("gemms", _gemms, "Gemm", "ms:FusedGemm"),
    _row("matmuls", _matmuls, "ms:FusedMatMul"),
    _row("transformer-block", _transformer_block, "ms:Gelu", "ms:QuickGelu", "ms:SkipLayerNormalization", "Softmax"),
    # Resize/Upsample: ORT turns integer x2/x3 ones into its NCHWc Upsample, others stay Resize.
    _row("resize-11-scales-linear", _resize("linear", scales=[1, 1, 2, 2], opset=11), "nchwc:Upsample"),
    _row("resize-11-sizes-linear", _resize("linear", sizes=[1, 32, 16, 16], opset=11), "nchwc:Upsample"),
    _row("resize-13-scales-nearest", _resize("nearest", scales=[1, 1, 2, 3], coordinate_transformation_mode="asymmetric",
                                             nearest_mode="floor"), "nchwc:Upsample"),
    _row("resize-13-scales-nearest-half-pixel", _resize("nearest", scales=[1, 1, 2, 2]), "Resize"),
    _row("resize-13-fractional-scales", _resize("linear", scales=[1, 1, 1.5, 1.5]), "Resize"),
    _row("resize-13-odd-sizes", _resize("linear", sizes=[1, 32, 17, 24]), "Resize"),
    _row("upsample-9-nearest", _upsample("nearest", opset=9), "nchwc:Upsample"),
    _row("upsample-9-linear", _upsample("linear", opset=9), "nchwc:Upsample"),
    _row("upsample-7-attribute", _upsample("nearest", opset=7), "Upsample"),
]


# ----- the comparison -----------------------------------------------------------------


def _mismatches(
    structure: onnx.ModelProto, inferred: Mapping[str, TypedShape], reported: Mapping[str, ReportedShapes]
) -> list[str]:
    """Every kernel whose inferred input or output shapes differ from what ORT reported."""
    wrong = []
    for node in structure.graph.node:
        expected = ReportedShapes(
            tuple(inferred[n] for n in node.input if n), tuple(inferred[n] for n in node.output if n)
        )
        if reported[node.name] != expected:
            wrong.append(f"{node.domain}:{node.op_type} {node.name!r}: inferred {expected}, ORT {reported[node.name]}")
    return wrong


def _check_against_ort(model: onnx.ModelProto, folder: Path, source: ShapeSource) -> set[str]:
    """Assert inferred shapes equal ORT's for every kernel; return the kernels' op types."""
    graph = compile_kernels(model, folder)
    structure = onnx.load(str(graph.path), load_external_data=False)
    reported = profile_shapes(graph, make_inputs(model))
    assert set(reported) == {node.name for node in structure.graph.node}
    inferred = infer_kernel_shapes(structure, nchwc_block(), source=source)
    assert _mismatches(structure, inferred, reported) == []
    return {f"{node.domain}:{node.op_type}" for node in structure.graph.node}


@pytest.mark.parametrize("source", list(ShapeSource), ids=lambda source: source.value)
@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_inferred_kernel_shapes_equal_the_ones_ort_reports(row: Row, source: ShapeSource, tmp_path) -> None:
    kernels = _check_against_ort(row.build(), tmp_path, source)
    if nchwc_block() > 1:
        assert row.kernels <= kernels, f"ORT no longer compiles {row.name} to {sorted(row.kernels - kernels)}"


@pytest.mark.parametrize("source", list(ShapeSource), ids=lambda source: source.value)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_benchmark_corpus_kernel_shapes_equal_the_ones_ort_reports(
    name: str, source: ShapeSource, tmp_path
) -> None:
    _check_against_ort(MODELS[name].build(Size.SMALL), tmp_path, source)


def test_ort_types_its_own_ops_that_no_rule_covers() -> None:
    """Shapes come from ORT's own inference first: an ORT op without a rule still gets
    its shapes (the rules alone refuse it, and the caller would have to profile)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])
    node = helper.make_node("Inverse", ["x"], ["y"], domain=MS)
    graph = helper.make_graph([node], "inverse", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    assert infer_kernel_shapes(model, 16)["y"] == TypedShape(TensorProto.FLOAT, (2, 3, 3))
    with pytest.raises(KernelShapeError, match="Inverse"):
        infer_kernel_shapes(model, 16, source=ShapeSource.RULES)
