"""IR nodes seen as operator-spec instances, and the per-graph facts matching needs.

`node_view` turns an IR node into (spec, complete params, tensor inputs, outputs): the
form rule patterns are written in. Parameters that ONNX keeps as constant inputs (Clip
bounds, Reshape shape, Split sizes) are read from those constants and the inputs are
dropped from the view; a node whose such input is not a readable constant, whose op has
no spec, whose domain is not ONNX's (internal weight transforms included), or that has
subgraphs or attributes the spec does not model, is opaque (None) and never matched.

A value is *constant* when it is an initializer that no graph input can override, the
output of a `Constant` node, or the output of an internal weight transform (domain
`taso.internal`) whose inputs are all constant.

`GraphIndex` memoizes these facts per graph; `graph_index(graph)` keeps the indexes of
the most recently used graphs (search variants come and go, so the cache is bounded).
Emission (the way back, spec instance -> ONNX IR nodes) is in `_emit.py`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import onnx

from taso._constness import Constness
from taso.ir import Graph, Node
from taso.opspecs import OpSpec, ParamSource, ShapeError, get_spec

MAX_PARAM_ELEMENTS = 4096
"""Constant inputs read as parameters (shapes, axes, bounds) are small; larger ones are not read."""

_DERIVED_ATTRIBUTES = {"Conv": frozenset({"kernel_shape"}), "Split": frozenset({"num_outputs"})}
"""ONNX attributes a spec does not model because they follow from the inputs."""

_INDEX_CACHE_SIZE = 64


@dataclass(frozen=True)
class NodeView:
    """One node as a spec instance: what rule patterns match against."""

    node_id: int
    spec: OpSpec
    params: Mapping[str, object]  # complete (defaults filled), tuples for lists
    inputs: tuple[str, ...]  # tensor inputs (constant-input parameters removed)
    outputs: tuple[str, ...]


class GraphIndex:
    """Memoized per-graph lookups: constness, constant arrays, node views, nodes by op."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._constness = Constness(graph)
        self.overridable = self._constness.overridable
        self.opset = _default_opset(graph)
        self._views: dict[int, NodeView | None] = {}
        self._by_op: dict[str, tuple[int, ...]] | None = None
        self._position: dict[int, int] | None = None

    # ----- constants ---------------------------------------------------------------------
    def is_constant(self, name: str) -> bool:
        return self._constness.is_constant(name)

    def constant_array(self, name: str) -> np.ndarray | None:
        """The value of a small constant (initializer or Constant node), else None."""
        return self._constness.small_value(name, MAX_PARAM_ELEMENTS)

    # ----- views -----------------------------------------------------------------------
    def view(self, node_id: int) -> NodeView | None:
        if node_id not in self._views:
            self._views[node_id] = _make_view(self, node_id)
        return self._views[node_id]

    def nodes_of(self, spec_name: str) -> tuple[int, ...]:
        """Ids (ascending) of the non-opaque nodes whose spec is `spec_name`."""
        if self._by_op is None:
            table: dict[str, list[int]] = {}
            for node_id in sorted(self.graph.nodes):
                view = self.view(node_id)
                if view is not None:
                    table.setdefault(view.spec.name, []).append(node_id)
            self._by_op = {k: tuple(v) for k, v in table.items()}
        return self._by_op.get(spec_name, ())

    def position(self, node_id: int) -> int:
        """Index of the node in the graph's topological order."""
        if self._position is None:
            self._position = {n: i for i, n in enumerate(self.graph.topological_order)}
        return self._position[node_id]


_INDEXES: OrderedDict[int, GraphIndex] = OrderedDict()


def graph_index(graph: Graph) -> GraphIndex:
    """The (cached) index of `graph`; the cache holds the graph, so its id stays unique."""
    index = _INDEXES.get(id(graph))
    if index is not None and index.graph is graph:
        _INDEXES.move_to_end(id(graph))
        return index
    index = GraphIndex(graph)
    _INDEXES[id(graph)] = index
    while len(_INDEXES) > _INDEX_CACHE_SIZE:
        _INDEXES.popitem(last=False)
    return index


