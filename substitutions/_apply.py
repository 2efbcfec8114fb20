"""Apply a rule at a match: replace the matched nodes by the rule's target.

The result is a new `Graph` variant (the input graph is never mutated) in which
  - target nodes that run at inference are ONNX-domain nodes (`_emit.emit_nodes`);
  - target nodes whose inputs are all constant (or that have none) are weight
    transforms: IR nodes of domain `taso.internal`, op type = spec name, attributes =
    the complete spec parameters; export folds them with `spec.evaluate`;
  - each mapped output keeps its value name, so consumers and graph outputs stay valid.
    A mapped output that the target computes as a value with another name (a target
    input, as in `x * 1 = x`, or a target output already named after another mapped
    output) is renamed in its consumers (imported nodes get an edited copy of their
    proto); a graph output cannot be renamed, so an `Identity` produces it instead;
  - new values get types from `spec.infer_shapes`.
`apply` returns None when the target is invalid for the bound shapes (a spec check
fails, a parameter expression cannot be computed, an op is too new for the model's
opset, a computed shape contradicts a known one, a renamed value is read by a subgraph).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from taso.ir import INTERNAL_DOMAIN, Graph, Initializer, Node, TensorType
from taso.opspecs import Lowering, OpKind, OpSpec, ShapeError, spec_by_name
from taso.substitutions._bridge import GraphIndex, graph_index
from taso.substitutions._constraints import Undecidable, target_param, tensor_env
from taso.substitutions._emit import (
    NameSource,
    OpsetError,
    as_attribute,
    emit_nodes,
    ir_shape,
    spec_shape,
)
from taso.substitutions._matcher import Match
from taso.substitutions.rule import PatternNode, Rule, split_ref


class _Invalid(Exception):
    """The target cannot be built for this match."""


def apply(graph: Graph, rule: Rule, match: Match) -> Graph | None:
    """`graph` with `match` replaced by `rule.target`, or None if the target is invalid here."""
    result = apply_or_reason(graph, rule, match)
    return None if isinstance(result, NotApplied) else result


class Unapplicable(enum.Enum):
    """Why a match was not applied."""

    OPSET = "the model's opset lacks an op of the target, which has no decomposition"
    INVALID = "the target is not valid here (a shape contradicts a known one, a renamed value is read by a subgraph)"


@dataclass(frozen=True)
class NotApplied:
    """Why a match's target could not be written, in words and in kind."""

    reason: str
    kind: Unapplicable = Unapplicable.INVALID


def apply_or_reason(graph: Graph, rule: Rule, match: Match) -> Graph | NotApplied:
    """`apply`, saying why when the target cannot be written."""
    if match.rule_id != rule.id or not all(n in graph.nodes for n in match.node_ids):
        return NotApplied("the match is not of this rule or this graph")
    try:
        return _Builder(graph_index(graph), rule, match).build()
    except (_Invalid, ShapeError, Undecidable, ValueError, TypeError, IndexError) as error:
        kind = Unapplicable.OPSET if isinstance(error, OpsetError) else Unapplicable.INVALID
        return NotApplied(str(error).splitlines()[0] if str(error) else type(error).__name__, kind)


