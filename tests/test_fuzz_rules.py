"""The fuzzer's fixture rules (tests/helpers/rules.py) are right.

Each fixture rule is marked PROVED for the tests only, so the tests here check that each
one is well formed and computes the same outputs as its source on a witness model: a fuzz
failure then points at the engine, not at a wrong fixture.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as h

from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import ProofStatus
from tests.helpers.graphs import make_graph, weight
from tests.helpers.ort import assert_same_outputs
from tests.helpers.rules import FIXTURE_RULES, fuzz_rules


def _witness_graphs():
    w = [weight(f"w{i}", (4, 3, 3, 3), i) for i in range(2)]
    m = [weight(f"m{i}", (6, k), i) for i, k in enumerate((4, 5))]
    c = [weight(f"c{i}", (1, 3, 1, 1), i) for i in range(2)]
    conv = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    return {
        "fuzz_conv_add": make_graph(
            [h.make_node("Conv", ["x", "w0"], ["a"], **conv), h.make_node("Conv", ["x", "w1"], ["b"], **conv),
             h.make_node("Add", ["a", "b"], ["y"])], {"x": [1, 3, 8, 8]}, ["y"], w),
        "fuzz_matmul_merge": make_graph(
            [h.make_node("MatMul", ["x", "m0"], ["a"]), h.make_node("MatMul", ["x", "m1"], ["b"])],
            {"x": [2, 3, 6]}, ["a", "b"], m),
        "fuzz_transpose_transpose": make_graph(
            [h.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 3, 1]),
             h.make_node("Transpose", ["a"], ["y"], perm=[1, 0, 3, 2])], {"x": [1, 2, 3, 4]}, ["y"]),
        "fuzz_concat_relu": make_graph(
            [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["z"], ["b"]),
             h.make_node("Concat", ["a", "b"], ["y"], axis=2)], {"x": [1, 2, 3], "z": [1, 2, 5]}, ["y"]),
        "fuzz_add_add": make_graph(
            [h.make_node("Add", ["x", "c0"], ["a"]), h.make_node("Add", ["a", "c1"], ["y"])],
            {"x": [2, 3, 4, 4]}, ["y"], c),
    }


@pytest.mark.ort
@pytest.mark.parametrize("rule_id", sorted(_witness_graphs()))
def test_fixture_rule_preserves_outputs_on_a_witness(rule_id: str) -> None:
    graph = _witness_graphs()[rule_id]
    fixture = next(r for r in FIXTURE_RULES if r.id == rule_id)
    matches = find_matches(graph, fixture)
    assert matches, rule_id
    rewritten = apply(graph, fixture, matches[0])
    assert rewritten is not None
    assert_same_outputs(graph, rewritten, rtol=1e-4)


def test_fixture_rules_are_marked_proved_and_unique() -> None:
    ids = [r.id for r in FIXTURE_RULES]
    assert len(ids) == len(set(ids))
    assert all(r.proof.status is ProofStatus.PROVED for r in FIXTURE_RULES)
    assert np.all([r.validate() is r for r in fuzz_rules()])
