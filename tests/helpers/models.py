"""Small hand-built ONNX models the tests share.

Most exercise one thing the IR must keep (metadata and doc strings, control flow with outer-
scope reads, a custom domain, a model-local function); `wide_model` and `scaled_chain_model`
give the search rewrites to find.

Every builder checks its model with the full onnx checker, so a broken fixture fails where
it is built instead of looking like a taso bug.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17
IR = 10


def _model(graph: onnx.GraphProto, *, opsets: list[onnx.OperatorSetIdProto] | None = None, **kw: object) -> onnx.ModelProto:
    model = h.make_model(graph, opset_imports=opsets or [h.make_opsetid("", OPSET)], **kw)
    model.ir_version = IR
    onnx.checker.check_model(model, full_check=True)  # fixtures are valid models, or fail here
    return model


def _weight(name: str, shape: tuple[int, ...], seed: int = 0) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return nh.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)


def conv_net(*, batch: int | str = 1, channels: int = 8) -> onnx.ModelProto:
    """Conv -> Relu -> Conv -> Add(per-channel) -> GlobalAveragePool, with metadata and doc strings."""
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1", doc_string="keep me"),
        h.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
        h.make_node("Add", ["c2", "bias"], ["a"], name="add"),
        h.make_node("GlobalAveragePool", ["a"], ["y"], name="gap"),
    ]
    inits = [
        _weight("w1", (channels, 3, 3, 3), 1),
        _weight("b1", (channels,), 2),
        _weight("w2", (channels, channels, 1, 1), 3),
        _weight("bias", (1, channels, 1, 1), 4),
    ]
    graph = h.make_graph(
        nodes, "conv_net",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 16, 16])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [batch, channels, 1, 1])],
        inits, doc_string="a small conv net",
    )
    model = _model(graph, producer_name="taso-tests", doc_string="model doc")
    onnx.helper.set_model_props(model, {"author": "tests", "purpose": "round trip"})
    return model


def if_loop_model() -> onnx.ModelProto:
    """An If whose branches read an outer-scope value, and a Loop with a body."""
    then_g = h.make_graph(
        [h.make_node("Add", ["x", "outer_w"], ["t"])], "then", [],
        [h.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
    )
    else_g = h.make_graph(
        [h.make_node("Mul", ["x", "outer_w"], ["e"])], "else", [],
        [h.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])],
    )
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("Add", ["acc_in", "x"], ["acc_out"]),
        ],
        "body",
        [
            h.make_tensor_value_info("i", TensorProto.INT64, []),
            h.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            h.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2, 3]),
        ],
        [
            h.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            h.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 3]),
        ],
    )
    nodes = [
        h.make_node("Relu", ["x"], ["outer_w"]),
        h.make_node("If", ["cond"], ["branch"], then_branch=then_g, else_branch=else_g, name="the_if"),
        h.make_node("Loop", ["trips", "", "branch"], ["looped"], body=body, name="the_loop"),
    ]
    graph = h.make_graph(
        nodes, "control",
        [
            h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            h.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [h.make_tensor_value_info("looped", TensorProto.FLOAT, [2, 3])],
        [nh.from_array(np.array(3, dtype=np.int64), "trips")],
    )
    return _model(graph)


def custom_domain_model() -> onnx.ModelProto:
    """A node of a custom domain ORT knows nothing about, between standard ops."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"]),
        h.make_node("FancyOp", ["r"], ["f"], domain="com.example", alpha=0.5, mode="fast"),
        h.make_node("Sigmoid", ["f"], ["y"]),
    ]
    graph = h.make_graph(
        nodes, "custom",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return _model(graph, opsets=[h.make_opsetid("", OPSET), h.make_opsetid("com.example", 1)])


def function_model() -> onnx.ModelProto:
    """A model-local function called from the graph."""
    fn = h.make_function(
        "local", "Swish", ["x"], ["y"],
        [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["y"])],
        [h.make_opsetid("", OPSET)],
    )
    graph = h.make_graph(
        [h.make_node("Swish", ["x"], ["y"], domain="local")], "fn",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
    )
    return _model(graph, opsets=[h.make_opsetid("", OPSET), h.make_opsetid("local", 1)], functions=[fn])


def wide_model(branches: int = 6) -> onnx.ModelProto:
    """`branches` parallel Conv->Relu on one input, summed: merge rules give a large search space."""
    nodes, inits, outs = [], [], []
    for k in range(branches):
        weights = np.random.default_rng(k).standard_normal((8, 8, 3, 3)) * 0.1
        inits.append(nh.from_array(weights.astype(np.float32), f"w{k}"))
        nodes += [h.make_node("Conv", ["x", f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]), h.make_node("Relu", [f"c{k}"], [f"r{k}"])]
        outs.append(f"r{k}")
    acc = outs[0]
    for k, other in enumerate(outs[1:]):
        nodes.append(h.make_node("Add", [acc, other], [f"s{k}"]))
        acc = f"s{k}"
    graph = h.make_graph(nodes, "wide", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                         [h.make_tensor_value_info(acc, TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    return _model(graph)


def scaled_chain_model() -> onnx.ModelProto:
    """Conv -> per-channel Mul -> Mul -> Relu -> Relu: rewrites the analytical model takes."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.2).astype(np.float32), "w"),
             nh.from_array(rng.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32), "s1"),
             nh.from_array(rng.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32), "s2")]
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Mul", ["c", "s1"], ["m1"]),
             h.make_node("Mul", ["m1", "s2"], ["m2"]), h.make_node("Relu", ["m2"], ["r1"]),
             h.make_node("Relu", ["r1"], ["y"])]
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])], inits)
    return _model(graph)
