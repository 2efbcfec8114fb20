"""The generator rediscovers TASO's known rewrites from the axioms alone.

Each test enumerates a focused universe (just the operators and tensors the rewrite
needs), so the whole pipeline (fingerprints, pruning, Z3 proof, numeric witness) runs in
seconds, and looks for the proved rule by the operators on its two sides.
"""

from __future__ import annotations

from collections import Counter

from taso.substitutions._enumerate import Leaf, Role, Universe
from taso.substitutions._generate import Settings, generate
from taso.substitutions.rule import Pattern, Rule

A, W = Role.ACTIVATION, Role.WEIGHT
RLIMIT = 250_000
CONV_1 = (("Conv", "strides", ((1, 1),)), ("Conv", "activation", ("none",)),
          ("Conv", "group", (1,)))
X = Leaf("x", (1, 2, 3, 3), A)


def _ops(pattern: Pattern) -> Counter:
    return Counter(n.op for n in pattern.nodes)


def _sides(rule: Rule) -> set[frozenset]:
    return {frozenset(_ops(rule.source).items()), frozenset(_ops(rule.target).items())}


def _rules(universe: Universe, max_ops: int) -> list[Rule]:
    library, counts = generate(Settings(max_ops=max_ops, rlimit=RLIMIT), universes=(universe,))
    assert counts["proved"] == len(library.rules) > 0
    return list(library.rules)


def _found(rules: list[Rule], one: dict[str, int], other: dict[str, int]) -> list[Rule]:
    want = {frozenset(one.items()), frozenset(other.items())}
    return [r for r in rules if _sides(r) == want]


def test_matmul_merge_shared_input() -> None:
    """concat(x @ w1, x @ w2) = x @ concat(w1, w2)."""
    universe = Universe("mm-merge", ("MatMul", "Concat"),
                        (Leaf("x", (4, 4), A), Leaf("w1", (4, 4), W), Leaf("w2", (4, 4), W)),
                        param_values=(("Concat", "axis", (1,)),))
    found = _found(_rules(universe, 3), {"MatMul": 2, "Concat": 1}, {"Concat": 1, "MatMul": 1})
    assert any({i.name for i in r.inputs} == {"x", "w1", "w2"} for r in found)


def test_conv_merge_shared_input() -> None:
    """(conv(x, w1), conv(x, w2)) = split(conv(x, concat(w1, w2, 0)), 1)."""
    universe = Universe("conv-merge", ("Conv", "Concat", "Split"),
                        (X, Leaf("w1", (2, 2, 3, 3), W), Leaf("w2", (2, 2, 3, 3), W)),
                        param_values=(*CONV_1, ("Conv", "pads", ((1, 1, 1, 1),)),
                                      ("Concat", "axis", (0,)), ("Split", "axis", (1,))))
    found = _found(_rules(universe, 3), {"Conv": 2}, {"Concat": 1, "Conv": 1, "Split": 1})
    assert found and all(len(r.outputs) == 2 for r in found)


def test_enlarge_one_by_one_kernel() -> None:
    """conv(x, w1x1; pads 0) = conv(x, enlarge(w1x1, 3x3); pads 1): the step that lets a 1x1
    conv merge with a 3x3 sibling (with the conv merge above, as TASO composes them)."""
    universe = Universe("enlarge", ("Conv", "Enlarge"), (X, Leaf("w", (2, 2, 1, 1), W)),
                        param_values=CONV_1)
    found = _found(_rules(universe, 2), {"Conv": 1}, {"Conv": 1, "Enlarge": 1})
    assert found
    pads = {dict(n.params)["pads"] for r in found for n in (*r.source.nodes, *r.target.nodes)
            if n.op == "Conv"}
    assert len(pads) == 2 or any("parametric" in dict(r.provenance) for r in found)
