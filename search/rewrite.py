"""What the search consumes: a `Rewrite` (one applied match) and the `Expand` protocol.

The search never matches patterns itself. The caller gives it an `expand` function that
lists the rewrites of a graph; each `Rewrite` carries the rewritten variant (made with
`Graph.rewrite`, so it shares every untouched node and weight with its parent) and the
ids of the nodes it removed and added, so that cost models can price the change locally.

Incremental expansion (`Expansion.INCREMENTAL`, the default): after the search applies a
rewrite `r` to a parent `P` giving child `C`, it calls `expand(C, near)` where `near` is
`affected_nodes(P, C, r)`: the nodes `r` added plus every surviving node adjacent to the
change (producers of the values the removed/added nodes read, consumers of the values
they wrote). The contract for `expand(graph, near)`:

* `near is None`: return every rewrite of `graph`;
* otherwise: return (at least) every rewrite whose `removed` set intersects `near`.

Every other rewrite of `C` is a rewrite of `P` whose matched nodes, their edges and the
consumers of their values are untouched by `r` (a match that depends on a node's
consumer set would include that node in its `removed` set, and a changed consumer set
puts the node in `near`). The search re-applies those parent rewrites to `C` itself
(`rebase`), without calling the matcher. Patterns must therefore remove every node their
validity depends on (TASO's patterns do: every source node is replaced). Cycles that a
rebased rewrite could create through the changed region are caught when the search
hashes the candidate (a cyclic graph has no topological order) and the candidate is
dropped. An `expand` that ignores `near` and returns everything is still correct, only
slower (the duplicates are removed by structural hashing).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

import onnx

from taso.ir import Graph, Initializer, Node, TensorType


@dataclass(frozen=True)
class Rewrite:
    """One rule applied at one match: the variant and the node ids that changed.

    `removed` are ids in the parent graph; `added` are ids in `graph` (the variant).
    """

    rule_id: str
    graph: Graph
    removed: frozenset[int]
    added: frozenset[int]

    @classmethod
    def between(cls, rule_id: str, parent: Graph, variant: Graph) -> Rewrite:
        """`variant` as a rewrite of `parent`: the ids only one of them has changed."""
        return cls(rule_id, variant, frozenset(parent.nodes.keys() - variant.nodes.keys()),
                   frozenset(variant.nodes.keys() - parent.nodes.keys()))


class Expansion(enum.Enum):
    """How the search asks `expand` for the rewrites of a child graph."""

    FULL = "full"
    """Always `expand(graph, None)`: every rewrite of every explored graph."""
    INCREMENTAL = "incremental"
    """`expand(child, near)` plus the parent's still-valid rewrites, re-applied."""


class Expand(Protocol):
    """Lists the rewrites of `graph` (see the module docstring for `near`)."""

    def __call__(self, graph: Graph, near: frozenset[int] | None) -> Iterable[Rewrite]: ...


def apply_rewrite(
    parent: Graph,
    rule_id: str,
    *,
    remove: Iterable[int],
    add: Iterable[Node],
    types: Mapping[str, TensorType] | None = None,
    initializers: Iterable[Initializer] = (),
) -> Rewrite:
    """Build a `Rewrite` with `Graph.rewrite`, recording which ids were removed and added."""
    removed = frozenset(remove)
    added_nodes = tuple(add)
    graph = parent.rewrite(remove=removed, add=added_nodes, types=types, initializers=initializers)
    first = max(parent.nodes, default=-1) + 1
    return Rewrite(rule_id, graph, removed, frozenset(range(first, first + len(added_nodes))))


def affected_nodes(parent: Graph, child: Graph, rewrite: Rewrite) -> frozenset[int]:
    """Added nodes plus surviving nodes whose producers or consumers the rewrite changed."""
    touched = set(rewrite.added)
    for graph, ids in ((parent, rewrite.removed), (child, rewrite.added)):
        for node_id in ids:
            node = graph.nodes[node_id]
            for name in (*node.inputs, *node.captures):
                source = child.producers.get(name)
                if source is not None:
                    touched.add(source[0])
            for name in node.outputs:
                touched.update(child.consumers.get(name, ()))
    return frozenset(i for i in touched if i in child.nodes)


def dangling_values(parent: Graph, rewrite: Rewrite) -> list[str]:
    """What `rewrite` broke in the graph's structure, as messages (empty: nothing).

    The structural invariant: every node input and every graph output is produced by
    exactly one node or is a graph input, an initializer or an outer-scope name. For a
    sound `parent` only the change can break it, so this looks at the change alone:
    inputs of added nodes, values of removed nodes that are still read (by a remaining
    node or as a graph output) and the outputs of added nodes (one producer each, never
    an input's or a weight's name). Cost: proportional to the change (plus the child's
    producer/consumer tables, which hashing builds anyway).
    """
    child = rewrite.graph
    defined = _definer(child)
    problems: list[str] = []
    written: set[str] = set()
    for node_id in sorted(rewrite.added):
        node = child.nodes[node_id]
        for name in (*node.inputs, *node.captures):
            if name and not defined(name):
                problems.append(f"added {node.op_type} reads '{name}', which nothing defines")
        for name in node.outputs:
            if not name:
                continue
            before = parent.producers.get(name)
            if name in written or (before is not None and before[0] not in rewrite.removed):
                problems.append(f"'{name}' has two producers (one an added {node.op_type})")
            elif name in child.inputs or name in child.initializers:
                problems.append(f"added {node.op_type} writes '{name}', a graph input or weight")
            written.add(name)
    outputs = set(child.outputs)
    for node_id in sorted(rewrite.removed):
        for name in parent.nodes[node_id].outputs:
            if not name or defined(name):
                continue
            if name in outputs:
                problems.append(f"graph output '{name}' lost its producer")
            for reader in child.consumers.get(name, ()):
                problems.append(f"{child.nodes[reader].op_type} reads '{name}', whose producer was removed")
    return problems


