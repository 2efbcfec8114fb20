"""Hand-written rules and model builders shared by the matcher and applier tests.

Each rule states its math in one line; the tests at the bottom only check that the
rules themselves are well formed (validation, JSON round trip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from taso._onnx_import import import_model
from taso.ir import Graph
from taso.pipeline._export import export
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Rule,
    TensorRole,
    rule_from_json,
    rule_to_json,
)

ANY, CONST = TensorRole.ANY, TensorRole.CONST
OPSET = 17


def rule(
    rule_id: str,
    math: str,
    inputs: Sequence[tuple[str, TensorRole]],
    source: Sequence[PatternNode],
    target: Sequence[PatternNode],
    outputs: Sequence[tuple[str, str]],
    constraints: Sequence[str] = (),
) -> Rule:
    return Rule(
        id=rule_id,
        math=math,
        inputs=tuple(PatternInput(n, r) for n, r in inputs),
        source=Pattern(tuple(source)),
        target=Pattern(tuple(target)),
        outputs=tuple(outputs),
        constraints=tuple(constraints),
    ).validate()


def node(node_id: str, op: str, *inputs: str, **params: object) -> PatternNode:
    return PatternNode(node_id, op, inputs, tuple(params.items()))


CONV_PARAMS = {"strides": ParamVar("s"), "pads": ParamVar("p"), "dilations": ParamVar("d")}

RELU_RELU = rule(
    "relu_relu", "Relu(Relu(x)) = Relu(x)", [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "n0")],
    [node("t0", "Relu", "x")],
    [("n1", "t0")],
)

IDENTITY = rule(
    "identity", "Identity(x) = x", [("x", ANY)],
    [node("n0", "Identity", "x")], [], [("n0", "x")],
)

CONV_MUL = rule(
    "conv_mul", "Conv(x, w) * c = Conv(x, w * Reshape(c, (-1,1,1,1)))  (c per channel)",
    [("x", ANY), ("w", CONST), ("c", CONST)],
    [node("n0", "Conv", "x", "w", **CONV_PARAMS), node("n1", "Mul", "n0", "c")],
    [
        node("t0", "Reshape", "c", shape=(-1, 1, 1, 1)),
        node("t1", "Mul", "w", "t0"),
        node("t2", "Conv", "x", "t1", **CONV_PARAMS),
    ],
    [("n1", "t2")],
    ["rank('c') == 4", "shape('c') == (1, shape('w')[0], 1, 1)"],
)

CONV_MERGE = rule(
    "conv_merge", "(Conv(x, w1), Conv(x, w2)) = Split(Conv(x, Concat(w1, w2)))",
    [("x", ANY), ("w1", CONST), ("w2", CONST)],
    [node("n0", "Conv", "x", "w1", **CONV_PARAMS), node("n1", "Conv", "x", "w2", **CONV_PARAMS)],
    [
        node("t0", "Concat", "w1", "w2", axis=0),
        node("t1", "Conv", "x", "t0", **CONV_PARAMS),
        node("t2", "Split", "t1", axis=1, split=ParamExpr("(shape('w1')[0], shape('w2')[0])")),
    ],
    [("n0", "t2:0"), ("n1", "t2:1")],
    ["shape('w1')[1:] == shape('w2')[1:]"],
)

CONV_RELU = rule(
    "conv_relu", "Relu(Conv(x, w; s)) = Conv(x, w; s, activation=relu)  (square strides)",
    [("x", ANY), ("w", CONST)],
    [node("n0", "Conv", "x", "w", strides=ParamVar("s")), node("n1", "Relu", "n0")],
    [node("t0", "Conv", "x", "w", strides=ParamVar("s"), activation="relu")],
    [("n1", "t0")],
    ["s[0] == s[1]"],
)

ADD_RELU_PAIR = rule(
    "add_relu_pair", "Relu(x) + Relu(x) = Relu(x) + Relu(x) with one Relu",
    [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "x"), node("n2", "Add", "n0", "n1")],
    [node("t0", "Relu", "x"), node("t1", "Add", "t0", "t0")],
    [("n2", "t1")],
)

RELU_MERGE = rule(
    "relu_merge", "(Relu(a), Relu(b)) = Split(Relu(Concat(a, b)))",
    [("a", ANY), ("b", ANY)],
    [node("n0", "Relu", "a"), node("n1", "Relu", "b")],
    [
        node("t0", "Concat", "a", "b", axis=0),
        node("t1", "Relu", "t0"),
        node("t2", "Split", "t1", axis=0, split=ParamExpr("(shape('a')[0], shape('b')[0])")),
    ],
    [("n0", "t2:0"), ("n1", "t2:1")],
    ["shape('a')[1:] == shape('b')[1:]"],
)

MUL_MUL = rule(
    "mul_mul", "(x * a) * b = x * (a * b)  (a, b constants)",
    [("x", ANY), ("a", CONST), ("b", CONST)],
    [node("n0", "Mul", "x", "a"), node("n1", "Mul", "n0", "b")],
    [node("t0", "Mul", "a", "b"), node("t1", "Mul", "x", "t0")],
    [("n1", "t1")],
)

BATCH_ONE = rule(
    "relu_relu_batch1", "Relu(Relu(x)) = Relu(x)  (batch 1 only: a shape constraint)",
    [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "n0")],
    [node("t0", "Relu", "x")],
    [("n1", "t0")],
    ["shape('x')[0] == 1"],
)

BATCH_NOT_TWO = rule(
    "relu_relu_not2", "Relu(Relu(x)) = Relu(x)  (batch != 2: undecidable on a symbol)",
    [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "n0")],
    [node("t0", "Relu", "x")],
    [("n1", "t0")],
    ["shape('x')[0] != 2"],
)

ALL_RULES = (RELU_RELU, IDENTITY, CONV_MUL, CONV_MERGE, CONV_RELU, ADD_RELU_PAIR, RELU_MERGE, MUL_MUL,
             BATCH_ONE, BATCH_NOT_TWO)


# ----- models ------------------------------------------------------------------------------


def weight(name: str, shape: tuple[int, ...], seed: int = 0) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return nh.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def make_graph(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Sequence[int | str]],
    outputs: Sequence[str],
    initializers: Sequence[onnx.TensorProto] = (),
    *,
    opset: int = OPSET,
) -> Graph:
    """Import a model built from nodes; output types are left to shape inference."""
    graph = h.make_graph(
        list(nodes), "g",
        [h.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [onnx.ValueInfoProto(name=n) for n in outputs],
        list(initializers),
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 10
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    for info in model.graph.output:
        info.CopyFrom(inferred[info.name])
    return import_model(model)


def feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        shape = tuple(d if isinstance(d, int) else 2 for d in graph.types[name].shape or ())
        out[name] = rng.standard_normal(shape).astype(np.float32)
    return out


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Export (folding weight transforms), check, and run on ONNX Runtime."""
    model = export(graph)
    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(inputs))


def assert_same_outputs(before: Graph, after: Graph, *, seed: int = 0, rtol: float = 1e-5) -> None:
    inputs = feeds(before, seed)
    for a, b in zip(run(before, inputs), run(after, inputs), strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)


# ----- the rules themselves -------------------------------------------------------------------


def test_rules_round_trip_through_json() -> None:
    for r in ALL_RULES:
        assert rule_from_json(rule_to_json(r)) == r
