"""Transposes moved above Add/Mul by constants (`transpose_*_const`): Keras's preprocessing
(Rescaling, Normalization) on the NHWC input ahead of the Transpose to NCHW."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms.validate import validate_axiom
from taso.pipeline._canonical import canonicalize
from taso.pipeline._export import export
from taso.substitutions.generate._axiom_rules import rules_from_axiom
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import Rule
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs

SINGLE = [f"transpose_{op}_const{s}" for op in ("add", "mul") for s in ("", "_scalar")]
PAIRS = [f"transpose_{a}_{b}_const" for a in ("add", "mul") for b in ("add", "mul")]
NHWC_TO_NCHW = [0, 3, 1, 2]


def _rule(name: str) -> Rule:
    (rule,) = rules_from_axiom(find_axiom(name))
    return rule


def _keras_input(*, perm: list[int] = NHWC_TO_NCHW):
    """conv(transpose((x * s + c) * d, perm)): Rescaling then Normalization, then the stem conv."""
    rng = np.random.default_rng(5)
    nodes = [h.make_node("Mul", ["x", "s"], ["m0"]), h.make_node("Add", ["m0", "c"], ["a"]),
             h.make_node("Mul", ["a", "d"], ["m1"]), h.make_node("Transpose", ["m1"], ["t"], perm=perm),
             h.make_node("Conv", ["t", "w"], ["y"], pads=[1, 1, 1, 1])]
    inits = [nh.from_array(np.float32(1 / 255), "s"),
             nh.from_array(rng.uniform(-0.5, 0.0, (1, 1, 1, 3)).astype(np.float32), "c"),
             nh.from_array(rng.uniform(3.0, 5.0, (1, 1, 1, 3)).astype(np.float32), "d"),
             weight("w", (4, 3, 3, 3), 1)]
    return canonicalize(make_graph(nodes, {"x": (1, 5, 5, 3)}, ["y"], inits)).graph


@pytest.mark.parametrize("name", SINGLE + PAIRS)
def test_the_axiom_holds_and_fails_without_transposing_the_constant(name: str) -> None:
    axiom = find_axiom(name)
    assert validate_axiom(axiom, draws=2).ok
    if name.endswith("_scalar"):
        return  # a scalar is left as it is on both sides
    ops = [op.capitalize() for op in name.split("_")[1:-1]]

    def untransposed(a, v, p):  # noqa: ANN001, ANN202 - the constants left in x's old layout
        out = a("Transpose", v["x"], perm=p["perm"])
        for op, const in zip(ops, ("c", "d"), strict=False):
            out = a(op, out, v[const])
        return out

    square = {k: (2, 2) for k in axiom.configs[2].shapes}  # both sides type-check; values differ
    config = replace(axiom.configs[2], shapes=square, params={"perm": (1, 0)})
    wrong = replace(axiom, rhs=untransposed, configs=(config, *axiom.configs[1:]), condition=lambda s, p: True)
    assert not validate_axiom(wrong, draws=0).ok


@pytest.mark.ort
def test_keras_preprocessing_moves_past_the_transpose_and_computes_the_same() -> None:
    graph = _keras_input()
    (match,) = find_matches(graph, _rule("transpose_add_mul_const"))
    once = apply(graph, _rule("transpose_add_mul_const"), match)
    assert once is not None
    (match,) = find_matches(once, _rule("transpose_mul_const_scalar"))
    twice = apply(once, _rule("transpose_mul_const_scalar"), match)
    assert twice is not None
    model = export(twice)
    assert [n.op_type for n in model.graph.node] == ["Transpose", "Mul", "Add", "Mul", "Conv"]
    constants = {i.name: nh.to_array(i) for i in model.graph.initializer}
    assert sorted(a.shape for a in constants.values() if a.ndim == 4 and a.shape[0] == 1) == [(1, 3, 1, 1)] * 2
    assert_same_outputs(graph, twice, rtol=0.0)


def test_a_constant_of_lower_rank_is_left_alone() -> None:
    """A (3,) constant broadcasts along x's last axis; after the transpose it would not."""
    nodes = [h.make_node("Mul", ["x", "d"], ["m"]), h.make_node("Transpose", ["m"], ["y"], perm=NHWC_TO_NCHW)]
    inits = [nh.from_array(np.ones(3, np.float32), "d")]
    graph = canonicalize(make_graph(nodes, {"x": (1, 5, 5, 3)}, ["y"], inits)).graph
    assert find_matches(graph, _rule("transpose_mul_const")) == []
