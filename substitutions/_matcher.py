"""Find where a rule's source pattern occurs in a graph.

Matching is a backtracking search over the pattern's nodes. It starts from a seed (a
graph node for one pattern node) and grows the match one pattern node at a time,
preferring nodes whose graph counterpart is already determined: the producer of a value
a matched node reads, then consumers of a bound value, and only for disconnected
patterns every node of the op. A node matches when its view (`_bridge.node_view`) has
the pattern's spec, input count and parameters (literals equal, `ParamVar`s bound
consistently, unmentioned ones at their default); tensor variables bind consistently,
`CONST` inputs only to constants, `COMPUTED` ones never to a constant. Graph nodes are
matched at most once per match.

A complete binding is refused when
  - a pattern input is bound to a value the matched nodes compute,
  - an internal value (a matched node's output that is not a mapped output) is read
    outside the match or is a graph output,
  - a constraint is false or undecidable on symbolic shapes (see `_constraints`),
  - the rewrite would create a cycle (see `_creates_cycle`),
  - the rule is not bit-exact (`rule.exactness` is not EXACT) and the match breaks one of
    its exactness guards, below,
  - a value it binds or computes is not a float tensor, unless every op of the rule only
    moves elements (`OpSpec.element_moving`): the specs' semantics are real arithmetic,
    and `x / 2` on int64 is not `x * (1 / 2)` (a YOLOv8n export's Slice bounds).

Exactness guards: what `--no-check` (`optimize_onnx(check=False)`) may and may not change.
A `reassociates` rule holds over the reals; in floats it may round differently (`x / 3`
becomes `x * 0.33333334`), and an unchecked run accepts that. It may not change the class
of a value or flip a decision, so such a rule does not match when
  - a constant it binds or folds is not finite and normal (or an exact zero), its target
    divides by a run-time value, ... (the side conditions in `_constraints`): no rewrite
    turns `x / 1e-40` into `x * inf` or `(x * 1e20) * 1e19` into `x * inf`;
  - a value it rewrites is read by a decision (`_DECISIONS`: comparisons, arg-max, rounding,
    quantization, casts to integers), directly or through ops that never round
    (`_NON_ROUNDING`: layout ops, Relu, Max...). A one-ulp change there flips a result
    outright (`x / 3 == t` against `x * (1/3) == t`); after an op that rounds, the
    difference is an ordinary rounding difference like any other.
Exact rules are not guarded: they are bit-exact on every input.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

import onnx

from taso.ir import Graph, Node
from taso.opspecs import Exactness, OpKind, spec_by_name
from taso.substitutions._bridge import GraphIndex, NodeView, graph_index
from taso.substitutions._constraints import (
    ConstantValues,
    constraint_holds,
    node_env,
    side_condition_failure,
    tensor_env,
)
from taso.substitutions._pattern import CompiledNode, CompiledRule, InputRef, NodeRef, compile_rule
from taso.substitutions.rule import ParamVar, Rule, TensorRole


@dataclass(frozen=True)
class Match:
    """One occurrence of a rule's source pattern: which nodes, values and parameters."""

    rule_id: str
    nodes: tuple[tuple[str, int], ...]  # pattern node id -> graph node id, in pattern order
    tensors: tuple[tuple[str, str], ...]  # pattern input -> value name, sorted by input
    params: tuple[tuple[str, object], ...]  # parameter variable -> value, sorted by name

    @property
    def node_ids(self) -> frozenset[int]:
        return frozenset(node_id for _, node_id in self.nodes)

    def node_of(self, pattern_node: str) -> int:
        return dict(self.nodes)[pattern_node]

    def tensor_map(self) -> dict[str, str]:
        return dict(self.tensors)

    def param_map(self) -> dict[str, object]:
        return dict(self.params)


@dataclass(frozen=True)
class _State:
    """A partial match; states are never mutated, each step copies the (tiny) dicts."""

    nodes: Mapping[str, int]
    tensors: Mapping[str, str]
    params: Mapping[str, object]
    values: Mapping[NodeRef, str]  # pattern node outputs whose graph value is known


_EMPTY = _State({}, {}, {}, {})


def find_matches(graph: Graph, rule: Rule, *, near: Collection[int] | None = None) -> list[Match]:
    """All matches of `rule` in `graph`, in a deterministic order.

    With `near`, only matches that include at least one of those node ids (ids not in the
    graph are ignored): the search re-matches around a rewrite this way.
    """
    compiled = compile_rule(rule)
    search = _Search(graph_index(graph), compiled)
    found: dict[tuple[int, ...], Match] = {}
    for state in search.run(near):
        key = tuple(state.nodes[n.id] for n in compiled.nodes)
        if key not in found and search.acceptable(state):
            found[key] = _to_match(rule.id, compiled, state)
    return [found[key] for key in sorted(found)]


