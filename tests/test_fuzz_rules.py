"""The rules the fuzzer searches with: the shipped library when present, plus fixture rules.

Fixture rules are hand-written identities, marked PROVED for the tests only (the shipped
library is generated and proved by `taso-gen`). Each is a TASO-style rewrite that matches
the shapes `tests.strategies` generates: merges of parallel branches that share an input,
weight folding, layout cancellation, reassociation. The tests here check that each one is
well formed and computes the same outputs as its source on a witness model, so that a
fuzz failure points at the engine, not at a wrong fixture.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper as h

from taso.opspecs import Exactness
from taso.pipeline._rewriting import default_rules
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import ParamExpr, ParamVar, Proof, ProofStatus, Rule
from tests.test_matcher_rules import (
    ADD_RELU_PAIR,
    ANY,
    BATCH_ONE,
    CONST,
    CONV_MERGE,
    CONV_MUL,
    IDENTITY,
    MUL_MUL,
    RELU_MERGE,
    RELU_RELU,
    assert_same_outputs,
    make_graph,
    node,
    rule,
    weight,
)

FIXTURE_PROOF = Proof(ProofStatus.PROVED, "test fixture")
CONV = {"strides": ParamVar("s"), "pads": ParamVar("p"), "dilations": ParamVar("d")}

CONV_ADD = rule(
    "fuzz_conv_add", "Conv(x, w1) + Conv(x, w2) = Conv(x, w1 + w2)",
    [("x", ANY), ("w1", CONST), ("w2", CONST)],
    [node("n0", "Conv", "x", "w1", **CONV), node("n1", "Conv", "x", "w2", **CONV), node("n2", "Add", "n0", "n1")],
    [node("t0", "Add", "w1", "w2"), node("t1", "Conv", "x", "t0", **CONV)],
    [("n2", "t1")],
    ["shape('w1') == shape('w2')"],
)

MATMUL_MERGE = rule(
    "fuzz_matmul_merge", "(x @ w1, x @ w2) = Split(x @ Concat(w1, w2, axis=1), axis=-1)",
    [("x", ANY), ("w1", CONST), ("w2", CONST)],
    [node("n0", "MatMul", "x", "w1"), node("n1", "MatMul", "x", "w2")],
    [
        node("t0", "Concat", "w1", "w2", axis=1),
        node("t1", "MatMul", "x", "t0"),
        node("t2", "Split", "t1", axis=-1, split=ParamExpr("(shape('w1')[1], shape('w2')[1])")),
    ],
    [("n0", "t2:0"), ("n1", "t2:1")],
    ["rank('w1') == 2", "rank('w2') == 2", "rank('x') >= 2", "shape('w1')[0] == shape('w2')[0]"],
)

TRANSPOSE_TRANSPOSE = rule(
    "fuzz_transpose_transpose", "Transpose(Transpose(x, p), q) = Transpose(x, p∘q)",
    [("x", ANY)],
    [node("n0", "Transpose", "x", perm=ParamVar("p")), node("n1", "Transpose", "n0", perm=ParamVar("q"))],
    [node("t0", "Transpose", "x", perm=ParamExpr("tuple(p[i] for i in q)"))],
    [("n1", "t0")],
)

CONCAT_RELU = rule(
    "fuzz_concat_relu", "Concat(Relu(a), Relu(b)) = Relu(Concat(a, b))",
    [("a", ANY), ("b", ANY)],
    [node("n0", "Relu", "a"), node("n1", "Relu", "b"), node("n2", "Concat", "n0", "n1", axis=ParamVar("k"))],
    [node("t0", "Concat", "a", "b", axis=ParamVar("k")), node("t1", "Relu", "t0")],
    [("n2", "t1")],
)

ADD_ADD = replace(rule(
    "fuzz_add_add", "(x + a) + b = x + (a + b)  (a, b constants)",
    [("x", ANY), ("a", CONST), ("b", CONST)],
    [node("n0", "Add", "x", "a"), node("n1", "Add", "n0", "b")],
    [node("t0", "Add", "a", "b"), node("t1", "Add", "x", "t0")],
    [("n1", "t1")],
), exactness=Exactness.REASSOCIATES)

FIXTURE_RULES: tuple[Rule, ...] = tuple(
    replace(r, proof=FIXTURE_PROOF)
    for r in (RELU_RELU, IDENTITY, MUL_MUL, CONV_MUL, CONV_MERGE, RELU_MERGE, ADD_RELU_PAIR, BATCH_ONE,
              CONV_ADD, MATMUL_MERGE, TRANSPOSE_TRANSPOSE, CONCAT_RELU, ADD_ADD)
)


def fuzz_rules() -> tuple[Rule, ...]:
    """The shipped library (when generated) followed by the fixture rules."""
    return default_rules() + FIXTURE_RULES


# ----- the fixtures are right ----------------------------------------------------------------------


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
