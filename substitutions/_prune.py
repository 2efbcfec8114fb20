"""Candidate pairs and pruning (TASO §3.3): keep one representative of each family.

Steps, each counted:
* input ordering: the enumerator emits only one of ``x + y`` / ``y + x`` (commutative ops
  with inputs of the same kind) and pairs are unordered (source, target) = (first, second);
* renaming: pairs equal after renaming interchangeable inputs (same role and shape) are
  one pair (the canonical text is the minimum over those renamings);
* common subgraph: if both graphs compute the same leaf node (same op, parameters and
  inputs), the pair follows from the smaller pair with that node as a fresh input;
* common supergraph: if both graphs end in the same operator applied to inputs with equal
  fingerprints, the pair follows from the pair of those inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from taso.substitutions._enumerate import Graph, Node, Universe


def graph_text(universe: Universe, graph: Graph, names: Sequence[str]) -> str:
    """Terms of the outputs with leaves renamed (``names[i]`` for leaf i)."""
    leaves = len(universe.leaves)
    producer: dict[int, tuple[Node, int]] = {}
    tensor = leaves
    for node in graph.nodes:
        count = len(dict(node.params).get("split") or ()) or 1 if node.op == "Split" else 1
        for k in range(count):
            producer[tensor + k] = (node, k)
        tensor += count

    def term(t: int) -> str:
        if t < leaves:
            return names[t]
        node, k = producer[t]
        args = ",".join(term(i) for i in node.inputs)
        return f"{node.op}{list(node.params)}({args})[{k}]"

    return ";".join(sorted(term(t) for t in graph.outputs))


def _leaf_ids(graph: Graph, leaves: int) -> set[int]:
    return {i for n in graph.nodes for i in n.inputs if i < leaves}


def canonical_pair(universe: Universe, a: Graph, b: Graph) -> str:
    """Minimum text of the unordered pair over renamings of interchangeable leaves."""
    leaves = universe.leaves
    used = sorted(_leaf_ids(a, len(leaves)) | _leaf_ids(b, len(leaves))
                  | {t for t in (*a.outputs, *b.outputs) if t < len(leaves)})
    classes: dict[tuple, list[int]] = {}
    for i in used:
        classes.setdefault((leaves[i].role, leaves[i].shape, leaves[i].op, leaves[i].params),
                           []).append(i)
    groups = list(classes.values())
    best = None
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        names = [leaf.name for leaf in leaves]
        for group, perm in zip(groups, perms, strict=True):
            for src, dst in zip(group, perm, strict=True):
                names[src] = f"v{dst}"
        texts = sorted((graph_text(universe, a, names), graph_text(universe, b, names)))
        text = " == ".join(texts)
        best = text if best is None or text < best else best
    return best or ""


def _leaf_nodes(graph: Graph, leaves: int) -> set[tuple]:
    return {(n.op, n.params, n.inputs) for n in graph.nodes if all(i < leaves for i in n.inputs)}


def has_common_subgraph(universe: Universe, a: Graph, b: Graph) -> bool:
    leaves = len(universe.leaves)
    return bool(_leaf_nodes(a, leaves) & _leaf_nodes(b, leaves))


def has_common_supergraph(a: Graph, b: Graph, digests_a: dict[int, bytes],
                          digests_b: dict[int, bytes], leaves: int) -> bool:
    """Both single-output graphs end in the same op whose inputs have equal fingerprints."""
    if len(a.outputs) != 1 or len(b.outputs) != 1 or not a.nodes or not b.nodes:
        return False
    last_a, last_b = a.nodes[-1], b.nodes[-1]
    if (last_a.op, last_a.params) != (last_b.op, last_b.params):
        return False
    if len(last_a.inputs) != len(last_b.inputs):
        return False
    if a.outputs[0] < leaves or b.outputs[0] < leaves:
        return False
    return all(digests_a[x] == digests_b[y]
               for x, y in zip(last_a.inputs, last_b.inputs, strict=True))