def _to_match(rule_id: str, compiled: CompiledRule, state: _State) -> Match:
    return Match(
        rule_id=rule_id,
        nodes=tuple((n.id, state.nodes[n.id]) for n in compiled.nodes),
        tensors=tuple(sorted(state.tensors.items())),
        params=tuple(sorted(state.params.items())),
    )


class _Search:
    """Backtracking search of one compiled rule over one graph."""

    def __init__(self, index: GraphIndex, compiled: CompiledRule) -> None:
        self.index = index
        self.graph = index.graph
        self.compiled = compiled
        self.values = ConstantValues(index)
        self.exactness = emitted_exactness(compiled.rule, index.opset)  # once per search, not per match
        self.floats_only = not _moves_elements_only(compiled.rule)

    # ----- seeds ---------------------------------------------------------------------------
    def run(self, near: Collection[int] | None) -> Iterator[_State]:
        for pattern_node, node_id in self._seeds(near):
            for state in self._binds(_EMPTY, pattern_node, node_id):
                yield from self._extend(state)

    def _seeds(self, near: Collection[int] | None) -> Iterator[tuple[CompiledNode, int]]:
        if near is None:
            root = self.compiled.nodes[-1]
            for node_id in self.index.nodes_of(root.spec.name):
                yield root, node_id
            return
        for node_id in sorted(n for n in near if n in self.graph.nodes):
            view = self.index.view(node_id)
            for pattern_node in self.compiled.nodes:
                if view is not None and view.spec.name == pattern_node.spec.name:
                    yield pattern_node, node_id

    # ----- growing a match -----------------------------------------------------------------
    def _extend(self, state: _State) -> Iterator[_State]:
        if len(state.nodes) == len(self.compiled.nodes):
            yield state
            return
        pattern_node, candidates = self._next(state)
        for node_id in candidates:
            for extended in self._binds(state, pattern_node, node_id):
                yield from self._extend(extended)

    def _next(self, state: _State) -> tuple[CompiledNode, tuple[int, ...]]:
        """The unmatched pattern node with the fewest candidates (determined first)."""
        pending = [n for n in self.compiled.nodes if n.id not in state.nodes]
        for node in pending:
            for ref, value in state.values.items():
                if ref.node == node.id:
                    producer = self.graph.producers.get(value)
                    ok = producer is not None and producer[1] == ref.index
                    return node, (producer[0],) if ok else ()  # type: ignore[index]
        for node in pending:
            for value in self._bound_inputs(state, node):
                return node, self.graph.consumers.get(value, ())
        node = pending[0]
        return node, self.index.nodes_of(node.spec.name)

    def _bound_inputs(self, state: _State, node: CompiledNode) -> Iterator[str]:
        for ref in node.inputs:
            if isinstance(ref, InputRef) and ref.name in state.tensors:
                yield state.tensors[ref.name]
            elif isinstance(ref, NodeRef) and ref in state.values:
                yield state.values[ref]

    def _binds(self, state: _State, node: CompiledNode, node_id: int) -> Iterator[_State]:
        """`state` plus pattern node `node` = graph node `node_id`, for each consistent operand order.

        Commutative ops (Add, Mul: proved by the axioms `add_comm`/`mul_comm`) are tried in
        both operand orders, so rules need not come in every permutation and the search does
        not spend its budget on commuting operands."""
        if node_id in state.nodes.values():
            return
        view = self.index.view(node_id)
        if view is None or view.spec.name != node.spec.name or len(view.inputs) != len(node.inputs):
            return
        orders = [view.inputs]
        if view.spec.commutative and len(view.inputs) == 2 and view.inputs[0] != view.inputs[1]:
            orders.append(view.inputs[::-1])
        for inputs in orders:
            bound = self._bind(state, node, node_id, view, inputs)
            if bound is not None:
                yield bound

    def _bind(
        self, state: _State, node: CompiledNode, node_id: int, view: NodeView, inputs: tuple[str, ...]
    ) -> _State | None:
        values = self._bind_outputs(state, node, view)
        tensors = self._bind_inputs(state, node, inputs, values)
        if values is None or tensors is None:
            return None
        params = _bind_params(state.params, node, view)
        if params is None:
            return None
        return _State({**state.nodes, node.id: node_id}, tensors, params, values)

    def _bind_outputs(self, state: _State, node: CompiledNode, view: NodeView) -> dict[NodeRef, str] | None:
        values = dict(state.values)
        for index, name in enumerate(view.outputs):
            ref = NodeRef(node.id, index)
            if values.setdefault(ref, name) != name:
                return None
        if any(ref.node == node.id and ref.index >= len(view.outputs) for ref in values):
            return None
        return values

    def _bind_inputs(
        self, state: _State, node: CompiledNode, inputs: tuple[str, ...], values: dict[NodeRef, str] | None
    ) -> dict[str, str] | None:
        if values is None:
            return None
        tensors = dict(state.tensors)
        for ref, name in zip(node.inputs, inputs, strict=True):
            if isinstance(ref, NodeRef):
                if values.setdefault(ref, name) != name:
                    return None
            elif tensors.setdefault(ref.name, name) != name:
                return None
            elif not _role_admits(self.compiled.rule.input_role(ref.name), self.index.is_constant(name)):
                return None
        return tensors

    # ----- whole-match checks --------------------------------------------------------------
    def acceptable(self, state: _State) -> bool:
        return (
            self._inputs_outside(state)
            and self._internals_private(state)
            and self._constraints_hold(state)
            and not _creates_cycle(self.index, self.compiled, state)
            and self._exactness_guards_hold(state)
            and self._element_types_hold(state)
        )

    def _element_types_hold(self, state: _State) -> bool:
        if not self.floats_only:
            return True
        types = self.graph.types
        names = (*state.tensors.values(), *state.values.values())
        return all(name in types and types[name].elem_type in _FLOAT_TYPES for name in names)

    def _inputs_outside(self, state: _State) -> bool:
        computed = set(state.values.values())
        needed = {i.name for i in self.compiled.rule.inputs}
        return needed <= state.tensors.keys() and not computed & set(state.tensors.values())

    def _internals_private(self, state: _State) -> bool:
        matched = set(state.nodes.values())
        mapped = {state.values[ref] for ref in self.compiled.mapped_sources}
        outputs = set(self.graph.outputs)
        for node_id in matched:
            for name in self.graph.nodes[node_id].outputs:
                if not name or name in mapped:
                    continue
                if name in outputs or not set(self.graph.consumers.get(name, ())) <= matched:
                    return False
        return True

    def _constraints_hold(self, state: _State) -> bool:
        if not self.compiled.rule.constraints:
            return True
        env = self._env(state)
        return all(constraint_holds(expr, env) for expr in self.compiled.rule.constraints)

    def _env(self, state: _State) -> dict[str, object]:
        return {**tensor_env(self.graph, state.tensors, self.index.is_constant, self.index.constant_array),
                **node_env(self.graph, state.nodes), **state.params}

    def _exactness_guards_hold(self, state: _State) -> bool:
        rule = self.compiled.rule
        if self.exactness is Exactness.EXACT:
            return True
        mapped = {state.values[ref] for ref in self.compiled.mapped_sources}
        if _feeds_decision(self.graph, mapped, set(state.nodes.values())):
            return False
        views = (self.index.view(state.nodes[n.id]) for n in self.compiled.nodes)
        source = tuple(view for view in views if view is not None)  # matched nodes all have views
        return side_condition_failure(rule, self.values, state.tensors, source, self._env(state)) is None


