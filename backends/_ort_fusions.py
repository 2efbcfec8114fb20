"""Which nodes ORT folds away on its own, for the analytical model.

ORT's basic graph optimizations fold a BatchNormalization, or a Mul or Add by a
per-channel constant, into the Conv that produces its input (ConvBNFusion,
ConvMulFusion, ConvAddFusion), when that Conv output has no other reader. Such a node
costs nothing in the graph ORT runs, so a roofline that charged for it would predict
gains from rewrites that ORT already makes (measured: folding them ourselves is 1.00x).

The rule depends on the node's producer and on how many nodes read the Conv's output,
so a cost that uses it is keyed by `context` (see `AnalyticalCostModel.node_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

from taso.ir import Graph, Node

_FOLDABLE = frozenset({"BatchNormalization", "Mul", "Add"})


@dataclass(frozen=True)
class ConvContext:
    """The Conv a foldable node reads, and whether anything else reads that output."""

    conv: Node
    operand: int  # which input of the node is the Conv's output
    sole_reader: bool


def conv_context(graph: Graph, node: Node) -> ConvContext | None:
    """The Conv feeding `node`, for ops ORT may fold into it; None otherwise."""
    if node.op_type not in _FOLDABLE or node.domain:
        return None
    operands = node.inputs[:1] if node.op_type == "BatchNormalization" else node.inputs[:2]
    for index, name in enumerate(operands):
        producer = graph.producers.get(name)
        if producer is None:
            continue
        conv = graph.nodes[producer[0]]
        if conv.op_type == "Conv" and not conv.domain:
            sole = len(graph.consumers.get(name, ())) == 1 and name not in graph.outputs
            return ConvContext(conv, index, sole)
    return None


def same_context(a: ConvContext | None, b: ConvContext | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.conv is b.conv and a.operand == b.operand and a.sole_reader == b.sole_reader


def folded_into_conv(graph: Graph, node: Node, context: ConvContext | None) -> bool:
    """True when ORT folds `node` into the Conv that feeds it."""
    if context is None or not context.sole_reader:
        return False
    others = [n for i, n in enumerate(node.inputs) if i != context.operand and n]
    if not all(n in graph.initializers for n in others):
        return False
    if node.op_type == "BatchNormalization":
        return True
    constant = graph.initializers[others[0]].type.shape if len(others) == 1 else None
    channels = _out_channels(graph, context.conv)
    return constant is not None and channels is not None and _folds(node.op_type, constant, channels)


def _out_channels(graph: Graph, conv: Node) -> int | None:
    weight = graph.types.get(conv.inputs[1]) if len(conv.inputs) > 1 else None
    shape = weight.shape if weight is not None else None
    return shape[0] if shape and isinstance(shape[0], int) else None


def _folds(op: str, shape: tuple, channels: int) -> bool:
    """Whether ORT folds `op` by a constant of `shape` into the Conv: (M, 1, 1) or
    (1, M, 1, 1) for Mul and Add, and a 0-d scalar for Mul only (ORT 1.32, measured:
    an Add by (), (1,) or (1, 1, 1, 1) and a Mul by (1,) or (1, 1, 1, 1) stay)."""
    if not all(isinstance(d, int) for d in shape):
        return False
    if tuple(shape) == ():
        return op == "Mul"
    return tuple(shape) in ((channels, 1, 1), (1, channels, 1, 1))