def structural_defects(graph: Graph) -> list[str]:
    """The whole-graph form of the invariant `dangling_values` checks (for tests and debugging)."""
    defined = _definer(graph)
    problems = [
        f"{node.op_type} reads '{name}', which nothing defines"
        for node in graph.nodes.values()
        for name in (*node.inputs, *node.captures)
        if name and not defined(name)
    ]
    problems += [f"graph output '{name}' has no producer" for name in graph.outputs if not defined(name)]
    written: dict[str, int] = {}
    for node in graph.nodes.values():
        for name in node.outputs:
            if name:
                written[name] = written.get(name, 0) + 1
    problems += [f"'{name}' has {count} producers" for name, count in sorted(written.items()) if count > 1]
    problems += [f"a node writes '{name}', a graph input or weight" for name in sorted(
        written.keys() & (set(graph.inputs) | set(graph.initializers)))]
    return problems


def _definer(graph: Graph) -> Callable[[str], bool]:
    producers, initializers, inputs, outer = graph.producers, graph.initializers, set(graph.inputs), graph.outer_scope
    return lambda name: name in producers or name in initializers or name in inputs or name in outer


@dataclass(frozen=True)
class Move:
    """A rewrite reduced to its delta, so it can be re-applied to another graph cheaply."""

    rule_id: str
    removed: frozenset[int]
    removed_nodes: tuple[Node, ...]
    added_nodes: tuple[Node, ...]
    types: Mapping[str, TensorType]
    initializers: tuple[Initializer, ...]

    @classmethod
    def of(cls, parent: Graph, rewrite: Rewrite) -> Move:
        variant = rewrite.graph
        added = tuple(variant.nodes[i] for i in sorted(rewrite.added))
        written = {name for node in added for name in node.outputs if name}
        read = {name for node in added for name in node.inputs if name}
        types = {n: variant.types[n] for n in written if n in variant.types}
        inits = tuple(
            variant.initializers[n]
            for n in sorted(read)
            if n in variant.initializers and parent.initializers.get(n) is not variant.initializers[n]
        )
        removed_nodes = tuple(parent.nodes[i] for i in sorted(rewrite.removed))
        return cls(rewrite.rule_id, rewrite.removed, removed_nodes, added, types, inits)

    def rebase(self, graph: Graph) -> Rewrite | None:
        """This move applied to `graph`, or None if `graph` lacks one of its removed nodes."""
        ids = sorted(self.removed)
        if any(graph.nodes.get(i) is not node for i, node in zip(ids, self.removed_nodes, strict=True)):
            return None
        added, types = self._renamed_for(graph)
        inits, renames = _fresh_initializers(graph, self.initializers)
        if renames:
            added = tuple(_rename(node, renames) for node in added)
        return apply_rewrite(
            graph, self.rule_id, remove=self.removed, add=added, types=types, initializers=inits
        )

    def _renamed_for(self, graph: Graph) -> tuple[tuple[Node, ...], Mapping[str, TensorType]]:
        """Give fresh names to new values whose names `graph` already uses (another rewrite
        made from the same parent may have picked the same fresh name)."""
        kept = {name for node in self.removed_nodes for name in node.outputs}
        used = graph.types.keys() | graph.producers.keys()
        new = {name for node in self.added_nodes for name in node.outputs if name and name not in kept}
        clashes = sorted(name for name in new if name in used)
        if not clashes:
            return self.added_nodes, self.types
        renames = {}
        for name in clashes:
            fresh = graph.fresh_name(name)
            while fresh in renames.values():
                fresh = graph.fresh_name(fresh)
            renames[name] = fresh
        nodes = tuple(_rename(node, renames) for node in self.added_nodes)
        types = {renames.get(name, name): value for name, value in self.types.items()}
        return nodes, types


def _rename(node: Node, renames: Mapping[str, str]) -> Node:
    if not any(name in renames for name in (*node.inputs, *node.outputs)):
        return node
    return replace(
        node,
        inputs=tuple(renames.get(n, n) for n in node.inputs),
        outputs=tuple(renames.get(n, n) for n in node.outputs),
        proto=None,
    )


def _fresh_initializers(
    graph: Graph, initializers: tuple[Initializer, ...]
) -> tuple[tuple[Initializer, ...], dict[str, str]]:
    """Rename new weights whose names `graph` already gives to a different weight."""
    kept: list[Initializer] = []
    renames: dict[str, str] = {}
    for init in initializers:
        existing = graph.initializers.get(init.name)
        if existing is None or existing is init:
            kept.append(init)
            continue
        fresh = graph.fresh_name(init.name)
        proto = onnx.TensorProto()
        proto.CopyFrom(init.proto)
        proto.name = fresh
        kept.append(replace(init, name=fresh, proto=proto))
        renames[init.name] = fresh
    return tuple(kept), renames