def emitted_exactness(rule: Rule, opset: int) -> Exactness:
    """The rule's exactness as written at `opset`: a target op the opset lacks is written
    as its decomposition, which may round a constant (HardSwish below opset 14)."""
    if rule.exactness is not Exactness.EXACT:
        return rule.exactness
    for node in rule.target.nodes:
        spec = spec_by_name(node.op)
        if spec is not None and opset < spec.min_opset and spec.kind is OpKind.ONNX:
            if spec.decomposition_exactness is not Exactness.EXACT:
                return spec.decomposition_exactness
    return Exactness.EXACT


def _moves_elements_only(rule: Rule) -> bool:
    nodes = (*rule.source.nodes, *rule.target.nodes)
    return all(spec_by_name(node.op).element_moving for node in nodes)


def _role_admits(role: TensorRole, constant: bool) -> bool:
    """Whether a pattern input of `role` may bind a value that is (or is not) `constant`."""
    return {TensorRole.CONST: constant, TensorRole.COMPUTED: not constant}.get(role, True)


def _bind_params(bound: Mapping[str, object], node: CompiledNode, view: NodeView) -> dict[str, object] | None:
    params = dict(bound)
    for name, expected in node.params:
        actual = _normalize(view.params[name])
        if isinstance(expected, ParamVar):
            if params.setdefault(expected.name, actual) != actual:
                return None
        elif actual != expected:
            return None
    return params


