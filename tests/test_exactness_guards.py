"""Exactness guards: a rule that is not bit-exact never matches where floats change class.

A `reassociates` rule (`x / y = x * (1 / y)`, `(x * a) * b = x * (a * b)`, ...) may round
differently, but the matcher refuses it when a constant it binds or computes is not finite
and normal (or an exact zero), when its target divides by a value only known at run time,
and when a value it rewrites feeds a decision (comparison, argmax, rounding, integer cast)
through ops that never round. Exact rules are matched as before.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import taso
from taso.ir import Graph
from taso.opspecs import Exactness
from taso.pipeline._rewriting import default_rules
from taso.substitutions.matching import find_matches
from taso.substitutions.rule import Rule
from tests.helpers.graphs import make_graph
from tests.helpers.rules import ANY, node, rule

RULES = {r.id: r for r in default_rules()}
F32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32


def _const(name: str, value: object) -> onnx.TensorProto:
    return nh.from_array(np.array(value, dtype=np.float32), name)


def _matches(rule_id: str, graph: Graph) -> int:
    return len(find_matches(graph, RULES[rule_id]))


# ----- constants the match binds or computes ---------------------------------------------

def _div(k: object) -> Graph:
    """x / k"""
    return make_graph([h.make_node("Div", ["x", "k"], ["y"])], {"x": [4, 3]}, ["y"], [_const("k", k)])


@pytest.mark.parametrize(
    "k",
    [1e-40, -1e-40, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e38, 3e38, [3.0, 1e-40, 2.0]],
    ids=["denormal", "neg-denormal", "zero", "neg-zero", "inf", "neg-inf", "nan",
         "reciprocal-denormal", "reciprocal-denormal-max", "one-denormal-element"],
)
def test_div_as_mul_refuses_hostile_divisors(k: object) -> None:
    assert _matches("ax-div_as_mul", _div(k)) == 0


@pytest.mark.parametrize("k", [3.0, 2.0, -0.25, 1e-3, 1e37, [3.0, 0.5, -7.0]])
def test_div_as_mul_still_matches_benign_divisors(k: object) -> None:
    assert _matches("ax-div_as_mul", _div(k)) == 1


def test_div_as_mul_refuses_a_divisor_known_only_at_run_time() -> None:
    """1 / y for a run-time y cannot be checked: a denormal y would make it inf."""
    graph = make_graph([h.make_node("Div", ["x", "k"], ["y"])], {"x": [4, 3], "k": [4, 3]}, ["y"])
    assert _matches("ax-div_as_mul", graph) == 0


def _folds(rule_id: str, graph: Graph) -> int:
    """Matches of `(x op y) op z = x op (y op z)` that bind y, z to the constants a, b: the
    target would fold a op b. (With the operands commuted, `a op (x op b)` folds nothing.)"""
    return sum(1 for m in find_matches(graph, RULES[rule_id]) if {m.tensor_map()["y"], m.tensor_map()["z"]} == {"a", "b"})


def _reassociating(r: Rule) -> Rule:
    return dataclasses.replace(r, exactness=Exactness.REASSOCIATES)


DIV_MUL_SWAP = _reassociating(rule(
    "div_mul_swap", "(x / y) * z = (x * z) / y", [("x", ANY), ("y", ANY), ("z", ANY)],
    [node("n0", "Div", "x", "y"), node("n1", "Mul", "n0", "z")],
    [node("t0", "Mul", "x", "z"), node("t1", "Div", "t0", "y")],
    [("n1", "t1")],
))
DIV_MUL_COMMUTE = _reassociating(rule(
    "div_mul_commute", "(x / y) * z = z * (x / y)", [("x", ANY), ("y", ANY), ("z", ANY)],
    [node("n0", "Div", "x", "y"), node("n1", "Mul", "n0", "z")],
    [node("t0", "Div", "x", "y"), node("t1", "Mul", "z", "t0")],
    [("n1", "t1")],
))


def _div_by(y_is_input: bool) -> Graph:
    """(x / y) * z, y a graph input or the constant 3."""
    nodes = [h.make_node("Div", ["x", "y"], ["t"]), h.make_node("Mul", ["t", "z"], ["out"])]
    inputs = {"x": [4, 3], "z": [4, 3], **({"y": [4, 3]} if y_is_input else {})}
    return make_graph(nodes, inputs, ["out"], [] if y_is_input else [_const("y", 3.0)])


def test_a_target_may_divide_by_a_run_time_value_only_as_the_source_does() -> None:
    assert len(find_matches(_div_by(True), DIV_MUL_SWAP)) == 0  # x / y could overflow where x * z / y does not
    assert len(find_matches(_div_by(False), DIV_MUL_SWAP)) == 1
    assert len(find_matches(_div_by(True), DIV_MUL_COMMUTE)) == 1  # the same x / y on both sides


def _mul_mul(a: float, b: float, op: str = "Mul") -> Graph:
    """(x op a) op b"""
    nodes = [h.make_node(op, ["x", "a"], ["t"]), h.make_node(op, ["t", "b"], ["y"])]
    return make_graph(nodes, {"x": [4, 3]}, ["y"], [_const("a", a), _const("b", b)])


@pytest.mark.parametrize(
    ("a", "b"),
    [(1e20, 1e19), (1e-20, 1e-20), (1e-30, 1e-30), (np.nan, 2.0), (np.inf, 0.5), (1e-40, 2.0)],
    ids=["product-overflows", "product-denormal", "product-underflows-to-zero", "nan", "inf", "denormal"],
)
def test_mul_assoc_refuses_hostile_constants(a: float, b: float) -> None:
    assert _folds("ax-mul_assoc", _mul_mul(a, b)) == 0


@pytest.mark.parametrize(("a", "b"), [(2.0, 3.0), (0.0, 5.0), (1e20, 1e-19)], ids=["small", "exact-zero", "balanced"])
def test_mul_assoc_still_matches_benign_constants(a: float, b: float) -> None:
    assert _folds("ax-mul_assoc", _mul_mul(a, b)) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [(3e38, 3e38), (np.inf, -np.inf), (1e-40, 1.0), (np.nan, 1.0), (1.5e-38, -1.4e-38)],
    ids=["sum-overflows", "inf", "denormal", "nan", "sum-denormal"],
)
def test_add_assoc_refuses_hostile_constants(a: float, b: float) -> None:
    assert _folds("ax-add_assoc", _mul_mul(a, b, "Add")) == 0


@pytest.mark.parametrize(("a", "b"), [(1.0, 2.0), (1.5, -1.5)], ids=["small", "exact-zero-sum"])
def test_add_assoc_still_matches_benign_constants(a: float, b: float) -> None:
    assert _folds("ax-add_assoc", _mul_mul(a, b, "Add")) == 1


def _mul_by_product(a: float, b: float) -> Graph:
    """x * (a * b), the product computed at run time by an ONNX Mul of two initializers."""
    nodes = [h.make_node("Mul", ["a", "b"], ["ab"]), h.make_node("Mul", ["x", "ab"], ["y"])]
    return make_graph(nodes, {"x": [4, 3]}, ["y"], [_const("a", a), _const("b", b)])


def test_a_constant_the_source_computes_is_checked_too() -> None:
    """mul_assoc-rev splits x * inf (a * b overflowed) into (x * a) * b, which is finite."""
    assert _matches("ax-mul_assoc-rev", _mul_by_product(1e20, 1e19)) == 0
    assert _matches("ax-mul_assoc-rev", _mul_by_product(2.0, 3.0)) == 1


def test_tiny_is_the_float32_normal_bound() -> None:
    assert _matches("ax-div_as_mul", _div(1 / F32_TINY)) == 1  # 1 / (1 / tiny) = tiny: still normal
    assert _matches("ax-div_as_mul", _div(2 / F32_TINY)) == 0  # its reciprocal is tiny / 2


# ----- exact rules are unaffected ---------------------------------------------------------

@pytest.mark.parametrize("k", [np.nan, np.inf, 1e-40])
def test_exact_rules_still_match_any_constant(k: float) -> None:
    graph = make_graph([h.make_node("Sub", ["x", "k"], ["y"])], {"x": [4, 3]}, ["y"], [_const("k", k)])
    assert RULES["ax-sub_as_add"].exactness is Exactness.EXACT
    assert _matches("ax-sub_as_add", graph) == 1


def test_exact_rules_still_match_before_a_comparison() -> None:
    nodes = [h.make_node("Sub", ["x", "k"], ["d"]), h.make_node("Less", ["d", "x"], ["y"])]
    graph = make_graph(nodes, {"x": [4, 3]}, ["y"], [_const("k", 3.0)])
    assert _matches("ax-sub_as_add", graph) == 1


# ----- decisions downstream ---------------------------------------------------------------

def _mul_mul_then(*tail: onnx.NodeProto, extra: tuple[onnx.TensorProto, ...] = ()) -> Graph:
    """(x * a) * b -> m, then `tail`, whose last output is y."""
    nodes = [h.make_node("Mul", ["x", "a"], ["t"]), h.make_node("Mul", ["t", "b"], ["m"]), *tail]
    return make_graph(nodes, {"x": [4, 3]}, ["y"], [_const("a", 3.0), _const("b", 0.7), *extra])


_SHAPE = nh.from_array(np.array([12], dtype=np.int64), "shape")
_DECISIONS = {
    "less": ([h.make_node("Less", ["m", "x"], ["y"])], ()),
    "equal": ([h.make_node("Equal", ["m", "x"], ["y"])], ()),
    "argmax": ([h.make_node("ArgMax", ["m"], ["y"], axis=1)], ()),
    "floor": ([h.make_node("Floor", ["m"], ["y"])], ()),
    "cast-to-int": ([h.make_node("Cast", ["m"], ["y"], to=TensorProto.INT32)], ()),
    "through-reshape-and-relu": (
        [h.make_node("Reshape", ["m", "shape"], ["r"]), h.make_node("Relu", ["r"], ["s"]),
         h.make_node("Greater", ["s", "zero"], ["y"])],
        (_SHAPE, _const("zero", 0.0)),
    ),
}


@pytest.mark.parametrize("case", sorted(_DECISIONS))
def test_reassociation_refused_where_a_decision_reads_the_value(case: str) -> None:
    tail, extra = _DECISIONS[case]
    assert _matches("ax-mul_assoc", _mul_mul_then(*tail, extra=extra)) == 0


@pytest.mark.parametrize(
    "tail",
    [
        [h.make_node("Sigmoid", ["m"], ["s"]), h.make_node("Less", ["s", "x"], ["y"])],
        [h.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT16)],
        [h.make_node("Relu", ["m"], ["y"])],
    ],
    ids=["decision-after-rounding-op", "cast-to-float", "no-decision"],
)
def test_reassociation_allowed_where_no_decision_reads_the_value_directly(tail: list[onnx.NodeProto]) -> None:
    assert _matches("ax-mul_assoc", _mul_mul_then(*tail)) == 1


# ----- end to end: --no-check on hostile models -------------------------------------------

def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], out_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    graph = h.make_graph(
        nodes, "m", [h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 256])],
        [h.make_tensor_value_info("y", out_type, [4, 256])], inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _div_mul(k: float, b: float = 0.5) -> onnx.ModelProto:
    """(x / k) * b: div_as_mul then mul_assoc would fold it into x * (b / k)."""
    nodes = [h.make_node("Div", ["x", "k"], ["t"]), h.make_node("Mul", ["t", "b"], ["y"])]
    return _model(nodes, [_const("k", k), _const("b", b)])


def _mul_mul_model(a: float, b: float) -> onnx.ModelProto:
    nodes = [h.make_node("Mul", ["x", "a"], ["t"]), h.make_node("Mul", ["t", "b"], ["y"])]
    return _model(nodes, [_const("a", a), _const("b", b)])


def _divisible_by_three() -> onnx.ModelProto:
    """(x / 3) * 3 == x: folding to x * 1 would flip every comparison where rounding lost x."""
    nodes = [
        h.make_node("Div", ["x", "k"], ["t"]), h.make_node("Mul", ["t", "k"], ["u"]),
        h.make_node("Equal", ["u", "x"], ["y"]),
    ]
    return _model(nodes, [_const("k", 3.0)], TensorProto.BOOL)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 256)) * 0.3).astype(np.float32)
    x[0] = np.arange(1, 257, dtype=np.float32) / 7  # values whose thirds round
    return x


_HOSTILE = {
    "div-denormal": _div_mul(1e-40),
    "div-reciprocal-denormal": _div_mul(1e38),
    "div-zero": _div_mul(0.0),
    "mul-product-overflows": _mul_mul_model(1e20, 1e19),
    "mul-product-denormal": _mul_mul_model(1e-20, 1e-20),
    "divisible-by-three": _divisible_by_three(),
}


@pytest.mark.ort
@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_no_check_run_on_a_hostile_model_keeps_outputs_bit_identical(case: str) -> None:
    model = _HOSTILE[case]
    result = taso.optimize_onnx(model, check=False, time_budget_s=3, backend="analytical")
    x = _inputs()
    before, after = _run(model, x), _run(result.model, x)
    assert before.dtype == after.dtype
    assert before.tobytes() == after.tobytes(), f"applied {result.report.applied_rewrites}"


@pytest.mark.ort
def test_no_check_run_still_folds_a_benign_division() -> None:
    """(x / 4) * 0.5 -> x * 0.125: a power-of-two reciprocal, so the fold is even bit-exact."""
    model = _div_mul(4.0)
    result = taso.optimize_onnx(model, check=False, time_budget_s=3, backend="analytical")
    assert result.report.applied_rewrites.get("ax-div_as_mul") == 1
    assert [n.op_type for n in result.model.graph.node] == ["Mul"]
    x = _inputs()
    assert _run(model, x).tobytes() == _run(result.model, x).tobytes()
