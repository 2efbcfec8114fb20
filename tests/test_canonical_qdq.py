"""Quantized activations written as uint8 (pipeline/_canonical_qdq.py).

onnxruntime.quantization's QDQ exports write int8 activations. ORT's x86 CPU provider fuses
DQ -> Conv -> Q into QLinearConv only for uint8 ones and converts int8 Q -> DQ pairs itself
only where the DQ has one reader: a Conv whose input DQ also feeds a residual Add stays a
float Conv. Written as uint8 (zero points + 128) the values are the same bit for bit and ORT
fuses it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.ir import Graph
from taso.pipeline._canonical import canonicalize
from taso.pipeline._canonical_qdq import (
    SIMPLIFICATION_ID,
    UNSIGNED_ACTIVATIONS,
    unsigned_activations,
)
from taso.pipeline._export import export
from tests.helpers.graphs import make_graph, weight
from tests.helpers.qdq import INPUT
from tests.helpers.qdq import point as _point
from tests.helpers.qdq import residual_block as _residual_block
from tests.helpers.qdq import scale as _scale


def _session(model: onnx.ModelProto, level: ort.GraphOptimizationLevel, optimized: Path | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 1
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _float_convs_after_ort(model: onnx.ModelProto, tmp_path: Path) -> int:
    """How many Convs ORT (all optimizations) leaves as float Convs rather than QLinearConv."""
    path = tmp_path / "ort_optimized.onnx"
    _session(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, path)
    return sum(node.op_type == "Conv" for node in onnx.load(str(path)).graph.node)


def _hard_inputs() -> np.ndarray:
    """Values at rounding ties and far past both saturation bounds, and ordinary ones."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(INPUT).astype(np.float32)
    flat = x.reshape(-1)
    flat[:20] = (np.arange(20, dtype=np.float32) - 10 + 0.5) * np.float32(0.02)  # exact ties of scale 0.02
    flat[20:24] = [1e6, -1e6, 3.0, -3.0]  # saturate int8 and uint8 alike
    return x


# ----- the form ---------------------------------------------------------------------------------
def test_every_activation_is_written_as_uint8() -> None:
    graph, counts = unsigned_activations(_residual_block())
    assert counts == {UNSIGNED_ACTIVATIONS: 4}
    model = export(graph)
    inits = {t.name: nh.to_array(t) for t in model.graph.initializer}
    activation_points = [inits[node.input[2]] for node in model.graph.node
                         if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.input[0] not in inits]
    assert len(activation_points) == 8
    assert all(point.dtype == np.uint8 for point in activation_points)
    assert sorted({int(point) for point in activation_points}) == sorted({-3 + 128, 7 + 128, -11 + 128, 2 + 128})
    weight_points = [inits[node.input[2]] for node in model.graph.node
                     if node.op_type == "DequantizeLinear" and node.input[0] in inits]
    assert all(point.dtype == np.int8 for point in weight_points)  # weights stay int8: ORT wants u8 x s8


@pytest.mark.ort
def test_values_are_unchanged_bit_for_bit() -> None:
    before = export(_residual_block())
    after = export(unsigned_activations(_residual_block())[0])
    feeds = {"x": _hard_inputs()}
    plain = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # each op as the spec writes it, nothing fused
    expected = _session(before, plain).run(None, feeds)[0]
    got = _session(after, plain).run(None, feeds)[0]
    assert expected.tobytes() == got.tobytes()


@pytest.mark.ort
def test_ort_fuses_the_convs_next_to_a_value_with_two_readers(tmp_path: Path) -> None:
    before = export(_residual_block())
    after = export(unsigned_activations(_residual_block())[0])
    assert _float_convs_after_ort(before, tmp_path) == 2  # the premise: ORT leaves both Convs float
    assert _float_convs_after_ort(after, tmp_path) == 0


# ----- what stays -------------------------------------------------------------------------------
def _single(*, zero: onnx.TensorProto, quantized_output: bool = False, reader: str = "DequantizeLinear",
            source: str = "x", scale_shape: tuple[int, ...] = ()) -> Graph:
    """x (or a constant) -> Q -> reader, with the given zero point."""
    nodes = [h.make_node("QuantizeLinear", [source, "s", "z"], ["q"], axis=1)]
    inits = [_scale("s", 0.1, scale_shape), zero, weight("c", INPUT)]
    if reader == "DequantizeLinear":
        nodes.append(h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1))
    else:
        nodes.append(h.make_node(reader, ["q"], ["y"]))
    return make_graph(nodes, {"x": INPUT}, ["y", "q"] if quantized_output else ["y"], inits)


@pytest.mark.parametrize("graph", [
    pytest.param(_single(zero=_point("z", 5), quantized_output=True), id="quantized-value-is-a-graph-output"),
    pytest.param(_single(zero=_point("z", 5), reader="Identity"), id="read-by-another-op"),
    pytest.param(_single(zero=_point("z", 133, np.uint8)), id="already-uint8"),
    pytest.param(_single(zero=_point("z", 5), source="c"), id="constant-input-a-weight"),
    pytest.param(_single(zero=_point("z", 5, shape=(4,)), scale_shape=(4,)), id="per-channel"),
])
def test_what_is_not_an_int8_activation_stays(graph: Graph) -> None:
    rewritten, counts = unsigned_activations(graph)
    assert counts == {}
    assert rewritten is graph


def test_the_canonical_stage_writes_uint8_activations_as_a_simplification() -> None:
    """Wired into `canonicalize` as a simplification: the measured decision weighs it even
    where no rule applied (the cost model prices the int8 and uint8 forms alike)."""
    canonical = canonicalize(_residual_block())
    assert canonical.counts[UNSIGNED_ACTIVATIONS] > 0
    assert canonical.simplified[SIMPLIFICATION_ID] == canonical.counts[UNSIGNED_ACTIVATIONS]
