"""Graph IR: the immutable, structurally shared representation the search works on.

A `Graph` maps node ids to frozen `Node`s and value names to `TensorType`s. Variants made
by `Graph.rewrite` share every untouched node and weight with their parent: only the
small dicts of references are copied, never tensors. Each node imported from ONNX keeps
its original `NodeProto`, which export writes back verbatim, so nodes we do not
understand (opaque nodes, If/Loop bodies, custom domains) survive byte for byte.

Rewrites keep value names stable: a replacement subgraph produces the same output names
as the nodes it replaces, so consumers, graph outputs and value_info stay valid.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import networkx as nx
import numpy as np
import onnx
from onnx import numpy_helper

from taso.errors import InvalidModelError

Dim = int | str | None
"""A dimension: a concrete size, a symbolic name (kept as written), or None if unknown."""

INTERNAL_DOMAIN = "taso.internal"
"""Domain of internal ops (weight transforms, constants) that export folds away."""

ANONYMOUS_DIM_PARAMS = frozenset({"", "?"})
"""dim_params that name no symbol (paddle2onnx writes `x: float[-1,3,?,?]`): each such dim
is an unknown of its own, never equal to another `?`."""


def is_anonymous_dim(param: str) -> bool:
    return param.strip() in ANONYMOUS_DIM_PARAMS


AttrValue = object
"""A decoded attribute: int, float, str, tuple of those, or an AttributeProto for the rest."""


@dataclass(frozen=True, slots=True)
class TensorType:
    """Element type (an `onnx.TensorProto.DataType`) and shape (None when the rank is unknown)."""

    elem_type: int
    shape: tuple[Dim, ...] | None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)


@dataclass(frozen=True, eq=False)
class Node:
    """One operator application. `proto` is the imported NodeProto (None for nodes made by rewrites)."""

    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, AttrValue], ...] = ()
    name: str = ""
    captures: tuple[str, ...] = ()
    proto: onnx.NodeProto | None = field(default=None, repr=False)

    def attr(self, name: str, default: AttrValue = None) -> AttrValue:
        for key, value in self.attributes:
            if key == name:
                return value
        return default

    @cached_property
    def signature(self) -> bytes:
        """Canonical bytes of op, domain and attributes (not of inputs or names)."""
        parts = [self.domain.encode(), b"\0", self.op_type.encode()]
        for key, value in self.attributes:
            parts += [b"\0", key.encode(), b"=", _attr_key(value)]
        return b"".join(parts)

    @property
    def has_subgraphs(self) -> bool:
        return any(isinstance(v, onnx.AttributeProto) and v.type in _GRAPH_ATTRS for _, v in self.attributes)


_GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def _attr_key(value: AttrValue) -> bytes:
    if isinstance(value, onnx.AttributeProto):
        return value.SerializeToString(deterministic=True)
    return repr(value).encode()


def decode_attributes(proto: onnx.NodeProto) -> tuple[tuple[str, AttrValue], ...]:
    """Decode simple attributes to Python values; keep tensors, graphs and refs as protos."""
    decoded = []
    for attr in proto.attribute:
        decoded.append((attr.name, _decode_attribute(attr)))
    return tuple(sorted(decoded, key=lambda kv: kv[0]))


_SIMPLE = {
    onnx.AttributeProto.INT: lambda a: a.i,
    onnx.AttributeProto.FLOAT: lambda a: a.f,
    onnx.AttributeProto.STRING: lambda a: a.s.decode("utf-8", "surrogateescape"),
    onnx.AttributeProto.INTS: lambda a: tuple(a.ints),
    onnx.AttributeProto.FLOATS: lambda a: tuple(a.floats),
    onnx.AttributeProto.STRINGS: lambda a: tuple(s.decode("utf-8", "surrogateescape") for s in a.strings),
}


def _decode_attribute(attr: onnx.AttributeProto) -> AttrValue:
    if attr.ref_attr_name or attr.doc_string or attr.type not in _SIMPLE:
        return attr
    return _SIMPLE[attr.type](attr)


@dataclass(frozen=True, slots=True)
class Initializer:
    """A weight, referenced by its TensorProto (possibly external data); never copied."""

    name: str
    type: TensorType
    proto: onnx.TensorProto = field(repr=False)
    base_dir: str = ""

    @property
    def is_external(self) -> bool:
        return self.proto.data_location == onnx.TensorProto.EXTERNAL

    def array(self) -> np.ndarray:
        """Materialize the tensor (reads external data from `base_dir` if needed)."""
        if self.is_external:
            proto = onnx.TensorProto()
            proto.CopyFrom(self.proto)
            onnx.external_data_helper.load_external_data_for_tensor(proto, self.base_dir)
            return numpy_helper.to_array(proto)
        return numpy_helper.to_array(self.proto)


@dataclass(frozen=True)
class Graph:
    """An immutable dataflow graph. Build variants with `rewrite`; never mutate the mappings.

    `inputs`/`outputs` are the graph's interface names in order; `nodes` maps stable ids
    to nodes (id order is the original file order, new nodes get larger ids); `types`
    holds every known value type; `initializers` the weights, including ones that rewrites
    create (folded by export). `context` is opaque data the exporter needs (the template
    model); it is shared by all variants.
    """

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: Mapping[int, Node]
    types: Mapping[str, TensorType]
    initializers: Mapping[str, Initializer]
    context: object = field(default=None, compare=False, repr=False)
    outer_scope: frozenset[str] = frozenset()

    # ----- derived views (computed once per graph, cached) -------------------------------
    @cached_property
    def producers(self) -> Mapping[str, tuple[int, int]]:
        """value name -> (node id, output index)."""
        table: dict[str, tuple[int, int]] = {}
        for node_id, node in self.nodes.items():
            for index, out in enumerate(node.outputs):
                if out:
                    table[out] = (node_id, index)
        return MappingProxyType(table)

    @cached_property
    def consumers(self) -> Mapping[str, tuple[int, ...]]:
        """value name -> ids of nodes that read it (explicitly or from a subgraph)."""
        table: dict[str, list[int]] = {}
        for node_id, node in self.nodes.items():
            for name in itertools.chain(node.inputs, node.captures):
                if name:
                    table.setdefault(name, []).append(node_id)
        return MappingProxyType({k: tuple(dict.fromkeys(v)) for k, v in table.items()})

    @cached_property
    def captured(self) -> frozenset[str]:
        """Values read inside some node's subgraph (If/Loop/Scan bodies)."""
        return frozenset(name for node in self.nodes.values() for name in node.captures)

    @cached_property
    def _dag(self) -> nx.DiGraph:
        dag = nx.DiGraph()
        dag.add_nodes_from(self.nodes)
        for node_id, node in self.nodes.items():
            for name in itertools.chain(node.inputs, node.captures):
                source = self.producers.get(name)
                if source is not None:
                    dag.add_edge(source[0], node_id)
        return dag

    def find_cycle(self) -> list[int] | None:
        """Node ids on a cycle, or None for an acyclic graph."""
        try:
            return [edge[0] for edge in nx.find_cycle(self._dag)]
        except nx.NetworkXNoCycle:
            return None

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Node ids in a deterministic topological order (ties broken by id, i.e. file order)."""
        try:
            return tuple(nx.lexicographical_topological_sort(self._dag))
        except nx.NetworkXUnfeasible:
            cycle = self.find_cycle() or []
            names = ", ".join(self.nodes[i].name or self.nodes[i].op_type for i in cycle)
            raise InvalidModelError(f"the graph has a cycle through nodes: {names}") from None

    def ordered_nodes(self) -> Iterator[Node]:
        return (self.nodes[i] for i in self.topological_order)

    def undefined_inputs(self) -> list[tuple[Node, str]]:
        """(node, value) pairs where the node reads a value nothing defines."""
        known = set(self.inputs) | set(self.initializers) | set(self.producers) | self.outer_scope
        return [
            (node, name)
            for node in self.nodes.values()
            for name in itertools.chain(node.inputs, node.captures)
            if name and name not in known
        ]

    # ----- structural identity ---------------------------------------------------------
    # Hashing and equality walk the graph in a *structure-determined* order (post-order
    # depth-first from the outputs, operands in order), so two graphs that differ only in
    # internal names or node ids (e.g. the same two rewrites applied in either order) get
    # the same hash and compare equal. Both are on the search's hot path: no networkx here.

    def _operand_nodes(self, node_id: int) -> list[int]:
        node = self.nodes[node_id]
        found: dict[int, None] = {}
        for name in itertools.chain(node.inputs, node.captures):
            source = self.producers.get(name) if name else None
            if source is not None:
                found[source[0]] = None
        return list(found)

    def _post_order(self, roots: Iterable[int], done: set[int], order: list[int]) -> None:
        for root in roots:
            if root in done:
                continue
            stack = [(root, iter(self._operand_nodes(root)))]
            on_path = {root}
            while stack:
                node_id, pending = stack[-1]
                for operand in pending:
                    if operand in on_path:
                        raise InvalidModelError(f"the graph has a cycle through node {self.nodes[operand].op_type}")
                    if operand not in done:
                        stack.append((operand, iter(self._operand_nodes(operand))))
                        on_path.add(operand)
                        break
                else:
                    stack.pop()
                    on_path.discard(node_id)
                    done.add(node_id)
                    order.append(node_id)

    @cached_property
    def _live_order(self) -> tuple[int, ...]:
        """Nodes that reach an output, in structure-determined topological order."""
        order: list[int] = []
        self._post_order((self.producers[o][0] for o in self.outputs if o in self.producers), set(), order)
        return tuple(order)

    @cached_property
    def value_hashes(self) -> Mapping[str, bytes]:
        """Merkle hash of every value: what computes it, not what it is called."""
        hashes: dict[str, bytes] = {name: _leaf_hash("input", name) for name in self.inputs}
        for name in self.initializers:
            hashes.setdefault(name, _leaf_hash("const", name))
        for name in self.outer_scope:
            hashes.setdefault(name, _leaf_hash("outer", name))
        order = list(self._live_order)
        self._post_order(sorted(self.nodes.keys() - set(order)), set(order), order)
        for node_id in order:
            self._hash_node(self.nodes[node_id], hashes)
        return MappingProxyType(hashes)

    @staticmethod
    def _hash_node(node: Node, hashes: dict[str, bytes]) -> None:
        operands = [hashes.get(i) or _leaf_hash("none", i) if i else _EMPTY for i in node.inputs]
        operands += [hashes.get(c) or _leaf_hash("none", c) for c in node.captures]
        body = b"".join((len(node.signature).to_bytes(4, "little"), node.signature, *operands))
        for index, out in enumerate(node.outputs):
            if out:
                hashes[out] = hashlib.blake2b(body + index.to_bytes(2, "little"), digest_size=16).digest()

    @cached_property
    def _dead_nodes(self) -> tuple[int, ...]:
        """Nodes that reach no output, ordered by their structure (hash of their outputs)."""
        live = set(self._live_order)
        hashes = self.value_hashes
        sinks = [
            i for i in self.nodes
            if i not in live and not any(self.consumers.get(o) for o in self.nodes[i].outputs if o)
        ]
        sinks.sort(key=lambda i: b"".join(hashes.get(o, b"") for o in self.nodes[i].outputs))
        order: list[int] = []
        self._post_order(sinks, live, order)
        return tuple(order)

    @cached_property
    def structural_hash(self) -> bytes:
        """Canonical hash of the whole graph: equal for graphs that differ only in internal names."""
        hashes = self.value_hashes
        parts = [hashes.get(o, b"?") for o in self.outputs]
        dead = [hashes.get(o, b"") for i in self._dead_nodes for o in self.nodes[i].outputs]
        return _digest(b"graph", *[n.encode() for n in self.inputs], b"outputs", *parts, b"dead", *dead)

    def structurally_equal(self, other: Graph) -> bool:
        """Exact check behind `structural_hash` (guards against hash collisions)."""
        if self.inputs != other.inputs or len(self.nodes) != len(other.nodes):
            return False
        if len(self.outputs) != len(other.outputs):
            return False
        return self.canonical_form() == other.canonical_form()

    def canonical_form(self) -> tuple:
        """The graph as nested tuples, internal names replaced by positions in a structural order."""
        index: dict[str, tuple] = {n: ("input", n) for n in self.inputs}
        for name in itertools.chain(self.initializers, self.outer_scope):
            index.setdefault(name, ("const", name))
        rows = []
        for node_id in itertools.chain(self._live_order, self._dead_nodes):
            node = self.nodes[node_id]
            operands = tuple(index.get(i, ("none", i)) if i else () for i in node.inputs)
            captured = tuple(index.get(c, ("none", c)) for c in node.captures)
            for k, out in enumerate(node.outputs):
                if out:
                    index[out] = ("node", len(rows), k)
            rows.append((node.signature, operands, captured, len(node.outputs)))
        return tuple(rows), tuple(index.get(o) for o in self.outputs)

    # ----- variants ------------------------------------------------------------------------
    def rewrite(
        self,
        *,
        remove: Iterable[int] = (),
        add: Iterable[Node] = (),
        types: Mapping[str, TensorType] | None = None,
        initializers: Iterable[Initializer] = (),
    ) -> Graph:
        """A new graph without the nodes `remove`, with `add` appended; everything else shared.

        Added nodes must produce every removed value that is still read (by a remaining
        node or as a graph output); the result is checked for that and for cycles by
        `validate` when the caller asks, not here, to keep the search's hot path cheap.
        """
        nodes = dict(self.nodes)
        for node_id in remove:
            del nodes[node_id]
        next_id = max(self.nodes, default=-1) + 1
        for offset, node in enumerate(add):
            nodes[next_id + offset] = node
        new_inits = dict(self.initializers)
        added_types: dict[str, TensorType] = {}
        for init in initializers:
            new_inits[init.name] = init
            added_types[init.name] = init.type  # an added weight is typed like an imported one
        added_types.update(types or {})
        new_types = self.types if not added_types else MappingProxyType({**self.types, **added_types})
        return Graph(
            inputs=self.inputs,
            outputs=self.outputs,
            nodes=MappingProxyType(nodes),
            types=new_types,
            initializers=MappingProxyType(new_inits),
            context=self.context,
            outer_scope=self.outer_scope,
        )

    def validate(self) -> None:
        """Raise InvalidModelError for a cycle, an undefined input or an unproduced output."""
        missing = self.undefined_inputs()
        if missing:
            node, name = missing[0]
            label = node.name or node.op_type
            raise InvalidModelError(f"node '{label}' reads '{name}', which no node, input or initializer defines")
        defined = set(self.inputs) | set(self.initializers) | set(self.producers)
        for name in self.outputs:
            if name not in defined:
                raise InvalidModelError(f"graph output '{name}' is not produced by any node")
        _ = self.topological_order  # raises on a cycle

    def fresh_name(self, hint: str) -> str:
        """A value name not used anywhere in this graph."""
        used = self.types.keys() | self.producers.keys() | self.initializers.keys() | set(self.inputs)
        for k in itertools.count():
            candidate = f"{hint}__taso{k}"
            if candidate not in used:
                return candidate
        raise AssertionError("unreachable")


_EMPTY = bytes(16)


@functools.lru_cache(maxsize=1 << 16)
def _leaf_hash(kind: str, name: str) -> bytes:
    """Hash of a graph input, weight or undefined name (shared by all variants)."""
    return _digest(kind.encode(), name.encode())


def _digest(*parts: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(len(part).to_bytes(4, "little"))
        h.update(part)
    return h.digest()
