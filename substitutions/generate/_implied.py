"""Pruning by smaller rules: drop pairs that rules with fewer operators already imply.

Within a class of equal graphs the generator pairs the representative (the smallest
member) with every other member. A member ``G`` is *reducible* when one of its proper
sub-graphs ``P`` is a member of another class that is already known to rewrite to its own
representative ``rep(P)``: the pair ``(rep(P), P)`` was proved, or was itself pruned as
implied. Replacing ``P`` by ``rep(P)`` inside ``G`` gives an equal graph ``G'`` with no
more operators, so the pair ``(rep, G)`` follows from that smaller rule (applied in
context) and the pair ``(rep, G')``; it adds nothing a search could not compose. This is
Quartz's representative pruning applied to pairs.

A sub-graph is an ancestor-closed set of nodes whose boundary values (consumed outside
it, or outputs of ``G``) are exactly its unconsumed values, so that it is itself one of
the enumerated graphs. Graphs are identified by the text of their output terms with the
universe's own leaf names, which is unique per enumerated graph (canonical order, CSE).
Pairs are decided in rounds of increasing size of ``G``, so the proofs of the smaller
pairs are known when a larger member is examined.
"""

from __future__ import annotations

from collections.abc import Iterator

from taso.substitutions.generate._enumerate import Graph, Universe
from taso.substitutions.generate._prune import tensor_terms


def _node_tensors(graph: Graph, leaves: int) -> list[tuple[int, ...]]:
    """The tensor ids each node produces (Split produces one per piece)."""
    out, tensor = [], leaves
    for node in graph.nodes:
        count = len(dict(node.params).get("split") or ()) or 1 if node.op == "Split" else 1
        out.append(tuple(range(tensor, tensor + count)))
        tensor += count
    return out


def sub_graph_outputs(graph: Graph, leaves: int) -> Iterator[tuple[int, ...]]:
    """The outputs of every proper, non-empty sub-graph of ``graph`` (see module doc)."""
    produced = _node_tensors(graph, leaves)
    producer = {t: k for k, ts in enumerate(produced) for t in ts}
    count = len(graph.nodes)
    for mask in range(1, (1 << count) - 1):
        inside = [k for k in range(count) if mask >> k & 1]
        if any(i >= leaves and not mask >> producer[i] & 1
               for k in inside for i in graph.nodes[k].inputs):
            continue  # not ancestor-closed
        consumed_in = {i for k in inside for i in graph.nodes[k].inputs}
        consumed_out = {i for k in range(count) if not mask >> k & 1
                        for i in graph.nodes[k].inputs}
        boundary = {t for k in inside for t in produced[k]
                    if t in consumed_out or t in graph.outputs}
        if boundary and not boundary & consumed_in:
            yield tuple(sorted(boundary))


def member_text(universe: Universe, graph: Graph) -> str:
    """The identity of an enumerated graph: its output terms with real leaf names."""
    names = [leaf.name for leaf in universe.leaves]
    term = tensor_terms(universe, graph, names)
    return ";".join(sorted(term(t) for t in graph.outputs))


def is_reducible(universe: Universe, graph: Graph, rewritable: set[str]) -> bool:
    """Whether a proper sub-graph of ``graph`` is in ``rewritable`` (texts of graphs known
    to rewrite to a smaller representative of their class)."""
    if len(graph.nodes) < 2 or not rewritable:
        return False
    names = [leaf.name for leaf in universe.leaves]
    term = tensor_terms(universe, graph, names)
    return any(";".join(sorted(term(t) for t in outs)) in rewritable
               for outs in sub_graph_outputs(graph, len(universe.leaves)))
