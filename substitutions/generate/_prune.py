"""Candidate pairs and pruning (TASO §3.3): keep one representative of each family.

Steps, each counted:
* input ordering: the enumerator emits only one of ``x + y`` / ``y + x`` (commutative ops
  with inputs of the same kind) and pairs are unordered (source, target) = (first, second);
* renaming: pairs equal after renaming interchangeable inputs (same role and shape) are
  one pair (the canonical text is the minimum over those renamings);
* leaf merging: a pair that is an instance of a proved pair with two interchangeable
  inputs identified (``x @ x`` from ``x @ y``) is implied by it (`merged_instances`);
* common subgraph: if both graphs compute the same leaf node (same op, parameters and
  inputs), the pair follows from the smaller pair with that node as a fresh input;
* common supergraph: if both graphs end in the same operator applied to inputs with equal
  fingerprints, the pair follows from the pair of those inputs.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence

from taso.substitutions.generate._enumerate import Graph, Node, Universe


def tensor_terms(universe: Universe, graph: Graph, names: Sequence[str]
                 ) -> Callable[[int], str]:
    """The term of each tensor of ``graph`` (leaf i printed as ``names[i]``), memoized."""
    leaves = len(universe.leaves)
    producer: dict[int, tuple[Node, int]] = {}
    tensor = leaves
    for node in graph.nodes:
        count = len(dict(node.params).get("split") or ()) or 1 if node.op == "Split" else 1
        for k in range(count):
            producer[tensor + k] = (node, k)
        tensor += count

    @functools.cache
    def term(t: int) -> str:
        if t < leaves:
            return names[t]
        node, k = producer[t]
        args = ",".join(term(i) for i in node.inputs)
        return f"{node.op}{list(node.params)}({args})[{k}]"

    return term


def graph_text(universe: Universe, graph: Graph, names: Sequence[str]) -> str:
    """Terms of the outputs with leaves renamed (``names[i]`` for leaf i)."""
    term = tensor_terms(universe, graph, names)
    return ";".join(sorted(term(t) for t in graph.outputs))


def _leaf_ids(graph: Graph, leaves: int) -> set[int]:
    return {i for n in graph.nodes for i in n.inputs if i < leaves}


def used_leaves(universe: Universe, a: Graph, b: Graph) -> list[int]:
    """The leaves either graph reads (or outputs), in order."""
    count = len(universe.leaves)
    return sorted(_leaf_ids(a, count) | _leaf_ids(b, count)
                  | {t for t in (*a.outputs, *b.outputs) if t < count})


def _interchangeable(universe: Universe, ids: Sequence[int]) -> list[list[int]]:
    """``ids`` grouped by what makes leaves interchangeable: role, shape, constant op."""
    classes: dict[tuple, list[int]] = {}
    for i in ids:
        classes.setdefault(_leaf_class(universe, i), []).append(i)
    return list(classes.values())


def _leaf_class(universe: Universe, i: int) -> tuple:
    leaf = universe.leaves[i]
    return (leaf.role, leaf.shape, leaf.op, leaf.params)


def _slots(universe: Universe, group: Sequence[int]) -> list[int]:
    """The first ``len(group)`` leaves of the universe that are interchangeable with
    ``group``'s: where a renaming puts them, so that ``f(y)`` and ``f(z)`` are one pair."""
    key = _leaf_class(universe, group[0])
    return [i for i in range(len(universe.leaves)) if _leaf_class(universe, i) == key][: len(group)]


def canonical_pair(universe: Universe, a: Graph, b: Graph,
                   merge: Mapping[int, int] | None = None) -> str:
    """Minimum text of the unordered pair over renamings of interchangeable leaves onto
    the first leaves of their kind. With
    ``merge`` (leaf -> leaf), the text of the pair's instance that reads leaf ``merge[i]``
    wherever it read leaf i ("" when the instance's two sides are the same)."""
    merge = merge or {}
    used = sorted({merge.get(i, i) for i in used_leaves(universe, a, b)})
    groups = _interchangeable(universe, used)
    best = None
    slots = [_slots(universe, g) for g in groups]
    for perms in itertools.product(*(itertools.permutations(s) for s in slots)):
        names = [leaf.name for leaf in universe.leaves]
        for group, perm in zip(groups, perms, strict=True):
            for src, dst in zip(group, perm, strict=True):
                names[src] = f"v{dst}"
        full = [names[merge.get(i, i)] for i in range(len(names))]
        texts = sorted((graph_text(universe, a, full), graph_text(universe, b, full)))
        if texts[0] == texts[1]:
            return ""
        text = " == ".join(texts)
        best = text if best is None or text < best else best
    return best or ""


def merged_instances(universe: Universe, a: Graph, b: Graph) -> set[str]:
    """Canonical texts of the pair's instances that identify interchangeable leaves
    (``x * z`` and ``y * z`` become ``x * x``...): a proved pair implies all of them."""
    groups = _interchangeable(universe, used_leaves(universe, a, b))
    out = set()
    for images in itertools.product(*(itertools.product(g, repeat=len(g)) for g in groups)):
        merge = {src: dst for g, image in zip(groups, images, strict=True)
                 for src, dst in zip(g, image, strict=True)}
        if len(set(merge.values())) < len(merge):
            out.add(canonical_pair(universe, a, b, merge))
    out.discard("")
    return out


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