class _Builder:
    """Builds the replacement for one match; used once."""

    def __init__(self, index: GraphIndex, rule: Rule, match: Match) -> None:
        self.index, self.graph, self.rule, self.match = index, index.graph, rule, match
        self.tensors = match.tensor_map()
        self.env = {**tensor_env(self.graph, self.tensors, index.is_constant, index.constant_array), **match.param_map()}
        self.names = NameSource(self.graph)
        self.nodes: list[Node] = []
        self.initializers: list[Initializer] = []
        self.types: dict[str, TensorType] = {}
        self.constant: set[str] = set()  # new values computed by weight transforms
        self.target_values: dict[str, str] = {}  # target ref ("t0", "t0:1") -> value name
        self.aliases: list[tuple[str, str]] = []  # (source value, target ref or input)
        self.output_names: dict[str, str] = self._name_mapped_outputs()

    # ----- naming ----------------------------------------------------------------------------
    def _source_value(self, ref: str) -> str:
        node, index = split_ref(ref)
        return self.graph.nodes[self.match.node_of(node)].outputs[index]

    def _name_mapped_outputs(self) -> dict[str, str]:
        """Target ref -> the mapped source value it must be named after (first mapping wins)."""
        names: dict[str, str] = {}
        inputs = {i.name for i in self.rule.inputs}
        for src, dst in self.rule.outputs:
            value = self._source_value(src)
            if dst in inputs or _canonical(dst) in names:
                self.aliases.append((value, dst))
            else:
                names[_canonical(dst)] = value
        return names

    def _value(self, ref: str) -> str:
        if ref in self.tensors:
            return self.tensors[ref]
        return self.target_values[_canonical(ref)]

    def _type(self, name: str) -> TensorType | None:
        return self.types.get(name) or self.graph.types.get(name)

    # ----- building --------------------------------------------------------------------------
    def build(self) -> Graph:
        for node in self.rule.target.nodes:
            self._add_target_node(node)
        renamed = self._resolve_aliases()
        removed = set(self.match.node_ids) | set(renamed)
        removed |= _dead_weight_transforms(self.graph, removed, self.nodes + list(renamed.values()))
        return self.graph.rewrite(
            remove=sorted(removed),
            add=[*self.nodes, *renamed.values()],
            types=self.types,
            initializers=self.initializers,
        )

    def _add_target_node(self, node: PatternNode) -> None:
        spec = spec_by_name(node.op)
        params = spec.complete({k: target_param(v, self.env) for k, v in node.params})
        inputs = tuple(self._value(r) for r in node.inputs)
        shapes = [spec_shape(self._type(i), i) for i in inputs]
        if any(s is None for s in shapes):
            raise _Invalid(f"{node.op}: an input has unknown rank")
        out_shapes = spec.infer_shapes(shapes, params)  # type: ignore[arg-type]
        outputs = tuple(self._output_name(node, k) for k in range(len(out_shapes)))
        elem_type = self._elem_type(inputs)
        for name, shape in zip(outputs, out_shapes, strict=True):
            self._set_type(name, TensorType(elem_type, ir_shape(shape)))
        if all(i in self.constant or self.index.is_constant(i) for i in inputs):
            self._add_weight_transform(spec, params, inputs, outputs)
        elif spec.kind is OpKind.INTERNAL and spec.lowering is Lowering.FOLD:
            raise _Invalid(f"{spec.name} folds constants only, but an input is not constant")
        else:
            emitted = emit_nodes(spec, params, inputs, outputs, self.graph, self.index.opset, types=self.types, names=self.names)
            self.nodes += emitted.nodes
            self.initializers += emitted.initializers
            self.types.update(emitted.types)

    def _output_name(self, node: PatternNode, index: int) -> str:
        ref = f"{node.id}:{index}"
        name = self.output_names.get(ref) or self.names.fresh(f"{self._hint()}_{node.id}_{index}")
        self.target_values[ref] = name
        return name

    def _hint(self) -> str:
        return self._source_value(self.rule.outputs[0][0])

    def _elem_type(self, inputs: tuple[str, ...]) -> int:
        for name in inputs:
            tensor_type = self._type(name)
            if tensor_type is not None:
                return tensor_type.elem_type
        first_output = self.graph.types.get(self._hint())
        return first_output.elem_type if first_output else onnx.TensorProto.FLOAT

    def _set_type(self, name: str, inferred: TensorType) -> None:
        """Record a new value's type; a mapped output must agree with its known type."""
        known = self.graph.types.get(name)
        if known is None or known.shape is None:
            self.types[name] = inferred
        elif not _compatible(known, inferred):
            raise _Invalid(f"{name}: target shape {inferred.shape} contradicts {known.shape}")

    def _add_weight_transform(
        self, spec: OpSpec, params: Mapping[str, object], inputs: tuple[str, ...], outputs: tuple[str, ...]
    ) -> None:
        attributes = tuple(sorted((k, as_attribute(v)) for k, v in params.items()))
        self.nodes.append(Node(spec.name, INTERNAL_DOMAIN, inputs, outputs, attributes))
        self.constant.update(outputs)

    # ----- mapped outputs computed under another name -------------------------------------
    def _resolve_aliases(self) -> dict[int, Node]:
        """Rename consumers of aliased outputs (or add an Identity for graph outputs)."""
        renamed: dict[int, Node] = {}
        matched = self.match.node_ids
        for value, dst in self.aliases:
            replacement = self._value(dst)
            if value in self.graph.outputs:
                self.nodes.append(Node("Identity", "", (replacement,), (value,)))
                continue
            for node_id in self.graph.consumers.get(value, ()):
                if node_id in matched:
                    continue
                node = renamed.get(node_id, self.graph.nodes[node_id])
                renamed[node_id] = _rename_input(node, value, replacement)
        return renamed


def _canonical(ref: str) -> str:
    node, index = split_ref(ref)
    return f"{node}:{index}"


def _compatible(known: TensorType, inferred: TensorType) -> bool:
    if inferred.shape is None or known.shape is None:
        return True
    if len(known.shape) != len(inferred.shape):
        return False
    return all(not (isinstance(a, int) and isinstance(b, int)) or a == b for a, b in zip(known.shape, inferred.shape, strict=True))


def _rename_input(node: Node, old: str, new: str) -> Node:
    if old in node.captures:
        raise _Invalid(f"'{old}' is read inside a subgraph of {node.op_type}; it cannot be renamed")
    inputs = tuple(new if name == old else name for name in node.inputs)
    proto = node.proto
    if proto is not None:
        proto = onnx.NodeProto()
        proto.CopyFrom(node.proto)
        del proto.input[:]
        proto.input.extend(inputs)
    return dataclasses.replace(node, inputs=inputs, proto=proto)


def _dead_weight_transforms(graph: Graph, removed: set[int], added: list[Node]) -> set[int]:
    """Weight transforms that fed only removed nodes (transitively): remove them too."""
    read = {name for node in added for name in node.inputs}
    dead: set[int] = set()
    frontier = [name for node_id in removed for name in graph.nodes[node_id].inputs]
    while frontier:
        value = frontier.pop()
        producer = graph.producers.get(value)
        if producer is None or producer[0] in dead or producer[0] in removed:
            continue
        node = graph.nodes[producer[0]]
        if node.domain != INTERNAL_DOMAIN or value in read or value in graph.outputs:
            continue
        if any(out in read or out in graph.outputs for out in node.outputs):
            continue
        if all(c in removed or c in dead for out in node.outputs for c in graph.consumers.get(out, ())):
            dead.add(producer[0])
            frontier.extend(node.inputs)
    return dead

