"""Rules hold over the reals; integer tensors compute something else.

Found on a real ultralytics YOLOv8n export: its detect head computes Slice bounds from the
feature map's shape in int64, `(shape[1] + 1) / 2`, and `ax-div_as_mul` rewrote that to
`(shape[1] + 1) * (1 / 2)` with `1 / 2` an int64 0: the candidate's Slice then cut an
empty range and ORT refused the model. A rule with arithmetic matches only where every
value it binds or computes is a float; rules that only move elements (Transpose,
Reshape, Concat, Split, ...) hold for every element type and keep matching integers.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.ir import Graph
from taso.opspecs._registry import spec_by_name
from taso.pipeline._rewriting import default_rules
from taso.substitutions.matching import find_matches

RULES = {r.id: r for r in default_rules()}


def _graph(elem: int, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], shape: list[int]) -> Graph:
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem, shape)],
                         [h.make_tensor_value_info("y", elem, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    return import_model(onnx.shape_inference.infer_shapes(model))


def _div_by_two(elem: int, dtype: type) -> Graph:
    two = nh.from_array(np.array(2, dtype=dtype), "two")
    return _graph(elem, [h.make_node("Div", ["x", "two"], ["y"])], [two], [4])


@pytest.mark.parametrize(("elem", "dtype"), [(TensorProto.INT64, np.int64), (TensorProto.INT32, np.int32)])
def test_div_as_mul_never_matches_integer_division(elem: int, dtype: type) -> None:
    assert find_matches(_div_by_two(elem, dtype), RULES["ax-div_as_mul"]) == []


def test_div_as_mul_still_matches_float_division() -> None:
    assert len(find_matches(_div_by_two(TensorProto.FLOAT, np.float32), RULES["ax-div_as_mul"])) == 1


def _transposes(elem: int) -> Graph:
    nodes = [h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), h.make_node("Transpose", ["t"], ["y"], perm=[1, 0])]
    return _graph(elem, nodes, [], [2, 3])


def _element_moving_rule() -> str:
    for rule_id, rule in sorted(RULES.items()):
        ops = [n.op for n in rule.source.nodes + rule.target.nodes]
        if ops and set(ops) == {"Transpose"} and find_matches(_transposes(TensorProto.FLOAT), rule):
            return rule_id
    raise AssertionError("no Transpose-only rule matches a transpose pair")


def test_element_moving_rules_still_match_integers() -> None:
    rule_id = _element_moving_rule()
    assert find_matches(_transposes(TensorProto.INT64), RULES[rule_id])


def test_the_element_moving_specs_are_data_movement() -> None:
    moving = {name for name in ("Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split",
                                "Identity", "Add", "Mul", "Div", "Relu", "Conv") if spec_by_name(name).element_moving}
    assert moving == {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Identity"}
