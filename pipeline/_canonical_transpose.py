"""Canonical step 7: Transposes sunk through layout-blind ops until they cancel.

tf2onnx writes a Keras model's NHWC layers between pairs of Transposes around each NCHW
Conv, and its own transpose optimizer does not always remove them: in a tf2onnx
MobileNetV3 export every squeeze-and-excitation block reads ``ReduceMean(axes=[1, 2])`` of
an NHWC tensor, with a Transpose before and after each of its convs. ORT moves those
Transposes at session time, so they cost nothing, but the rules (a spatial mean as
GlobalAveragePool, the gate upsampled for ORT's blocked layout) are written against the
NCHW form and match none of it.

A Transpose ``t = T_P(x)`` is moved below each op that reads it and is one of:

- an elementwise op of one tensor (Relu, Clip, Sigmoid, ...): ``f(T_P(x)) = T_P(f(x))``;
- an elementwise op of two (Add, Mul, ...) whose other operand is a constant (transposed
  with ``P``'s inverse, after its broadcast is written out), or ``T_P(y)`` with the same
  ``P`` and rank: ``g(T_P(x), T_P(y)) = T_P(g(x, y))``;
- a reduction with ``keepdims=1`` and constant axes: its axes are mapped through ``P``;
- another Transpose ``T_Q``: the two become one, ``T_{P∘Q}``, or nothing when they cancel.

Each such reader then reads ``x`` and a Transpose after it writes the reader's old output;
``T_P`` stays for its other readers, and is removed once nothing reads it.
Every element is computed from the same elements by the same op as before (a reduction
may sum them in another order, as after ORT's own transpose optimizer). The pass runs
until nothing moves, and its result is kept only when it has fewer Transposes than the
graph it started from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from onnx import helper, numpy_helper

from taso._constness import Constness
from taso.ir import Graph, Initializer, Node, TensorType
from taso.pipeline._rewire import STANDARD, FreshNames, int64_initializer, rewired, transpose_perm

_SMALL = 1 << 16  # elements of a constant operand transposed along

UNARY = frozenset({
    "Abs", "Cast", "Ceil", "Celu", "Clip", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid",
    "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu",
    "Round", "Selu", "Sigmoid", "Sign", "Softplus", "Softsign", "Sqrt", "Tanh", "ThresholdedRelu",
})
"""Ops whose output element depends on the same element of input 0 alone (Clip's bounds
are scalars)."""

BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"})
REDUCE = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                    "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"})

SUNK = "Transpose sunk through layout-blind ops"
MAX_MOVES_PER_NODE = 4
"""Moves allowed per node of the graph: each move takes a Transpose one op further down a
finite graph, so the pass ends anyway; the bound keeps a pathological graph cheap."""


@dataclass(frozen=True)
class _Move:
    """How one reader of ``T_P(x)`` reads ``x`` instead."""

    reader: int
    replacement: tuple[Node, ...]
    types: tuple[tuple[str, TensorType], ...] = ()
    initializers: tuple[Initializer, ...] = ()


def sink_transposes(graph: Graph, counts: Counter[str]) -> Graph:
    """`graph` with its Transposes sunk (see the module docstring), if that leaves fewer."""
    before = _transposes(graph)
    if not before:
        return graph
    current, moves = graph, 0
    limit = MAX_MOVES_PER_NODE * len(graph.nodes)
    while moves < limit:
        moved = _sink_pass(current)
        if moved is None:
            break
        current, made = moved
        moves += made
    current = _without_unread_transposes(current)
    if _transposes(current) >= before:
        return graph
    counts[SUNK] += before - _transposes(current)
    return current


def _transposes(graph: Graph) -> int:
    return sum(1 for node in graph.nodes.values() if node.op_type == "Transpose" and node.domain in STANDARD)


def _sink_pass(graph: Graph) -> tuple[Graph, int] | None:
    """`graph` with every Transpose that can move moved one op down, in topological order,
    and how many moved; None when none can.

    A Transpose whose node or readers an earlier move of the pass rewrote waits for the
    next pass, so the moves of one pass touch disjoint nodes and are made as one rewrite
    (one pass per op of depth, not one graph per move: 4 s of a 30 s budget on a tf2onnx
    MobileNetV3-Large export went to 280 single moves)."""
    captured = graph.captured
    constness = Constness(graph)
    fresh = FreshNames(graph)
    touched: set[int] = set()
    removed: list[int] = []
    moves: list[_Move] = []
    made = 0
    for node_id in graph.topological_order:
        if node_id in touched:
            continue
        node = graph.nodes[node_id]
        perm = _perm(graph, node)
        if perm is None or node.outputs[0] in graph.outputs or node.outputs[0] in captured:
            continue
        readers = tuple(dict.fromkeys(graph.consumers.get(node.outputs[0], ())))
        if not readers or not touched.isdisjoint(readers):
            continue
        found = [_move(graph, constness, fresh, node, perm, reader) for reader in readers]
        movable = [move for move in found if move is not None]
        if not movable:
            continue
        touched.add(node_id)
        touched.update(readers)
        moves.extend(movable)
        removed.extend(move.reader for move in movable)
        if len(movable) == len(found):
            removed.append(node_id)
        made += 1
    if not made:
        return None
    types = dict(pair for move in moves for pair in move.types)
    return graph.rewrite(remove=removed, add=[node for move in moves for node in move.replacement],
                         types=types, initializers=[init for move in moves for init in move.initializers]), made


def _without_unread_transposes(graph: Graph) -> Graph:
    """`graph` less the Transposes nothing reads any more (a binary op moved above ``T_P(y)``
    reads ``y``)."""
    captured = graph.captured
    while True:
        unread = [node_id for node_id, node in graph.nodes.items()
                  if node.op_type == "Transpose" and node.domain in STANDARD
                  and not graph.consumers.get(node.outputs[0])
                  and node.outputs[0] not in graph.outputs and node.outputs[0] not in captured]
        if not unread:
            return graph
        graph = graph.rewrite(remove=unread)


def _perm(graph: Graph, node: Node) -> tuple[int, ...] | None:
    """A standard Transpose's permutation (its default: the axes reversed); None otherwise."""
    if node.op_type != "Transpose" or len(node.outputs) != 1 or len(node.inputs) != 1:
        return None
    rank = _rank(graph, node.inputs[0])
    return None if rank is None else transpose_perm(node, rank)