def node_view(graph: Graph, node: Node | int) -> NodeView | None:
    """`node` (or node id) of `graph` as a spec instance, or None if it is opaque."""
    if isinstance(node, Node):
        node_id = next((i for i, n in graph.nodes.items() if n is node), None)
        if node_id is None:
            raise KeyError("node is not in this graph")
    else:
        node_id = node
    return graph_index(graph).view(node_id)


def is_constant(graph: Graph, name: str) -> bool:
    """Whether value `name` is a constant of `graph` (see the module docstring)."""
    return graph_index(graph).is_constant(name)


# ----- building views --------------------------------------------------------------------


def _make_view(index: GraphIndex, node_id: int) -> NodeView | None:
    node = index.graph.nodes[node_id]
    if node.domain not in ("", "ai.onnx") or node.captures or node.has_subgraphs:
        return None
    spec = get_spec(node.op_type, node.domain)
    if spec is None or not _attributes_modelled(spec, node):
        return None
    const_positions = {p.input_index or 0 for p in spec.params if p.source is ParamSource.CONST_INPUT}
    arrays = _const_input_arrays(index, node, const_positions)
    if arrays is None:
        return None
    tensors = _tensor_inputs(node.inputs, const_positions)
    if tensors is None or not _arity_ok(spec, len(tensors)):
        return None
    try:
        params = spec.complete(spec.params_from_onnx(dict(node.attributes), arrays))
        outputs = _trim(node.outputs)
        if len(outputs) != spec.num_outputs(params):
            return None
    except (ShapeError, ValueError, TypeError, IndexError):
        return None
    return NodeView(node_id, spec, MappingProxyType(params), tensors, outputs)


def _attributes_modelled(spec: OpSpec, node: Node) -> bool:
    modelled = {p.attr_name for p in spec.params if p.source is ParamSource.ATTRIBUTE}
    modelled |= _DERIVED_ATTRIBUTES.get(spec.name, frozenset())
    # older opsets keep some constant-input parameters as attributes (Clip's bounds before
    # opset 11): read as the same parameter, when the input itself is absent
    modelled |= {p.attr_name for p in spec.params if p.source is ParamSource.CONST_INPUT
                 and not (p.input_index is not None and p.input_index < len(node.inputs) and node.inputs[p.input_index])}
    for name, value in node.attributes:
        if name not in modelled or isinstance(value, onnx.AttributeProto):
            return False
    return True


def _const_input_arrays(
    index: GraphIndex, node: Node, positions: set[int]
) -> list[np.ndarray | None] | None:
    """Input arrays at constant-parameter positions (None where absent); None if unreadable."""
    arrays: list[np.ndarray | None] = [None] * len(node.inputs)
    for position in positions:
        if position >= len(node.inputs) or not node.inputs[position]:
            continue
        array = index.constant_array(node.inputs[position])
        if array is None:
            return None
        arrays[position] = array
    return arrays


def _tensor_inputs(inputs: tuple[str, ...], const_positions: set[int]) -> tuple[str, ...] | None:
    kept = [name for i, name in enumerate(inputs) if i not in const_positions]
    kept = list(_trim(tuple(kept)))
    if "" in kept:
        return None  # an omitted optional input before a present one: not representable
    return tuple(kept)


def _trim(names: tuple[str, ...]) -> tuple[str, ...]:
    end = len(names)
    while end and not names[end - 1]:
        end -= 1
    return names[:end]


def _arity_ok(spec: OpSpec, count: int) -> bool:
    lo, hi = spec.arity
    return count >= lo and (hi is None or count <= hi)


def _default_opset(graph: Graph) -> int:
    template = getattr(graph.context, "template", None)
    imports = template.opset_import if template is not None else ()
    versions = [o.version for o in imports if o.domain in ("", "ai.onnx")]
    return max(versions, default=onnx.defs.onnx_opset_version())


def all_views(graph: Graph) -> list[NodeView]:
    """Views of every non-opaque node, by id (for debugging and tests)."""
    index = graph_index(graph)
    views = (index.view(i) for i in sorted(graph.nodes))
    return [v for v in views if v is not None]


from taso.substitutions._emit import Emission, NameSource, emit_nodes  # noqa: E402  (the way back)

__all__ = [
    "Emission", "GraphIndex", "NameSource", "NodeView", "all_views", "emit_nodes", "graph_index",
    "is_constant", "node_view",
]
