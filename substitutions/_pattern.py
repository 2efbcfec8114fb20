"""A rule's source pattern compiled for matching (and its output dependencies for cycles).

Compiling resolves spec objects, fills unmentioned parameters with the spec defaults
(a pattern node that does not mention a parameter matches only its default), turns
input references into `InputRef`/`NodeRef`, and records, for every mapped output, which
pattern inputs it depends on in the source and in the target. Compiled patterns are
cached per rule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from taso.opspecs import OpSpec, spec_by_name
from taso.substitutions.rule import Pattern, Rule, split_ref


@dataclass(frozen=True)
class InputRef:
    """A pattern input (tensor variable)."""

    name: str


@dataclass(frozen=True)
class NodeRef:
    """Output `index` of pattern node `node`."""

    node: str
    index: int


Ref = InputRef | NodeRef


@dataclass(frozen=True)
class CompiledNode:
    id: str
    spec: OpSpec
    inputs: tuple[Ref, ...]
    params: tuple[tuple[str, object], ...]  # every spec param: literal or ParamVar


@dataclass(frozen=True)
class MappedOutput:
    """One (source value, target value) pair with the pattern inputs each side depends on."""

    source: NodeRef
    target: Ref
    source_deps: frozenset[str]
    target_deps: frozenset[str]


@dataclass(frozen=True)
class CompiledRule:
    rule: Rule
    nodes: tuple[CompiledNode, ...]
    outputs: tuple[MappedOutput, ...]

    def node(self, node_id: str) -> CompiledNode:
        return next(n for n in self.nodes if n.id == node_id)

    @functools.cached_property
    def mapped_sources(self) -> frozenset[NodeRef]:
        return frozenset(o.source for o in self.outputs)


def parse_ref(ref: str, inputs: frozenset[str]) -> Ref:
    if ref in inputs:
        return InputRef(ref)
    node, index = split_ref(ref)
    return NodeRef(node, index)


@functools.lru_cache(maxsize=4096)
def compile_rule(rule: Rule) -> CompiledRule:
    names = frozenset(i.name for i in rule.inputs)
    nodes = tuple(_compile_node(n.id, n.op, n.inputs, n.param_map(), names) for n in rule.source.nodes)
    source_deps = _dependencies(rule.source, names)
    target_deps = _dependencies(rule.target, names)
    outputs = []
    for src, dst in rule.outputs:
        source = parse_ref(src, names)
        target = parse_ref(dst, names)
        assert isinstance(source, NodeRef)
        deps = frozenset({target.name}) if isinstance(target, InputRef) else target_deps[target.node]
        outputs.append(MappedOutput(source, target, source_deps[source.node], deps))
    return CompiledRule(rule, nodes, tuple(outputs))


def _compile_node(
    node_id: str, op: str, inputs: tuple[str, ...], params: dict[str, object], names: frozenset[str]
) -> CompiledNode:
    spec = spec_by_name(op)
    full = tuple((p.name, _normalize(params.get(p.name, p.default))) for p in spec.params)
    return CompiledNode(node_id, spec, tuple(parse_ref(r, names) for r in inputs), full)


def _normalize(value: object) -> object:
    if isinstance(value, list | tuple):
        return tuple(_normalize(v) for v in value)
    return value


def _dependencies(pattern: Pattern, names: frozenset[str]) -> dict[str, frozenset[str]]:
    """Pattern node id -> the pattern inputs it depends on (transitively)."""
    deps: dict[str, frozenset[str]] = {}
    for node in pattern.nodes:
        found: set[str] = set()
        for ref in node.inputs:
            parsed = parse_ref(ref, names)
            if isinstance(parsed, InputRef):
                found.add(parsed.name)
            else:
                found |= deps[parsed.node]
        deps[node.id] = frozenset(found)
    return deps