def _rank(graph: Graph, name: str) -> int | None:
    tensor_type = graph.types.get(name)
    return None if tensor_type is None or tensor_type.shape is None else len(tensor_type.shape)


def _move(graph: Graph, constness: Constness, fresh: FreshNames, transpose: Node,
          perm: tuple[int, ...], reader_id: int) -> _Move | None:
    reader = graph.nodes[reader_id]
    if reader.domain not in STANDARD or len(reader.outputs) != 1 or reader.has_subgraphs:
        return None
    t, x = transpose.outputs[0], transpose.inputs[0]
    if reader.op_type == "Transpose":
        return _merged(graph, fresh, reader_id, reader, perm, x)
    if reader.op_type in UNARY and reader.inputs[0] == t and t not in reader.inputs[1:]:
        return _below(graph, fresh, reader_id, reader, perm, {0: x})
    if reader.op_type in BINARY and len(reader.inputs) == 2:
        return _binary(graph, constness, fresh, reader_id, reader, perm, t, x)
    if reader.op_type in REDUCE and reader.inputs[0] == t and t not in reader.inputs[1:]:
        return _reduction(graph, constness, fresh, reader_id, reader, perm, x)
    if reader.op_type == "Pad" and reader.inputs[0] == t and t not in reader.inputs[1:]:
        return _pad(graph, constness, fresh, reader_id, reader, perm, x)
    return None


def _below(graph: Graph, fresh: FreshNames, reader_id: int, reader: Node, perm: tuple[int, ...],
           inputs: dict[int, str], *, node: Node | None = None,
           initializers: tuple[Initializer, ...] = ()) -> _Move | None:
    """`reader` (or its changed `node`) reading `inputs`, a Transpose by `perm` after it."""
    out = reader.outputs[0]
    out_type = graph.types.get(out)
    if out_type is None or out_type.shape is None or len(out_type.shape) != len(perm):
        return None
    inner = fresh.take(out)
    inverse = np.argsort(perm)
    inner_type = TensorType(out_type.elem_type, tuple(out_type.shape[int(i)] for i in inverse))
    moved = rewired(node or reader, inputs, outputs=(inner,))
    after = _transpose_node(inner, out, perm, reader.name)
    return _Move(reader_id, (moved, after), ((inner, inner_type),), initializers)


def _transpose_node(source: str, out: str, perm: tuple[int, ...], hint: str) -> Node:
    return Node("Transpose", "", (source,), (out,), (("perm", perm),), name=f"{hint}_sunk_transpose")


def _merged(graph: Graph, fresh: FreshNames, reader_id: int, reader: Node, perm: tuple[int, ...],
            x: str) -> _Move | None:
    """``T_Q(T_P(x))`` as one Transpose of `x`, or an Identity when they cancel."""
    outer = _perm(graph, reader)
    if outer is None or len(outer) != len(perm):
        return None
    composed = tuple(perm[q] for q in outer)
    if composed == tuple(range(len(perm))):
        return _Move(reader_id, (Node("Identity", "", (x,), reader.outputs, name=f"{reader.name}_cancelled"),))
    return _Move(reader_id, (_transpose_node(x, reader.outputs[0], composed, reader.name),))


