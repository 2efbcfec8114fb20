"""Structure-preserving variants of real graphs, for the fidelity tool (not optimizations).

Until the verified rule library is wired in, these hand-written, semantics-preserving
rewrites give the cost model candidates whose ORT latency really differs:

* `split-conv`:   conv(x, W) = concat(conv(x, W[:m]), conv(x, W[m:]))  (group 1, even M)
                  changes kernel shapes, may leave ORT's NCHWc-friendly channel counts;
* `relu-as-max`:  relu(x) = max(x, 0)  blocks ORT's Conv+Relu fusion;
* `double-relu`:  relu(x) = relu(relu(x))  one more memory pass;
* `identity`:     y = identity(y)  ORT removes it: a near no-op.

Each is an `Expand` (see `taso.search.rewrite`); `all_variants` chains them. Splitting
a convolution slices its weights with NumPy (fine for a measurement tool; the search's
real rules use internal weight-transform nodes instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from taso.ir import Graph, Initializer, Node, TensorType
from taso.search.rewrite import Rewrite, apply_rewrite

Site = Callable[[Graph, int], Rewrite | None]


def split_conv(graph: Graph, node_id: int) -> Rewrite | None:
    node = graph.nodes[node_id]
    if node.op_type != "Conv" or node.domain or node.attr("group", 1) != 1:
        return None
    weight = graph.initializers.get(node.inputs[1])
    out_type = graph.types.get(node.outputs[0])
    if weight is None or out_type is None or out_type.shape is None or len(out_type.shape) < 2:
        return None
    channels = out_type.shape[1]
    if not isinstance(channels, int) or channels % 2 or channels < 2:
        return None
    half = channels // 2
    arrays = [weight.array()[:half], weight.array()[half:]]
    has_bias = len(node.inputs) > 2 and node.inputs[2] in graph.initializers
    biases = [graph.initializers[node.inputs[2]].array()] if has_bias else []
    inits, parts, types = [], [], {}
    for k, w in enumerate(arrays):
        w_init = _initializer(graph, f"{node.inputs[1]}_part{k}", w, exclude=[i.name for i in inits])
        inits.append(w_init)
        operands = [node.inputs[0], w_init.name]
        if biases:
            b = biases[0][k * half : (k + 1) * half]
            b_init = _initializer(graph, f"{node.inputs[2]}_part{k}", b, exclude=[i.name for i in inits])
            inits.append(b_init)
            operands.append(b_init.name)
        out = graph.fresh_name(f"{node.outputs[0]}_part{k}")
        shape = (out_type.shape[0], half, *out_type.shape[2:])
        types[out] = TensorType(out_type.elem_type, shape)
        parts.append(dataclasses.replace(node, inputs=tuple(operands), outputs=(out,), proto=None, name=""))
    concat = Node("Concat", "", tuple(p.outputs[0] for p in parts), node.outputs, (("axis", 1),))
    return apply_rewrite(graph, "split-conv", remove=[node_id], add=[*parts, concat], types=types, initializers=inits)


def relu_as_max(graph: Graph, node_id: int) -> Rewrite | None:
    node = graph.nodes[node_id]
    declared = graph.types.get(node.inputs[0]) if node.inputs else None
    if node.op_type != "Relu" or node.domain or declared is None:
        return None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(declared.elem_type)
    zero = _initializer(graph, "zero", np.zeros((), dtype=dtype))
    maximum = Node("Max", "", (node.inputs[0], zero.name), node.outputs)
    return apply_rewrite(graph, "relu-as-max", remove=[node_id], add=[maximum], initializers=[zero])


def double_relu(graph: Graph, node_id: int) -> Rewrite | None:
    node = graph.nodes[node_id]
    declared = graph.types.get(node.outputs[0]) if node.outputs else None
    if node.op_type != "Relu" or node.domain or declared is None:
        return None
    inner = graph.fresh_name(node.outputs[0])
    first = Node("Relu", "", node.inputs, (inner,))
    second = Node("Relu", "", (inner,), node.outputs)
    return apply_rewrite(graph, "double-relu", remove=[node_id], add=[first, second], types={inner: declared})


def insert_identity(graph: Graph, node_id: int) -> Rewrite | None:
    node = graph.nodes[node_id]
    if node.op_type in ("Identity", "Constant") or not node.outputs or node.outputs[0] not in graph.types:
        return None
    inner = graph.fresh_name(node.outputs[0])
    moved = dataclasses.replace(node, outputs=(inner, *node.outputs[1:]), proto=None)
    identity = Node("Identity", "", (inner,), (node.outputs[0],))
    return apply_rewrite(graph, "identity", remove=[node_id], add=[moved, identity], types={inner: graph.types[node.outputs[0]]})


ALL_SITES: tuple[Site, ...] = (split_conv, relu_as_max, double_relu, insert_identity)


def all_variants(graph: Graph, near: frozenset[int] | None = None) -> Iterator[Rewrite]:
    """Every variant rewrite of `graph` (an `Expand`; `near` narrows the nodes tried)."""
    for node_id in sorted(graph.nodes if near is None else near):
        for site in ALL_SITES:
            rewrite = site(graph, node_id)
            if rewrite is not None:
                yield rewrite


def _initializer(graph: Graph, hint: str, array: np.ndarray, exclude: list[str] | None = None) -> Initializer:
    name = graph.fresh_name(hint)
    while name in (exclude or []):
        name = graph.fresh_name(name)
    proto = numpy_helper.from_array(np.ascontiguousarray(array).reshape(np.shape(array)), name)
    return Initializer(name, TensorType(proto.data_type, tuple(array.shape)), proto)
