"""The canonical stage folds constant computations (`_canonical_fold`).

TorchScript writes timm's TensorFlow-style "same" padding as shape arithmetic over the
`Shape` of the padded value; until it is folded, onnx's shape inference knows no shape
after the Pad and shape-conditioned rules match nowhere downstream.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.ir import Graph
from taso.pipeline import _canonical_fold
from taso.pipeline._canonical import canonicalize
from taso.pipeline._canonical_fold import FOLDED, SMALL, fold_constant_computations
from taso.pipeline._export import export
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import run_on_ort


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return nh.from_array(np.array(values, dtype=np.int64), name)


def _same_padding(x: str, out: str) -> list[onnx.NodeProto]:
    """TorchScript's form, shortened: the pads computed from Shape(x) (here its H minus
    itself) and float arithmetic on constants (a Ceil), 1 on each side of H and W."""
    return [
        h.make_node("Shape", [x], ["shape"]),
        h.make_node("Gather", ["shape", "dim"], ["size"], axis=0),
        h.make_node("Constant", [], ["f"], value=nh.from_array(np.array(2.0, dtype=np.float32))),
        h.make_node("Ceil", ["f"], ["fc"]),
        h.make_node("Cast", ["fc"], ["total"], to=TensorProto.INT64),
        h.make_node("Sub", ["size", "size"], ["zero"]),
        h.make_node("Add", ["total", "zero"], ["total2"]),
        h.make_node("Div", ["total2", "two"], ["half"]),
        h.make_node("Unsqueeze", ["half", "axis0"], ["half1"]),
        h.make_node("Concat", ["zeros4", "half1", "half1", "zeros2", "half1", "half1"], ["pads"], axis=0),
        h.make_node("Pad", [x, "pads"], [out]),
    ]


def _padded_net(batch: int | str = 1, dim: int = 2) -> Graph:
    """x (batch, 8, 10, 10) padded by pads computed from its dim `dim`, then a conv."""
    nodes = [*_same_padding("x", "p"), h.make_node("Conv", ["p", "w"], ["c"]), h.make_node("Relu", ["c"], ["y"])]
    inits = [nh.from_array(np.array(dim, np.int64), "dim"), nh.from_array(np.array(2, np.int64), "two"), _i64("axis0", [0]),
             _i64("zeros4", [0, 0]), _i64("zeros2", [0, 0]), weight("w", (16, 8, 3, 3), 1)]
    return make_graph(nodes, {"x": (batch, 8, 10, 10)}, ["y"], inits)


def _ops(graph: Graph) -> Counter[str]:
    return Counter(node.op_type for node in graph.nodes.values())


def test_shape_arithmetic_before_a_pad_becomes_its_constant_pads() -> None:
    graph = _padded_net()
    assert graph.types["c"].shape != (1, 16, 10, 10)  # onnx cannot see through the arithmetic
    counts: Counter[str] = Counter()
    folded = fold_constant_computations(graph, counts)
    assert _ops(folded) == Counter({"Pad": 1, "Conv": 1, "Relu": 1})
    pad = next(node for node in folded.nodes.values() if node.op_type == "Pad")
    assert folded.initializers[pad.inputs[1]].array().tolist() == [0, 0, 1, 1, 0, 0, 1, 1]
    assert folded.types["c"].shape == (1, 16, 10, 10)  # and the shapes downstream are inferred again
    assert counts[FOLDED] == 10
    x = np.random.default_rng(0).standard_normal((1, 8, 10, 10)).astype(np.float32)
    before, after = run_on_ort(export(graph), {"x": x}), run_on_ort(export(folded), {"x": x})
    np.testing.assert_array_equal(before[0], after[0])


def test_the_canonical_stage_folds_first() -> None:
    canonical = canonicalize(_padded_net())
    assert canonical.counts[FOLDED] == 10
    assert "Shape" not in _ops(canonical.graph)


def test_a_dynamic_dim_is_not_folded() -> None:
    graph = _padded_net(batch="N", dim=0)
    folded = fold_constant_computations(graph, Counter())
    assert _ops(folded)["Shape"] == 1 and _ops(folded)["Gather"] == 1
    assert _ops(folded)["Ceil"] == 0  # what does not depend on it is folded still


def test_a_static_dim_of_a_value_with_a_dynamic_batch_is_folded() -> None:
    graph = _padded_net(batch="N", dim=2)
    counts: Counter[str] = Counter()
    folded = fold_constant_computations(graph, counts)
    assert _ops(folded) == Counter({"Pad": 1, "Conv": 1, "Relu": 1})
    assert folded.types["c"].shape == ("N", 16, 10, 10)
    # ORT folds none of it (a Shape with a dynamic dim): a simplification the decision weighs
    assert canonicalize(graph).simplified == {"canonical/static-dims": 1}


def test_folds_ort_makes_itself_are_no_simplification() -> None:
    assert canonicalize(_padded_net()).simplified == {}


@pytest.mark.parametrize(("starts", "ends", "steps", "folded"), [
    ([2], [4], None, True),  # x.shape[2:4], both static
    ([-2], [2**62], [1], True),  # x.shape[-2:]
    ([0], [2], None, False),  # takes the dynamic batch
    ([2], [4], [2], False),  # a step other than 1 is left to ORT
])
def test_a_slice_of_static_dims_is_folded(starts, ends, steps, folded) -> None:
    inputs = ["shape", "starts", "ends", "axes"] + (["steps"] if steps else [])
    nodes = [h.make_node("Shape", ["x"], ["shape"]), h.make_node("Slice", inputs, ["hw"]),
             h.make_node("Concat", ["nc", "hw"], ["target"], axis=0), h.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [_i64("starts", starts), _i64("ends", ends), _i64("axes", [0]), _i64("nc", [-1, 8])]
    inits += [_i64("steps", steps)] if steps else []
    graph = make_graph(nodes, {"x": ("N", 8, 6, 4)}, ["y"], inits)
    result = fold_constant_computations(graph, Counter())
    assert ("Shape" not in _ops(result)) is folded


def test_a_weight_dequantized_stays_in_its_pair() -> None:
    nodes = [h.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"]), h.make_node("Conv", ["x", "w"], ["y"])]
    inits = [nh.from_array(np.ones((4, 4, 1, 1), np.int8), "wq"), nh.from_array(np.array(0.5, np.float32), "s"),
             nh.from_array(np.array(0, np.int8), "z")]
    graph = make_graph(nodes, {"x": (1, 4, 3, 3)}, ["y"], inits)
    assert fold_constant_computations(graph, Counter()) is graph


def test_random_ops_are_not_folded() -> None:
    nodes = [h.make_node("RandomUniform", [], ["r"], shape=[1, 4, 3, 3], dtype=TensorProto.FLOAT),
             h.make_node("Add", ["x", "r"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 4, 3, 3)}, ["y"])
    assert fold_constant_computations(graph, Counter()) is graph


def test_a_large_result_is_not_folded() -> None:
    side = int(np.sqrt(SMALL)) + 1
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["big"], value=nh.from_array(np.array([1.0], np.float32))),
             h.make_node("Add", ["x", "big"], ["y"])]
    graph = make_graph(nodes, {"x": (side, side)}, ["y"], [_i64("shape", [side, side])])
    assert fold_constant_computations(graph, Counter()) is graph


def test_a_computed_graph_output_stays_computed() -> None:
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Reshape", ["x", "s"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 4)}, ["y", "s"])
    assert fold_constant_computations(graph, Counter()) is graph


def test_a_node_kept_for_a_large_output_is_not_defined_twice() -> None:
    side = int(np.sqrt(SMALL)) + 1
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["big"], value=nh.from_array(np.array([1.0], np.float32))),
             h.make_node("Split", ["big", "parts"], ["small", "large"], axis=0),
             h.make_node("Add", ["x", "small"], ["s"]), h.make_node("Add", ["z", "large"], ["v"]),
             h.make_node("Neg", ["one"], ["minus_one"]), h.make_node("Add", ["s", "minus_one"], ["y"])]
    inits = [_i64("shape", [side + 1, side]), _i64("parts", [1, side]), nh.from_array(np.ones((), np.float32), "one")]
    graph = make_graph(nodes, {"x": (1, side), "z": (side, side)}, ["y", "v"], inits)
    folded = fold_constant_computations(graph, Counter())
    assert "small" in folded.producers and "minus_one" in folded.initializers
    assert not set(folded.initializers) & set(folded.producers)


def test_when_ort_refuses_the_computation_nothing_is_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("cannot")

    monkeypatch.setattr(_canonical_fold.ort, "InferenceSession", refuse)
    graph = _padded_net()
    assert fold_constant_computations(graph, Counter()) is graph


def test_a_value_ort_cannot_compute_stops_only_its_own_fold() -> None:
    nodes = [h.make_node("Cast", ["one"], ["b"], to=TensorProto.BFLOAT16),
             h.make_node("Add", ["b", "b"], ["bb"]),  # ORT's CPU has no bfloat16 Add
             h.make_node("Cast", ["bb"], ["two"], to=TensorProto.FLOAT),
             h.make_node("Neg", ["one"], ["minus_one"]),
             h.make_node("Add", ["x", "two"], ["s"]), h.make_node("Add", ["s", "minus_one"], ["y"])]
    graph = make_graph(nodes, {"x": (1, 4)}, ["y"], [nh.from_array(np.ones((), np.float32), "one")])
    folded = fold_constant_computations(graph, Counter())
    assert "minus_one" in folded.initializers
    assert _ops(folded)["Cast"] == 2 and "two" not in folded.initializers