def _normalize(value: object) -> object:
    if isinstance(value, list | tuple):
        return tuple(_normalize(v) for v in value)
    return value


# ----- decisions downstream ---------------------------------------------------------------

_DECISIONS = frozenset({
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",  # comparisons
    "ArgMax", "ArgMin", "TopK", "Hardmax", "NonZero",  # which element wins
    "Floor", "Ceil", "Round", "Sign", "Mod", "IsInf", "IsNaN",  # steps
    "QuantizeLinear", "DynamicQuantizeLinear",  # rounding to integers
})
"""ONNX ops whose result jumps when an input moves by one ulp (Cast to a non-float type too)."""

_NON_ROUNDING = frozenset({
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "DepthToSpace",
    "SpaceToDepth", "Relu", "Max", "Min", "Clip", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin",
})
"""ONNX ops each of whose outputs is one of their inputs' elements (or a constant): a
rounding difference reaches their consumers unchanged."""

_FLOAT_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
})


def _feeds_decision(graph: Graph, values: set[str], matched: set[int]) -> bool:
    """Whether a decision op outside the match reads one of `values`, through non-rounding ops."""
    seen, stack = set(values), list(values)
    while stack:
        for node_id in graph.consumers.get(stack.pop(), ()):
            node = graph.nodes[node_id]
            if node_id in matched or node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type in _DECISIONS or _casts_to_integers(graph, node):
                return True
            if node.op_type in _NON_ROUNDING:
                fresh = [out for out in node.outputs if out and out not in seen]
                seen.update(fresh)
                stack.extend(fresh)
    return False


def _casts_to_integers(graph: Graph, node: Node) -> bool:
    if node.op_type == "Cast":
        return node.attr("to") not in _FLOAT_TYPES
    if node.op_type == "CastLike" and len(node.inputs) > 1:
        like = graph.types.get(node.inputs[1])
        return like is None or like.elem_type not in _FLOAT_TYPES
    return False


# ----- cycles ------------------------------------------------------------------------------


def _creates_cycle(index: GraphIndex, compiled: CompiledRule, state: _State) -> bool:
    """Whether replacing the match would close a cycle.

    After the rewrite, target nodes read the bound inputs and produce the mapped outputs;
    the rest of the graph is unchanged. A cycle needs a path, outside the match, from a
    mapped output v to a bound input u that the target uses to compute some mapped output
    v' (and so on back to v). Such a path cannot exist when u is an ancestor of v in the
    source (the graph is acyclic), when u is constant, or when u has no producer; the
    remaining pairs are checked by a forward search bounded by topological position, and
    the resulting small port graph is checked for a cycle.
    """
    edges: dict[int, set[int]] = {}
    for i, out in enumerate(compiled.outputs):
        v = state.values[out.source]
        source_deps = {state.tensors[name] for name in out.source_deps}
        candidates = {
            state.tensors[name]
            for other in compiled.outputs
            for name in other.target_deps
            if state.tensors[name] not in source_deps and _may_be_downstream(index, state.tensors[name])
        }
        if not candidates:
            continue
        reached = _reachable(index, v, candidates, set(state.nodes.values()))
        edges[i] = {j for j, other in enumerate(compiled.outputs) if reached & {state.tensors[n] for n in other.target_deps}}
    return _has_cycle(edges)


def _may_be_downstream(index: GraphIndex, value: str) -> bool:
    return value in index.graph.producers and not index.is_constant(value)


def _reachable(index: GraphIndex, start: str, targets: set[str], matched: set[int]) -> set[str]:
    """Which of `targets` are reachable from value `start` through nodes not in `matched`."""
    graph = index.graph
    limit = max(index.position(graph.producers[t][0]) for t in targets)
    seen_values, seen_nodes, stack, hits = {start}, set(), [start], set()
    while stack:
        value = stack.pop()
        for node_id in graph.consumers.get(value, ()):
            if node_id in matched or node_id in seen_nodes or index.position(node_id) > limit:
                continue
            seen_nodes.add(node_id)
            for out in graph.nodes[node_id].outputs:
                if out and out not in seen_values:
                    seen_values.add(out)
                    hits |= {out} & targets
                    stack.append(out)
    return hits


def _has_cycle(edges: Mapping[int, set[int]]) -> bool:
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done

    def visit(node: int) -> bool:
        state[node] = 1
        for nxt in edges.get(node, ()):
            if state.get(nxt) == 1 or (nxt not in state and visit(nxt)):
                return True
        state[node] = 2
        return False

    return any(node not in state and visit(node) for node in edges)
