"""The canonical stage: one normal form for the incidental choices converters make.

Rules are written against one form of each operator; converters write several. Before the
search, the graph is brought to that form by changes that leave every value bit for bit
the same (no rule proof is needed: nothing is computed differently, only written
differently):

0. **Constant computations are folded** (`_canonical_fold`, run before everything else):
   arithmetic over constants and over the static dims of `Shape`s becomes the initializers
   ONNX Runtime would compute, and the types downstream are inferred again. TorchScript
   writes timm's "same" padding as forty such nodes per Pad, and no shape after the first
   one was known. Static dims of a shape with a dynamic dim are a simplification: ORT
   does not fold those itself.
1. **Identity nodes are bypassed.** paddle2onnx writes one after most ops; each would stand
   between a pattern's nodes (a Mul, then an Identity, then the Add of a scale-and-shift).
   An Identity whose output is a graph output or is read inside a subgraph stays.
2. **Reshapes back to where they started are bypassed.** A Reshape, Squeeze, Unsqueeze or
   Flatten whose (static) output shape equals that of a value earlier in its chain of such
   ops reads that value instead: each only re-labels the same row-major elements, so the
   chain is the identity (tf2onnx writes SE blocks as GlobalAveragePool, Squeeze, Reshape
   back to (N, C, 1, 1); ORT runs each as a copy and leaves its NCHWc layout around them).
   Nodes left unread by a bypass (the chain, its shape constants) are removed.
3. **Arithmetic that does nothing is bypassed:** ``x * 1``, ``x / 1``, ``x + 0``, ``x - 0``
   with an all-ones or all-zeros constant whose broadcast leaves ``x``'s shape and type.
   ``x + 0`` differs from ``x`` only for ``x = -0.0`` (the result is +0.0, equal in value);
   the rest are bit for bit. (Converters keep a Keras Normalization layer that was never
   adapted, mean 0 and variance 1, as an Add and a Mul over the whole input.)
4. **One-element constants are scalars.** A constant operand of Add, Sub, Mul or Div with one
   element, of rank no higher than the other operand's, is written with shape ``()``: its
   broadcast leaves the output's shape and every value unchanged (the side condition is
   checked on the types: the other operand's rank is known and at least the constant's).
   Real exports write a learnable scalar as a ``(1,)``-shaped initializer or ``Constant``
   node, constant folding leaves ``(1, 1, 1, 1)``; the rules take a scalar ``()``.
5. **Slices that take everything are bypassed.** A Slice whose constant starts, ends and
   steps select every element of each axis they name (start 0, end at or past the static
   size, step 1) returns its input: torch code writes ``x[:, :c]`` with ``c`` the number
   of channels x already has (timm's GhostNet after every ghost module's Concat), and ORT
   copies it and leaves its NCHWc layout around it.
6. **Quantized activations are uint8** (`_canonical_qdq`): an int8 activation
   QuantizeLinear -> DequantizeLinear pair is written with uint8 zero points shifted by 128,
   every float value unchanged; ORT's CPU fuses DQ -> op -> Q into integer kernels only for
   uint8 activations, and its own conversion skips a Q read twice (SE blocks, residuals).

7. **Transposes are sunk until they cancel** (`_canonical_transpose`, run first): a
   Transpose moves below elementwise ops, keepdims reductions and Pads, pairs merge or
   cancel, and the result is kept only with fewer Transposes. tf2onnx leaves a Keras
   MobileNetV3's squeeze-and-excitation blocks on NHWC tensors between Transposes, where
   no NCHW rule matches; ORT makes the same moves at session time. A moved reduction
   may sum the same elements in another order; every other value is bit for bit the same.

Bypassing Identity nodes, writing scalars, folding what ORT folds at load time and sinking
Transposes change nothing ORT runs (it drops Identity nodes and broadcasts either way): they
only let rules match. Bypassing a reshape round trip or a whole slice removes copies ORT
would run, static dims folded remove shape arithmetic it would run on every call, and uint8
activations let ORT fuse more: each is a
*simplification*, listed among the applied rewrites
(`canonical/...`) so that the measured decision can keep it even where no rule applied.
Whatever the search returns is checked against the original and measured like any other
candidate; a canonical graph without a simplification or a rewrite is never returned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from onnx import numpy_helper

from taso._constness import Constness
from taso.ir import Graph, Initializer, Node, TensorType
from taso.pipeline._canonical_fold import STATIC_DIMS, fold_constant_computations
from taso.pipeline._canonical_qdq import (
    SIMPLIFICATION_ID,
    UNSIGNED_ACTIVATIONS,
    unsigned_activations,
)
from taso.pipeline._canonical_transpose import sink_transposes
from taso.pipeline._rewire import STANDARD, rewired

_SMALL = 1 << 16  # elements: a neutral or one-element constant is read, never a weight
_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div"})


IDENTITY = "Identity bypassed"
RESHAPE_ROUND_TRIP = "reshape chain back to its input's shape bypassed"
NO_OP_ARITHMETIC = "x * 1, x / 1, x + 0 or x - 0 bypassed"
SCALAR = "one-element constant made a scalar"
WHOLE_SLICE = "Slice of every element bypassed"
SIMPLIFICATIONS = {
    RESHAPE_ROUND_TRIP: "canonical/reshape-round-trip", NO_OP_ARITHMETIC: "canonical/no-op-arithmetic",
    WHOLE_SLICE: "canonical/whole-slice", STATIC_DIMS: "canonical/static-dims",
    UNSIGNED_ACTIVATIONS: SIMPLIFICATION_ID,
}
"""Normalizations that remove work ORT would do (or let it fuse more), by the id they are
applied under: the measured decision weighs them even where no rule applied."""


@dataclass(frozen=True)
class Canonical:
    """The canonical graph and how many sites each normalization changed."""

    graph: Graph
    counts: Mapping[str, int]

    @property
    def simplified(self) -> dict[str, int]:
        """The simplifications among the changes, by their `canonical/...` ids."""
        return {SIMPLIFICATIONS[what]: n for what, n in self.counts.items() if what in SIMPLIFICATIONS}


def canonicalize(graph: Graph) -> Canonical:
    """`graph` in the normal form the rules are written against (see the module docstring)."""
    counts: Counter[str] = Counter()
    graph = fold_constant_computations(graph, counts)  # first: shapes known downstream let the rest match
    graph = sink_transposes(graph, counts)  # before step 1: a cancelled pair leaves an Identity
    graph = _bypass_identities(graph, counts)
    graph = _bypass_round_trip_reshapes(graph, counts)
    graph = _bypass_no_op_arithmetic(graph, counts)
    graph = _bypass_whole_slices(graph, counts)
    graph = _scalar_constants(graph, counts)
    graph, unsigned = unsigned_activations(graph)
    counts.update(unsigned)
    return Canonical(graph, dict(counts))


# ----- the bypass every normalization below shares ---------------------------------------------
Kept = Callable[[Node], "str | None"]
"""For a node, the input value it passes on unchanged (so that its readers may read that
instead), or None."""


def _bypass(graph: Graph, counts: Counter[str], what: str, kept: Kept, *, prune: bool) -> Graph:
    """Every node `kept` names an input for is bypassed: its readers read that input. A node
    whose output is a graph output or is read inside a subgraph stays. With `prune`,
    reshape-like and Constant nodes left unread are removed too."""
    captured = graph.captured
    renames: dict[str, str] = {}
    for node in graph.nodes.values():
        if node.domain not in STANDARD or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        if out in graph.outputs or out in captured:
            continue
        source = kept(node)
        if source:
            renames[out] = source
    if not renames:
        return graph
    for name, source in renames.items():  # chains resolve to their first input
        while source in renames:
            source = renames[source]
        renames[name] = source
    counts[what] += len(renames)
    graph = _rewire(graph, [graph.producers[name][0] for name in renames], renames)
    return graph.rewrite(remove=_unread_pure_nodes(graph)) if prune else graph


# ----- 1. Identity ----------------------------------------------------------------------------
def _bypass_identities(graph: Graph, counts: Counter[str]) -> Graph:
    def kept(node: Node) -> str | None:
        return node.inputs[0] if node.op_type == "Identity" and len(node.inputs) == 1 else None

    return _bypass(graph, counts, IDENTITY, kept, prune=False)


def _rewire(graph: Graph, removed: list[int], renames: Mapping[str, str]) -> Graph:
    """`graph` without `removed`, every read of a renamed value reading its new name."""
    readers = [
        node_id for node_id, node in graph.nodes.items()
        if node_id not in removed and any(name in renames for name in node.inputs)
    ]
    rewired = [_renamed_inputs(graph.nodes[node_id], renames) for node_id in readers]
    return graph.rewrite(remove=[*removed, *readers], add=rewired)


def _renamed_inputs(node: Node, renames: Mapping[str, str]) -> Node:
    return rewired(node, {i: renames[name] for i, name in enumerate(node.inputs) if name in renames})


# ----- 2. reshape chains that end where they began ------------------------------------------
_RESHAPES = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_PURE = _RESHAPES | {"Constant", "Identity"}


def _bypass_round_trip_reshapes(graph: Graph, counts: Counter[str]) -> Graph:
    def kept(node: Node) -> str | None:
        return _chain_start_of_same_shape(graph, node) if node.op_type in _RESHAPES else None

    return _bypass(graph, counts, RESHAPE_ROUND_TRIP, kept, prune=True)


def _static_shape(graph: Graph, name: str) -> tuple[int, ...] | None:
    tensor_type = graph.types.get(name)
    return tensor_type.shape if tensor_type is not None and tensor_type.is_static else None  # type: ignore[return-value]


def _chain_start_of_same_shape(graph: Graph, node: Node) -> str | None:
    """The earliest value up `node`'s chain of reshape-like ops with `node`'s output shape."""
    shape = _static_shape(graph, node.outputs[0])
    if shape is None:
        return None
    found, current = None, node
    while current.inputs and current.inputs[0]:
        value = current.inputs[0]
        if _static_shape(graph, value) == shape:
            found = value
        producer = graph.producers.get(value)
        if producer is None:
            break
        current = graph.nodes[producer[0]]
        if current.op_type not in _RESHAPES or current.domain not in STANDARD:
            break
    return found


def _unread_pure_nodes(graph: Graph) -> list[int]:
    """Reshape-like and Constant nodes that nothing reads any more (transitively)."""
    captured = graph.captured
    removed: set[int] = set()
    changed = True
    while changed:
        changed = False
        readers: Counter[str] = Counter()
        for node_id, node in graph.nodes.items():
            if node_id not in removed:
                readers.update(name for name in node.inputs if name)
        for node_id, node in graph.nodes.items():
            if node_id in removed or node.op_type not in _PURE or node.domain not in STANDARD:
                continue
            if not any(readers[o] or o in graph.outputs or o in captured for o in node.outputs):
                removed.add(node_id)
                changed = True
    return sorted(removed)


# ----- 3. arithmetic that does nothing --------------------------------------------------------
_NEUTRAL = {"Mul": (1.0, (0, 1)), "Div": (1.0, (1,)), "Add": (0.0, (0, 1)), "Sub": (0.0, (1,))}
"""Op -> (its neutral constant, the operand positions the constant may take)."""


def _bypass_no_op_arithmetic(graph: Graph, counts: Counter[str]) -> Graph:
    constness = Constness(graph)

    def kept(node: Node) -> str | None:
        if node.op_type not in _NEUTRAL or len(node.inputs) != 2:
            return None
        return _operand_kept(graph, constness, node)

    return _bypass(graph, counts, NO_OP_ARITHMETIC, kept, prune=True)


def _operand_kept(graph: Graph, constness: Constness, node: Node) -> str | None:
    """The operand `node` returns unchanged (its other operand a neutral constant), if any."""
    neutral, positions = _NEUTRAL[node.op_type]
    out_type = graph.types.get(node.outputs[0])
    for position in positions:
        const, other = node.inputs[position], node.inputs[1 - position]
        other_type = graph.types.get(other)
        if out_type is None or other_type is None or not out_type.is_static or other_type != out_type:
            continue
        if not constness.is_constant(const) or constness.is_constant(other):
            continue
        value = constness.small_value(const, _SMALL)
        if value is not None and value.size and value.dtype.kind == "f" and bool(np.all(value == neutral)):
            return other
    return None


# ----- 4. one-element constants ---------------------------------------------------------------
def _scalar_constants(graph: Graph, counts: Counter[str]) -> Graph:
    constness = Constness(graph)
    scalars: dict[str, Initializer] = {}
    changed: dict[int, Node] = {}
    for node_id, node in graph.nodes.items():
        if node.op_type not in _BROADCASTING or node.domain not in STANDARD or len(node.inputs) != 2:
            continue
        inputs = list(node.inputs)
        for index, (name, other) in enumerate(((inputs[0], inputs[1]), (inputs[1], inputs[0]))):
            if not _is_scalar_like(graph, constness, name, other):
                continue
            value = constness.small_value(name, _SMALL)
            if value is None:
                continue
            if name not in scalars:
                scalars[name] = _scalar_initializer(graph, name, value, scalars)
            inputs[index] = scalars[name].name
        if tuple(inputs) != node.inputs:
            changed[node_id] = _renamed_inputs(node, dict(zip(node.inputs, inputs, strict=True)))
    if not changed:
        return graph
    counts[SCALAR] += len(changed)
    types = {init.name: init.type for init in scalars.values()}
    graph = graph.rewrite(remove=list(changed), add=list(changed.values()), types=types,
                          initializers=scalars.values())
    return graph.rewrite(remove=_unread_constant_nodes(graph, scalars))


def _unread_constant_nodes(graph: Graph, replaced: Mapping[str, Initializer]) -> list[int]:
    """The `Constant` nodes whose every reader now reads the scalar instead."""
    captured = graph.captured
    out = []
    for name in replaced:
        producer = graph.producers.get(name)
        unread = name not in graph.consumers and name not in graph.outputs and name not in captured
        if producer is not None and unread:
            out.append(producer[0])
    return out


def _is_scalar_like(graph: Graph, constness: Constness, name: str, other: str) -> bool:
    const_type, other_type = graph.types.get(name), graph.types.get(other)
    if const_type is None or other_type is None or const_type.shape is None or other_type.shape is None:
        return False
    shape = const_type.shape
    if not shape or any(dim != 1 for dim in shape) or len(shape) > len(other_type.shape):
        return False
    return constness.is_constant(name) and not constness.is_constant(other)


def _scalar_initializer(graph: Graph, name: str, value: np.ndarray, taken: Mapping[str, Initializer]) -> Initializer:
    fresh = graph.fresh_name(f"{name}_scalar")
    while any(init.name == fresh for init in taken.values()):
        fresh = graph.fresh_name(fresh)
    scalar = np.asarray(value.reshape(()))
    elem_type = graph.types[name].elem_type
    return Initializer(fresh, TensorType(elem_type, ()), numpy_helper.from_array(scalar, fresh))


# ----- 5. slices of everything ----------------------------------------------------------------
_UNBOUNDED = 1 << 62
"""An end this large reaches past any size (exporters write INT64_MAX for ``x[:, 2:]``)."""


def _bypass_whole_slices(graph: Graph, counts: Counter[str]) -> Graph:
    constness = Constness(graph)

    def kept(node: Node) -> str | None:
        if node.op_type != "Slice" or not node.inputs or not node.inputs[0]:
            return None
        return node.inputs[0] if _takes_everything(graph, constness, node) else None

    return _bypass(graph, counts, WHOLE_SLICE, kept, prune=True)


def _slice_arguments(constness: Constness, node: Node) -> tuple[np.ndarray, ...] | None:
    """(starts, ends, axes or None, steps or None) of a Slice, from its attributes (opset
    1-9) or its constant inputs (opset 10 on); None if any is not a known constant."""
    if node.attr("starts") is not None:
        axes = node.attr("axes")
        return (np.asarray(node.attr("starts")), np.asarray(node.attr("ends")),
                None if axes is None else np.asarray(axes), None)
    values = []
    for position in range(1, 5):
        name = node.inputs[position] if position < len(node.inputs) else ""
        value = constness.small_value(name, _SMALL) if name else None
        if name and (value is None or value.dtype.kind not in "iu"):
            return None
        values.append(value)
    return None if values[0] is None or values[1] is None else tuple(values)  # type: ignore[return-value]


def _takes_everything(graph: Graph, constness: Constness, node: Node) -> bool:
    """Whether the Slice's output is its input: every named axis from 0 to its end, step 1."""
    arguments = _slice_arguments(constness, node)
    in_type = graph.types.get(node.inputs[0])
    if arguments is None or in_type is None or in_type.shape is None:
        return False
    starts, ends, axes, steps = (None if a is None else a.reshape(-1).tolist() for a in arguments)
    rank = len(in_type.shape)
    axes = list(range(len(starts))) if axes is None else [a + rank if a < 0 else a for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        return False
    if not all(0 <= axis < rank for axis in axes):
        return False
    return all(_whole_axis(in_type.shape[axis], start, end, step)
               for axis, start, end, step in zip(axes, starts, ends, steps, strict=True))


def _whole_axis(size: object, start: int, end: int, step: int) -> bool:
    """Whether [start:end:step] takes all of an axis of `size` (an int when static)."""
    from_the_start = start == 0 or (isinstance(size, int) and start <= -size)
    to_the_end = end >= _UNBOUNDED or (isinstance(size, int) and end >= size)
    return step == 1 and from_the_start and to_the_end
