"""From a proved pair of enumerated graphs to a `Rule`, and parameter generalization.

Leaves become pattern inputs (weights as CONST inputs; constant leaves become nodes of
their constant op), nodes become pattern nodes ``n0, n1, ...`` and the outputs are mapped
by fingerprint. A rule is made *parametric* by replacing each parameter value that the
source binds (Conv strides/pads/dilations/group, Concat/Split axis, pool windows...) with
a `ParamVar` and proving it again with the variables free: if Z3 proves it, it holds for
all values (the specs' validity checks are the only side conditions); otherwise the rule
keeps its concrete values.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from taso.opspecs import Exactness
from taso.substitutions.generate._axiom_bank import bank_axioms
from taso.substitutions.generate._enumerate import Graph, Role, Universe
from taso.substitutions.rule import (
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Rule,
    TensorRole,
)

GENERALIZABLE = ("strides", "pads", "dilations", "group", "axis", "kernel_shape", "perm",
                 "activation", "count_include_pad")


def _pattern(universe: Universe, graph: Graph) -> tuple[Pattern, dict[int, str]]:
    leaves = universe.leaves
    refs: dict[int, str] = {}
    nodes: list[PatternNode] = []
    for i, leaf in enumerate(leaves):
        if not leaf.op:
            refs[i] = leaf.name
    used = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    for i, leaf in enumerate(leaves):
        if leaf.op and i in used:
            refs[i] = f"c{len(nodes)}"
            nodes.append(PatternNode(refs[i], leaf.op, (), leaf.params))
    tensor = len(leaves)
    for k, node in enumerate(graph.nodes):
        node_id = f"n{k}"
        nodes.append(PatternNode(node_id, node.op, tuple(refs[i] for i in node.inputs),
                                 node.params))
        count = len(dict(node.params).get("split") or ()) if node.op == "Split" else 1
        for j in range(count):
            refs[tensor + j] = node_id if j == 0 else f"{node_id}:{j}"
        tensor += count
    return Pattern(tuple(nodes)), refs


def _inputs(universe: Universe, *graphs: Graph) -> tuple[PatternInput, ...]:
    used = set()
    for g in graphs:
        used |= {i for n in g.nodes for i in n.inputs} | set(g.outputs)
    out = []
    for i, leaf in enumerate(universe.leaves):
        if i in used and not leaf.op:
            role = TensorRole.CONST if leaf.role is Role.WEIGHT else TensorRole.ANY
            out.append(PatternInput(leaf.name, role))
    return tuple(out)


def pair_rule(universe: Universe, source: Graph, target: Graph, math: str) -> Rule:
    """The rule ``source -> target`` (outputs matched in digest order)."""
    src, src_refs = _pattern(universe, source)
    tgt, tgt_refs = _pattern(universe, target)
    outputs = tuple((src_refs[a], tgt_refs[b])
                    for a, b in zip(source.outputs, target.outputs, strict=True))
    inputs = _inputs(universe, source, target)
    shapes = {leaf.name: list(leaf.shape) for leaf in universe.leaves
              if any(i.name == leaf.name for i in inputs)}
    witness = json.dumps([{"shapes": shapes, "bindings": {}}], sort_keys=True)
    body = json.dumps([math, [list(o) for o in outputs]], sort_keys=True)
    rule_id = f"gen-{universe.name}-{hashlib.sha1(body.encode()).hexdigest()[:10]}"
    provenance = (("method", "enumeration"), ("universe", universe.name), ("witness", witness))
    return Rule(rule_id, math, inputs, src, tgt, outputs, provenance=provenance).validate()


def exactness_of(axioms_used: tuple[str, ...]) -> Exactness:
    table = {a.name: a.exactness for a in bank_axioms()}
    if any(table.get(name) is Exactness.REASSOCIATES for name in axioms_used):
        return Exactness.REASSOCIATES
    return Exactness.EXACT


def generalize(rule: Rule) -> tuple[Rule, dict[str, object]] | None:
    """The rule with source-bound parameter values replaced by variables (None: nothing to do)."""
    names: dict[tuple[str, str], str] = {}
    for node in rule.source.nodes:
        for key, value in node.params:
            if key in GENERALIZABLE and not isinstance(value, ParamVar):
                names.setdefault((key, repr(value)), f"{key}{len(names)}")
    if not names:
        return None
    bindings: dict[str, object] = {}

    def swap(pattern: Pattern) -> Pattern:
        nodes = []
        for node in pattern.nodes:
            params = []
            for key, value in node.params:
                var = names.get((key, repr(value)))
                if var is not None:
                    bindings[var] = value
                    value = ParamVar(var)
                params.append((key, value))
            nodes.append(replace(node, params=tuple(params)))
        return Pattern(tuple(nodes))

    general = replace(rule, source=swap(rule.source), target=swap(rule.target))
    return general.validate(), bindings
