"""Transposes sunk through layout-blind ops until inverse pairs cancel: one layout per region.

tf2onnx writes a Keras (NHWC) model with a Transpose pair around every Conv: ``T(0,3,1,2)``
into the Conv, ``T(0,2,3,1)`` out of it, and everything in between (the batch-norm Mul/Add,
activations, SE gating) runs in NHWC. The rules are written for NCHW, so they never match
there. This module moves those Transposes through the ops in between until inverse pairs
meet and cancel, leaving the in-between ops in the Conv's layout.

**Regions.** An op is *layout-blind* when permuting its data operands' axes permutes its
output the same way and computes the same numbers: elementwise unary ops whose value does
not depend on the element's position in memory (Relu, Clip, Sigmoid, HardSigmoid,
HardSwish, Cast, ...; see `_UNARY`), binary/variadic elementwise ops (Add, Sub, Mul,
Div, Max, Min) whose operands are each a rank-r value or a constant of rank <= r (the
broadcast is then unambiguous: the constant is padded with leading 1s to rank r and permuted
like the data), and Pad with constant pads (the pads are permuted). A *region* is a maximal
set of such ops of one rank r connected through computed values. For a permutation P, the
region is *flipped*: every value v it computes is held as ``v' = transpose(v, P^-1)`` instead.
At its border:

* an input ``u = Transpose(x, P)`` is read as ``x`` (the Transpose is removed when nothing
  else reads it); any other computed input gets ``Transpose(u, P^-1)``;
* a reader ``Transpose(v, Q)`` becomes ``Transpose(v', P o Q)``, removed when that is the
  identity (where its output is a graph output, the region writes that output); any other reader (an op that cares about layout, a graph output, a subgraph)
  reads ``Transpose(v', P)``, written under ``v``'s own name.

A region is flipped only when the transposed elements removed exceed those added (static
shapes; an unknown dimension counts as 64), one region at a time until none gains: the total
transposed size strictly falls, so the loop ends. A region is left alone when one of its ops
reads a Transpose of a value the region itself computes.

**Exactness.** Each flipped op computes the same operation on the same numbers in another
order of memory, so every value is unchanged bit for bit (checked on ORT with all
optimizations off, tests/test_canonical_layout.py). Reductions are the exception: a
ReduceMean over NHWC axes (1, 2) and over NCHW axes (2, 3) sum in another order, and ORT's
results differ in the last bits (measured: ~4e-8 on a (1,56,56,16) mean). They are borders
by default (`Reductions.BORDER`); `Reductions.REMAPPED` moves them too, with their axes
remapped (keepdims=1 only): values equal as real numbers, not bit for bit.

**Not wired into `canonicalize` yet.** On its own it measures 1.00x (ORT's transpose
optimizer does the same at ORT_ENABLE_ALL), and the rule it was built for needs reductions
moved: on tf2onnx's Keras MobileNetV3-small, sinking with `Reductions.REMAPPED` lets the
SE rule ReduceMean -> GlobalAveragePool match (10 sites; the search then keeps it,
1.02-1.04x over today's output), but that changes the last bits of each mean, which the
canonical stage must not. The next step: `BORDER` here, and ReduceMean moved through the
Transpose by a proved rule (a `reassociates` one), taken together with the SE rewrite it
enables (joint sweeps pair only rules that both match the current graph today: they would
need to pair a sweep with the rules matching only after it). Wiring then: ``graph, sunk = sink_transposes(graph)`` in
``canonicalize`` after the Identity bypass, ``counts.update(sunk)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np
import onnx
from onnx import numpy_helper

from taso._constness import Constness
from taso.ir import Graph, Initializer, Node, TensorType
from taso.pipeline._rewire import FreshNames, rewired

TRANSPOSES_CANCELLED = "transposes sunk until inverse pairs cancelled"
SIMPLIFICATION_ID = "canonical/transpose-sinking"

_STANDARD = ("", "ai.onnx")
_UNARY = frozenset({
    "Abs", "Cast", "Ceil", "Clip", "Erf", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Identity", "IsInf",
    "IsNaN", "LeakyRelu", "Neg", "Not", "Reciprocal", "Relu", "Round", "Sigmoid", "Sign", "Softsign", "Sqrt",
    "Tanh", "ThresholdedRelu",
})
"""Elementwise ops of one data operand (input 0; Clip's bounds are scalars) whose result does
not depend on where the element sits in memory: exact or one rounding per element, or ORT's
vector kernels that treat a buffer's tail alike (measured). Log, Softplus, Mish, Elu, Sin and
Cos are left out: ORT computes the tail of a buffer another way (measured up to 1.2e-7)."""
_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min"})
"""Elementwise ops whose every input is data, broadcast numpy-style."""
_REDUCTIONS = frozenset({
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
})
_MAX_CONSTANT = 1 << 20  # elements: a constant operand is permuted by value
_UNKNOWN_DIM = 64  # a dimension without a static size, when pricing a Transpose


class Reductions(Enum):
    """What a Reduce* op is to a region."""

    BORDER = "border"
    """It stays where it is: every value bit for bit unchanged."""
    REMAPPED = "remapped"
    """It joins the region, axes remapped: the same sum in another order (equal as reals)."""


@dataclass(frozen=True)
class _Region:
    """Connected layout-blind ops of one rank."""

    nodes: frozenset[int]
    rank: int


def sink_transposes(
    graph: Graph, *, reductions: Reductions = Reductions.BORDER
) -> tuple[Graph, dict[str, int]]:
    """`graph` with regions flipped where that removes transposed elements (see the module
    docstring), and how many Transpose nodes that removed in all."""
    before = _transpose_count(graph)
    for _ in range(len(graph.nodes) + 1):
        constness = Constness(graph)
        best: tuple[int, _Region, tuple[int, ...]] | None = None
        for region in _regions(graph, constness, reductions):
            for perm in _candidate_perms(graph, constness, region):
                gain = _gain(graph, constness, region, perm)
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, region, perm)
        if best is None:
            break
        graph = _flip(graph, constness, best[1], best[2])
    removed = before - _transpose_count(graph)
    return graph, ({TRANSPOSES_CANCELLED: removed} if removed > 0 else {})


def _transpose_count(graph: Graph) -> int:
    return sum(node.op_type == "Transpose" and node.domain in _STANDARD for node in graph.nodes.values())


# ----- which ops are layout-blind -------------------------------------------------------------
def _data_positions(node: Node) -> tuple[int, ...]:
    """The inputs of `node` that carry the layout."""
    if node.op_type in _ELEMENTWISE:
        return tuple(range(len(node.inputs)))
    return (0,)


def _rank(graph: Graph, name: str) -> int | None:
    known = graph.types.get(name)
    return len(known.shape) if known is not None and known.shape is not None else None


def _blind_rank(graph: Graph, constness: Constness, node: Node, reductions: Reductions) -> int | None:
    """The rank of the values `node` reads and writes if it is layout-blind, else None."""
    if node.domain not in _STANDARD or len(node.outputs) != 1 or node.captures or not node.inputs:
        return None
    if not _side_inputs_fixed(graph, constness, node, reductions):
        return None
    rank = _rank(graph, node.outputs[0])
    if rank is None or rank == 0:
        return None
    computed = 0
    for position in _data_positions(node):
        name = node.inputs[position]
        if not name:
            return None
        if constness.is_constant(name):
            if (_rank(graph, name) or 0) > rank or constness.small_value(name, _MAX_CONSTANT) is None:
                return None
        elif _rank(graph, name) == rank:
            computed += 1
        else:
            return None
    return rank if computed else None


def _side_inputs_fixed(graph: Graph, constness: Constness, node: Node, reductions: Reductions) -> bool:
    """`node` is a layout-blind op kind whose non-data inputs are constants it can remap."""
    side = [name for i, name in enumerate(node.inputs) if i not in _data_positions(node) and name]
    if not all(constness.is_constant(name) for name in side):
        return False
    if node.op_type in _UNARY or node.op_type in _ELEMENTWISE:
        return True
    if node.op_type == "Pad":
        return len(node.inputs) < 4 and (len(node.inputs) < 2 or _constant_ints(constness, node.inputs[1]) is not None)
    if node.op_type in _REDUCTIONS and reductions is Reductions.REMAPPED:
        return node.attr("keepdims", 1) == 1 and _axes(constness, node) is not None
    return False


def _constant_ints(constness: Constness, name: str) -> list[int] | None:
    value = constness.small_value(name, 64)
    return None if value is None or value.dtype.kind not in "iu" else [int(v) for v in value.reshape(-1)]


def _axes(constness: Constness, node: Node) -> list[int] | None:
    """A reduction's axes ([] for none given), or None when they are not constant."""
    if len(node.inputs) > 1 and node.inputs[1]:
        return _constant_ints(constness, node.inputs[1])
    return list(node.attr("axes", ()))  # type: ignore[arg-type]


# ----- regions ------------------------------------------------------------------------------------
def _regions(graph: Graph, constness: Constness, reductions: Reductions) -> list[_Region]:
    ranks = {i: r for i, node in graph.nodes.items() if (r := _blind_rank(graph, constness, node, reductions))}
    parent = {i: i for i in ranks}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for node_id in ranks:
        node = graph.nodes[node_id]
        linked = [*graph.consumers.get(node.outputs[0], ())]
        linked += [graph.producers[graph.nodes[node_id].inputs[p]][0] for p in _data_positions(node)
                   if node.inputs[p] in graph.producers]
        for other in linked:
            if other in ranks and ranks[other] == ranks[node_id]:
                parent[root(other)] = root(node_id)
    groups: dict[int, set[int]] = {}
    for node_id in ranks:
        groups.setdefault(root(node_id), set()).add(node_id)
    return [_Region(frozenset(group), ranks[next(iter(group))]) for _, group in sorted(groups.items())]


def _transpose_perm(node: Node, rank: int) -> tuple[int, ...] | None:
    if node.op_type != "Transpose" or node.domain not in _STANDARD:
        return None
    perm = node.attr("perm")
    perm = tuple(perm) if perm is not None else tuple(reversed(range(rank)))  # type: ignore[arg-type]
    return perm if len(perm) == rank else None


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


def _is_identity(perm: Sequence[int]) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


def _sources(graph: Graph, constness: Constness, region: _Region) -> dict[str, Node | None]:
    """Computed values the region reads but does not compute -> their producer (if any)."""
    found: dict[str, Node | None] = {}
    for node_id in sorted(region.nodes):
        node = graph.nodes[node_id]
        for position in _data_positions(node):
            name = node.inputs[position]
            producer = graph.producers.get(name)
            if (producer is None or producer[0] not in region.nodes) and not constness.is_constant(name):
                found[name] = graph.nodes[producer[0]] if producer else None
    return found


def _outer_readers(graph: Graph, region: _Region, value: str) -> list[int]:
    return [i for i in graph.consumers.get(value, ()) if i not in region.nodes]


def _escapes(graph: Graph, value: str) -> bool:
    """`value` is a graph output or is read inside a subgraph."""
    return value in graph.outputs or any(value in graph.nodes[i].captures for i in graph.consumers.get(value, ()))


def _candidate_perms(graph: Graph, constness: Constness, region: _Region) -> list[tuple[int, ...]]:
    found: dict[tuple[int, ...], None] = {}
    for producer in _sources(graph, constness, region).values():
        perm = _transpose_perm(producer, region.rank) if producer is not None else None
        if perm is not None and not _is_identity(perm):
            found[perm] = None
    for node_id in sorted(region.nodes):
        for reader in _outer_readers(graph, region, graph.nodes[node_id].outputs[0]):
            perm = _transpose_perm(graph.nodes[reader], region.rank)
            if perm is not None and not _is_identity(perm):
                found[_inverse(perm)] = None
    return list(found)


# ----- what a flip gains ----------------------------------------------------------------------------
def _size(graph: Graph, name: str) -> int:
    known = graph.types.get(name)
    dims = known.shape if known is not None and known.shape is not None else ()
    return math.prod(d if isinstance(d, int) else _UNKNOWN_DIM for d in dims)


def _removable(graph: Graph, transpose: Node, readers: Iterable[int]) -> bool:
    """Nothing but `readers` reads `transpose`'s output."""
    out = transpose.outputs[0]
    return not _escapes(graph, out) and set(graph.consumers.get(out, ())) <= set(readers)


@dataclass(frozen=True)
class _Sink:
    """What becomes of one value the region computes, after a flip."""

    value: str
    cancelled: tuple[int, ...] = ()
    """Transposes back to the region's layout that read it: removed, their readers read v'."""
    named: int | None = None
    """A cancelled Transpose whose output escapes: the region writes that output itself."""
    composed: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """Other Transposes that read it -> the perm they apply to v' instead."""
    restore: bool = False
    """Something else reads it (an op, a graph output, a subgraph): Transpose(v', perm) writes v."""


def _sink(graph: Graph, region: _Region, perm: tuple[int, ...], value: str) -> _Sink | None:
    """How `value`'s readers outside the region read it after a flip by `perm`; None when
    the region reads a Transpose of it (a flip would have to rename that both ways)."""
    cancelled: list[int] = []
    named: int | None = None
    composed: list[tuple[int, tuple[int, ...]]] = []
    restore = _escapes(graph, value)
    for reader in _outer_readers(graph, region, value):
        node = graph.nodes[reader]
        sink = _transpose_perm(node, region.rank)
        if sink is None:
            restore = True
            continue
        if any(i in region.nodes for i in graph.consumers.get(node.outputs[0], ())):
            return None
        perm_of_reader = tuple(perm[q] for q in sink)
        if not _is_identity(perm_of_reader):
            composed.append((reader, perm_of_reader))
        elif not _escapes(graph, node.outputs[0]):
            cancelled.append(reader)
        elif named is None:
            named = reader
        else:
            composed.append((reader, perm_of_reader))
    return _Sink(value, tuple(cancelled), named, tuple(composed), restore)


def _gain(graph: Graph, constness: Constness, region: _Region, perm: tuple[int, ...]) -> int:
    """Transposed elements a flip by `perm` removes, less those it adds (<= 0: no flip)."""
    inner = _inverse(perm)
    gain = 0
    for name, producer in _sources(graph, constness, region).items():
        source = _transpose_perm(producer, region.rank) if producer is not None else None
        if source is not None and _is_identity([source[i] for i in inner]):
            gain += _size(graph, name) if _removable(graph, producer, region.nodes) else 0  # type: ignore[arg-type]
        else:
            gain -= _size(graph, name)
    for node_id in region.nodes:
        sink = _sink(graph, region, perm, graph.nodes[node_id].outputs[0])
        if sink is None:
            return 0
        removed = len(sink.cancelled) + (sink.named is not None) - sink.restore
        gain += removed * _size(graph, sink.value)
    return gain


# ----- the flip -------------------------------------------------------------------------------------
def _flip(graph: Graph, constness: Constness, region: _Region, perm: tuple[int, ...]) -> Graph:
    """`graph` with `region`'s values held as transpose(v, perm^-1) (see the module docstring)."""
    inner = _inverse(perm)
    flip = _Flip(graph, inner, FreshNames(graph))
    renames: dict[str, str] = {}
    removed: set[int] = set(region.nodes)
    for name, producer in _sources(graph, constness, region).items():
        source = _transpose_perm(producer, region.rank) if producer is not None else None
        if source is not None and _is_identity([source[i] for i in inner]):
            renames[name] = producer.inputs[0]  # type: ignore[union-attr]
            if _removable(graph, producer, region.nodes):  # type: ignore[arg-type]
                removed.add(graph.producers[name][0])
        else:
            renames[name] = flip.transposed(name, inner)
    sinks = [_sink(graph, region, perm, graph.nodes[node_id].outputs[0]) for node_id in sorted(region.nodes)]
    outer_renames: dict[str, str] = {}
    for sink in sinks:
        assert sink is not None  # _gain refused the region otherwise
        named = graph.nodes[sink.named].outputs[0] if sink.named is not None else None
        renames[sink.value] = named or flip.permuted_name(sink.value)
        for reader in sink.cancelled:
            outer_renames[graph.nodes[reader].outputs[0]] = renames[sink.value]
        for reader, reader_perm in sink.composed:
            node = graph.nodes[reader]
            flip.added.append(_transpose_node(renames[sink.value], node.outputs[0], reader_perm, node.name))
        if sink.restore:
            flip.added.append(_transpose_node(renames[sink.value], sink.value, perm, ""))
        removed.update(sink.cancelled, (r for r, _ in sink.composed), () if sink.named is None else (sink.named,))
    for node_id in sorted(region.nodes):
        flip.added.append(_flipped_node(graph.nodes[node_id], constness, renames, flip))
    for node_id, node in graph.nodes.items():
        if node_id not in removed and any(name in outer_renames for name in node.inputs):
            removed.add(node_id)
            flip.added.append(rewired(node, {i: outer_renames[n] for i, n in enumerate(node.inputs) if n in outer_renames}))
    return graph.rewrite(remove=sorted(removed), add=flip.added, types=flip.types, initializers=flip.initializers.values())


class _Flip:
    """What a flip adds: nodes, value types and permuted constants."""

    def __init__(self, graph: Graph, inner: tuple[int, ...], fresh: FreshNames) -> None:
        self.graph, self.inner, self.fresh = graph, inner, fresh
        self.added: list[Node] = []
        self.types: dict[str, TensorType] = {}
        self.initializers: dict[str, Initializer] = {}

    def permuted_name(self, value: str) -> str:
        """A fresh name for `value` held as transpose(value, inner), typed accordingly."""
        name = self.fresh.take(f"{value}_t")
        known = self.graph.types.get(value)
        if known is not None and known.shape is not None:
            self.types[name] = TensorType(known.elem_type, tuple(known.shape[i] for i in self.inner))
        return name

    def transposed(self, value: str, perm: tuple[int, ...]) -> str:
        """A Transpose of `value` by `perm` (= inner), added; its output's name."""
        name = self.permuted_name(value)
        self.added.append(_transpose_node(value, name, perm, ""))
        return name

    def constant(self, name: str, value: np.ndarray) -> str:
        """`value` padded to the region's rank with leading 1s and permuted, as an initializer."""
        if value.ndim == 0:
            return name
        if name not in self.initializers:
            full = value.reshape((1,) * (len(self.inner) - value.ndim) + value.shape)
            permuted = np.ascontiguousarray(np.transpose(full, self.inner))
            fresh = self.fresh.take(f"{name}_t")
            elem = self.graph.types[name].elem_type if name in self.graph.types else onnx.helper.np_dtype_to_tensor_dtype(permuted.dtype)
            self.initializers[name] = Initializer(fresh, TensorType(elem, permuted.shape), numpy_helper.from_array(permuted, fresh))
        return self.initializers[name].name


def _flipped_node(node: Node, constness: Constness, renames: Mapping[str, str], flip: _Flip) -> Node:
    """`node` reading and writing the permuted values, its axis-indexed constants remapped."""
    inputs = list(node.inputs)
    for position in _data_positions(node):
        name = node.inputs[position]
        value = constness.small_value(name, _MAX_CONSTANT) if constness.is_constant(name) else None
        inputs[position] = flip.constant(name, value) if value is not None else renames[name]
    attributes = dict(node.attributes)
    perm = _inverse(flip.inner)  # axis a of a value is axis perm[a] of its permuted form
    if node.op_type == "Pad" and len(inputs) > 1 and inputs[1]:
        pads = _constant_ints(constness, inputs[1]) or []
        rank = len(perm)
        remapped = [pads[flip.inner[i]] for i in range(rank)] + [pads[rank + flip.inner[i]] for i in range(rank)]
        inputs[1] = _ints(flip, inputs[1], remapped)
    elif node.op_type == "Pad" and "pads" in attributes:
        pads = list(attributes["pads"])  # type: ignore[arg-type]
        rank = len(perm)
        attributes["pads"] = tuple(pads[flip.inner[i]] for i in range(rank)) + tuple(pads[rank + flip.inner[i]] for i in range(rank))
    elif node.op_type in _REDUCTIONS:
        axes = _axes(constness, node) or []
        remapped = sorted(perm[a % len(perm)] for a in axes)
        if len(node.inputs) > 1 and node.inputs[1]:
            inputs[1] = _ints(flip, inputs[1], remapped)
        elif axes:
            attributes["axes"] = tuple(remapped)
    outputs = (renames[node.outputs[0]],)
    return replace(node, inputs=tuple(inputs), outputs=outputs, attributes=tuple(sorted(attributes.items())), proto=None)


def _ints(flip: _Flip, hint: str, values: list[int]) -> str:
    name = flip.fresh.take(hint)
    array = np.asarray(values, dtype=np.int64)
    flip.initializers[name] = Initializer(name, TensorType(onnx.TensorProto.INT64, array.shape), numpy_helper.from_array(array, name))
    return name


def _transpose_node(source: str, target: str, perm: Sequence[int], name: str) -> Node:
    return Node("Transpose", "", (source,), (target,), (("perm", tuple(int(p) for p in perm)),), name=name)