def _binary(graph: Graph, constness: Constness, fresh: FreshNames, reader_id: int, reader: Node,
            perm: tuple[int, ...], t: str, x: str) -> _Move | None:
    inputs: dict[int, str] = {}
    created: list[Initializer] = []
    for position, name in enumerate(reader.inputs):
        if name == t:
            inputs[position] = x
            continue
        other = _other_operand(graph, constness, fresh, name, perm)
        if other is None:
            return None
        source, init = other
        inputs[position] = source
        created += [init] if init is not None else []
    return _below(graph, fresh, reader_id, reader, perm, inputs, initializers=tuple(created))


def _other_operand(graph: Graph, constness: Constness, fresh: FreshNames, name: str,
                   perm: tuple[int, ...]) -> tuple[str, Initializer | None] | None:
    """What the other operand of a binary op becomes below ``T_P``: ``y`` for ``T_P(y)``, a
    constant transposed by ``P``'s inverse (unchanged if it broadcasts the same either way)."""
    producer = graph.producers.get(name)
    if producer is not None:
        node = graph.nodes[producer[0]]
        if _perm(graph, node) == perm:
            return node.inputs[0], None
    value = constness.small_value(name, _SMALL)
    if value is None or value.ndim > len(perm):
        return None
    if all(dim == 1 for dim in value.shape):
        return name, None
    full = value.reshape((1,) * (len(perm) - value.ndim) + value.shape)
    moved = np.ascontiguousarray(np.transpose(full, np.argsort(perm)))
    fresh_name = fresh.take(name)
    tensor_type = TensorType(helper.np_dtype_to_tensor_dtype(moved.dtype), moved.shape)
    return fresh_name, Initializer(fresh_name, tensor_type, numpy_helper.from_array(moved, fresh_name))


def _reduction(graph: Graph, constness: Constness, fresh: FreshNames, reader_id: int, reader: Node,
               perm: tuple[int, ...], x: str) -> _Move | None:
    """A keepdims reduction over axes ``A`` of ``T_P(x)`` as one over ``P[A]`` of ``x``."""
    if reader.attr("keepdims", 1) != 1:
        return None
    rank = len(perm)
    if reader.attr("axes") is not None:
        axes = [int(a) % rank for a in reader.attr("axes")]  # type: ignore[union-attr]
        mapped = tuple(sorted(perm[a] for a in axes))
        attributes = tuple((k, mapped if k == "axes" else v) for k, v in reader.attributes)
        node = replace(reader, attributes=attributes, proto=None)
        return _below(graph, fresh, reader_id, reader, perm, {0: x}, node=node)
    if len(reader.inputs) < 2 or not reader.inputs[1]:
        return None  # every axis, or none: left alone
    value = constness.small_value(reader.inputs[1], rank)
    if value is None or value.dtype.kind not in "iu" or value.size == 0:
        return None
    init = int64_initializer(fresh, reader.inputs[1], sorted(perm[int(a) % rank] for a in value.reshape(-1)))
    return _below(graph, fresh, reader_id, reader, perm, {0: x, 1: init.name},
                  node=replace(reader, proto=None), initializers=(init,))


def _pad(graph: Graph, constness: Constness, fresh: FreshNames, reader_id: int, reader: Node,
         perm: tuple[int, ...], x: str) -> _Move | None:
    """A Pad of ``T_P(x)`` as one of ``x``: the pads of axis ``i`` go to axis ``P[i]``."""
    rank = len(perm)
    if len(reader.inputs) > 3 and reader.inputs[3]:
        return None  # pads of named axes only (opset 18): left alone

    def moved(pads: Sequence[int]) -> list[int]:
        out = [0] * (2 * rank)
        for i, axis in enumerate(perm):
            out[axis], out[rank + axis] = int(pads[i]), int(pads[rank + i])
        return out

    if reader.attr("pads") is not None:  # opset 1-10
        pads = tuple(reader.attr("pads"))  # type: ignore[arg-type]
        if len(pads) != 2 * rank:
            return None
        attributes = tuple((k, tuple(moved(pads)) if k == "pads" else v) for k, v in reader.attributes)
        return _below(graph, fresh, reader_id, reader, perm, {0: x},
                      node=replace(reader, attributes=attributes, proto=None))
    if len(reader.inputs) < 2 or not reader.inputs[1]:
        return None
    value = constness.small_value(reader.inputs[1], 2 * rank)
    if value is None or value.dtype.kind not in "iu" or value.size != 2 * rank:
        return None
    init = int64_initializer(fresh, reader.inputs[1], moved(value.reshape(-1).tolist()))
    return _below(graph, fresh, reader_id, reader, perm, {0: x, 1: init.name},
                  node=replace(reader, proto=None), initializers=(init,))
