"""Softmax as an operator spec, and `softmax_transpose`: softmax(transpose(x, p); a) =
transpose(softmax(x; p[a]), p), with its rules for every permutation and axis.

YOLOv8's DFL head (ultralytics export) reshapes the box logits to (1, 4, 16, A), transposes
to (1, 16, 4, A), takes the softmax over axis 1 and sums the 16 bins with a 1x1 Conv. ORT's
CPU Softmax on that axis runs 5-6 times slower than over axis 2 of the untransposed tensor.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from taso.opspecs import get_spec, spec_by_name
from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms.validate import Method, Status, validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.generate._witness import check_witness
from taso.substitutions.matching import Unapplicable, apply, apply_or_reason, find_matches
from taso.substitutions.rule import ParamVar
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

ANCHORS = 20


def _rules() -> dict[str, object]:
    return {r.id: r for r in rules_from_axiom(find_axiom("softmax_transpose"))}


def _dfl_head(*, opset: int = 18):
    """(1, 64, A) -> reshape (1, 4, 16, A) -> transpose (0, 2, 1, 3) -> softmax axis 1 -> conv 16->1."""
    nodes = [h.make_node("Reshape", ["x", "s4"], ["r"]),
             h.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
             h.make_node("Softmax", ["t"], ["p"], axis=1),
             h.make_node("Conv", ["p", "w"], ["c"]),
             h.make_node("Reshape", ["c", "s3"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array([1, 4, 16, ANCHORS], np.int64), "s4"),
             onnx.numpy_helper.from_array(np.array([1, 4, ANCHORS], np.int64), "s3"),
             weight("w", (1, 16, 1, 1), 1)]
    return canonicalize(make_graph(nodes, {"x": (1, 64, ANCHORS)}, ["y"], inits, opset=opset)).graph


def _softmax_axes(graph) -> list[tuple[int, str]]:
    """(axis, op of the Softmax's input producer) of each Softmax in the exported model."""
    model = export(graph).graph
    producers = {o: n.op_type for n in model.node for o in n.output}
    return [(h.get_attribute_value(n.attribute[0]) if n.attribute else -1, producers.get(n.input[0], "input"))
            for n in model.node if n.op_type == "Softmax"]


def test_softmax_has_a_spec_from_opset_13():
    spec = get_spec("Softmax")
    assert spec is spec_by_name("Softmax") and spec.min_opset == 13
    assert spec.infer_shapes([(1, 16, 4, 7)], {"axis": 1}) == ((1, 16, 4, 7),)
    assert not spec.check([(2, 3)], {"axis": 2}).ok


@pytest.mark.ort
@pytest.mark.parametrize(("shape", "axis"), [((2, 3, 4), 1), ((2, 3, 4), -1), ((1, 16, 4, 5), 1), ((3, 2), 0)])
def test_softmax_semantics_match_onnxruntime(shape, axis):
    node = h.make_node("Softmax", ["x"], ["y"], axis=axis)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=10)
    x = (np.random.default_rng(0).standard_normal(shape) * 30).astype(np.float32)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(spec_by_name("Softmax").evaluate([x], {"axis": axis})[0], got, rtol=1e-5, atol=1e-7)


def test_the_axiom_holds_numerically_and_symbolically():
    report = validate_axiom(find_axiom("softmax_transpose"))
    assert report.ok, [c.detail for c in report.failures]
    assert any(c.method is Method.SYMBOLIC and c.status is Status.PASSED for c in report.checks)


def test_one_rule_each_way_for_every_permutation_and_axis():
    rules = _rules()
    assert set(rules) == {"ax-softmax_transpose", "ax-softmax_transpose-rev"}
    for rule in rules.values():
        params = {k: v for node in rule.source.nodes for k, v in node.params}
        assert params == {"perm": ParamVar("perm"), "axis": ParamVar("axis")}, rule.id
        result = check_witness(rule)
        assert result.ok, result.detail


def test_the_dfl_softmax_moves_before_the_transpose_and_back():
    rules, graph = _rules(), _dfl_head()
    assert _softmax_axes(graph) == [(1, "Transpose")]
    (match,) = find_matches(graph, rules["ax-softmax_transpose"])
    moved = apply(graph, rules["ax-softmax_transpose"], match)
    assert _softmax_axes(moved) == [(2, "Reshape")]
    (back,) = find_matches(moved, rules["ax-softmax_transpose-rev"])
    assert _softmax_axes(apply(moved, rules["ax-softmax_transpose-rev"], back)) == [(1, "Transpose")]


def test_a_negative_axis_is_mapped_through_the_permutation():
    nodes = [h.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]), h.make_node("Softmax", ["t"], ["y"], axis=-1)]
    graph = canonicalize(make_graph(nodes, {"x": (2, 3, 4)}, ["y"], opset=18)).graph
    rule = _rules()["ax-softmax_transpose"]
    (match,) = find_matches(graph, rule)
    assert _softmax_axes(apply(graph, rule, match)) == [(1, "input")]


def test_an_older_opset_is_left_alone():
    """Before opset 13 Softmax normalizes over every axis from `axis` on, flattened."""
    graph, rule = _dfl_head(opset=12), _rules()["ax-softmax_transpose"]
    for match in find_matches(graph, rule):
        result = apply_or_reason(graph, rule, match)
        assert getattr(result, "kind", None) is Unapplicable.OPSET


@pytest.mark.ort
def test_the_rewritten_head_computes_the_same_boxes():
    rules, graph = _rules(), _dfl_head()
    (match,) = find_matches(graph, rules["ax-softmax_transpose"])
    assert_same_outputs(graph, apply(graph, rules["ax-softmax_transpose"], match))
