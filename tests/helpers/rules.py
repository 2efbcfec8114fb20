"""Hand-written rules the tests share, and the rule sets they search with.

- `rule` / `node`: build a validated `Rule` from (id, math, inputs, source, target, outputs,
  constraints) tuples; each rule states its math in one line.
- Matcher and applier fixtures (`RELU_RELU` ... `BATCH_NOT_TWO`, all in `ALL_RULES`).
- `FIXTURE_RULES`: TASO-style identities marked PROVED for the tests only (the shipped
  library is generated and proved by `taso-gen`), matching the shapes
  `tests.helpers.strategies` generates: merges of parallel branches that share an input,
  weight folding, layout cancellation, reassociation. `fuzz_rules()` puts the shipped
  library first. tests/test_fuzz_rules.py checks each one on a witness model.
- `LIBRARY`: the shipped rule file, `shipped`: one of its rules by id; `relu_is_identity`: a
  deliberately wrong rule.
- `loosened`: a rule without some of its constraints (to show a test's graph is left alone
  by them, not by the rule's form); `applied_once`: a rule applied at its one match.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import taso.substitutions as substitutions
from taso.ir import Graph
from taso.opspecs import Exactness
from taso.pipeline._rewriting import default_rules
from taso.substitutions.matching import apply, find_matches
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Proof,
    ProofStatus,
    Rule,
    TensorRole,
    load_rules,
)

LIBRARY = Path(substitutions.__file__).parent / "library" / "rules.json"

ANY, CONST = TensorRole.ANY, TensorRole.CONST


@functools.cache
def _shipped_by_id() -> dict[str, Rule]:
    return {r.id: r for r in load_rules(LIBRARY).rules}


def shipped(rule_id: str) -> Rule:
    """The shipped library's rule `rule_id` (the file is read once per test session)."""
    return _shipped_by_id()[rule_id]


def rule(
    rule_id: str,
    math: str,
    inputs: Sequence[tuple[str, TensorRole]],
    source: Sequence[PatternNode],
    target: Sequence[PatternNode],
    outputs: Sequence[tuple[str, str]],
    constraints: Sequence[str] = (),
) -> Rule:
    return Rule(
        id=rule_id,
        math=math,
        inputs=tuple(PatternInput(n, r) for n, r in inputs),
        source=Pattern(tuple(source)),
        target=Pattern(tuple(target)),
        outputs=tuple(outputs),
        constraints=tuple(constraints),
    ).validate()


def loosened(rule: Rule, *dropped: str) -> Rule:
    """`rule` without the constraints starting with each of `dropped` (each drops one or more)."""
    for prefix in dropped:
        constraints = tuple(c for c in rule.constraints if not c.startswith(prefix))
        assert constraints != rule.constraints, prefix
        rule = replace(rule, id=f"{rule.id}-without-{prefix}", constraints=constraints)
    return rule


def applied_once(graph: Graph, rule: Rule) -> Graph:
    """`graph` with `rule` applied at its one match (there must be exactly one)."""
    (match,) = find_matches(graph, rule)
    rewritten = apply(graph, rule, match)
    assert rewritten is not None
    return rewritten


def node(node_id: str, op: str, *inputs: str, **params: object) -> PatternNode:
    return PatternNode(node_id, op, inputs, tuple(params.items()))


# ----- matcher and applier fixtures ----------------------------------------------------------

CONV_PARAMS = {"strides": ParamVar("s"), "pads": ParamVar("p"), "dilations": ParamVar("d")}

RELU_RELU = rule(
    "relu_relu", "Relu(Relu(x)) = Relu(x)", [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "n0")],
    [node("t0", "Relu", "x")],
    [("n1", "t0")],
)

IDENTITY = rule(
    "identity", "Identity(x) = x", [("x", ANY)],
    [node("n0", "Identity", "x")], [], [("n0", "x")],
)

CONV_MUL = rule(
    "conv_mul", "Conv(x, w) * c = Conv(x, w * Reshape(c, (-1,1,1,1)))  (c per channel)",
    [("x", ANY), ("w", CONST), ("c", CONST)],
    [node("n0", "Conv", "x", "w", **CONV_PARAMS), node("n1", "Mul", "n0", "c")],
    [
        node("t0", "Reshape", "c", shape=(-1, 1, 1, 1)),
        node("t1", "Mul", "w", "t0"),
        node("t2", "Conv", "x", "t1", **CONV_PARAMS),
    ],
    [("n1", "t2")],
    ["rank('c') == 4", "shape('c') == (1, shape('w')[0], 1, 1)"],
)

CONV_MERGE = rule(
    "conv_merge", "(Conv(x, w1), Conv(x, w2)) = Split(Conv(x, Concat(w1, w2)))",
    [("x", ANY), ("w1", CONST), ("w2", CONST)],
    [node("n0", "Conv", "x", "w1", **CONV_PARAMS), node("n1", "Conv", "x", "w2", **CONV_PARAMS)],
    [
        node("t0", "Concat", "w1", "w2", axis=0),
        node("t1", "Conv", "x", "t0", **CONV_PARAMS),
        node("t2", "Split", "t1", axis=1, split=ParamExpr("(shape('w1')[0], shape('w2')[0])")),
    ],
    [("n0", "t2:0"), ("n1", "t2:1")],
    ["shape('w1')[1:] == shape('w2')[1:]"],
)

CONV_RELU = rule(
    "conv_relu", "Relu(Conv(x, w; s)) = Conv(x, w; s, activation=relu)  (square strides)",
    [("x", ANY), ("w", CONST)],
    [node("n0", "Conv", "x", "w", strides=ParamVar("s")), node("n1", "Relu", "n0")],
    [node("t0", "Conv", "x", "w", strides=ParamVar("s"), activation="relu")],
    [("n1", "t0")],
    ["s[0] == s[1]"],
)

ADD_RELU_PAIR = rule(
    "add_relu_pair", "Relu(x) + Relu(x) = Relu(x) + Relu(x) with one Relu",
    [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "x"), node("n2", "Add", "n0", "n1")],
    [node("t0", "Relu", "x"), node("t1", "Add", "t0", "t0")],
    [("n2", "t1")],
)

RELU_MERGE = rule(
    "relu_merge", "(Relu(a), Relu(b)) = Split(Relu(Concat(a, b)))",
    [("a", ANY), ("b", ANY)],
    [node("n0", "Relu", "a"), node("n1", "Relu", "b")],
    [
        node("t0", "Concat", "a", "b", axis=0),
        node("t1", "Relu", "t0"),
        node("t2", "Split", "t1", axis=0, split=ParamExpr("(shape('a')[0], shape('b')[0])")),
    ],
    [("n0", "t2:0"), ("n1", "t2:1")],
    ["shape('a')[1:] == shape('b')[1:]"],
)

MUL_MUL = rule(
    "mul_mul", "(x * a) * b = x * (a * b)  (a, b constants)",
    [("x", ANY), ("a", CONST), ("b", CONST)],
    [node("n0", "Mul", "x", "a"), node("n1", "Mul", "n0", "b")],
    [node("t0", "Mul", "a", "b"), node("t1", "Mul", "x", "t0")],
    [("n1", "t1")],
)

BATCH_ONE = rule(
    "relu_relu_batch1", "Relu(Relu(x)) = Relu(x)  (batch 1 only: a shape constraint)",
    [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "n0")],
    [node("t0", "Relu", "x")],
    [("n1", "t0")],
    ["shape('x')[0] == 1"],
)

BATCH_NOT_TWO = rule(
    "relu_relu_not2", "Relu(Relu(x)) = Relu(x)  (batch != 2: undecidable on a symbol)",
    [("x", ANY)],
    [node("n0", "Relu", "x"), node("n1", "Relu", "n0")],
    [node("t0", "Relu", "x")],
    [("n1", "t0")],
    ["shape('x')[0] != 2"],
)

ALL_RULES = (RELU_RELU, IDENTITY, CONV_MUL, CONV_MERGE, CONV_RELU, ADD_RELU_PAIR, RELU_MERGE, MUL_MUL,
             BATCH_ONE, BATCH_NOT_TWO)


# ----- fuzzer fixtures: identities marked proved for the tests --------------------------------

FIXTURE_PROOF = Proof(ProofStatus.PROVED, "test fixture")

CONV_ADD = rule(
    "fuzz_conv_add", "Conv(x, w1) + Conv(x, w2) = Conv(x, w1 + w2)",
    [("x", ANY), ("w1", CONST), ("w2", CONST)],
    [node("n0", "Conv", "x", "w1", **CONV_PARAMS), node("n1", "Conv", "x", "w2", **CONV_PARAMS),
     node("n2", "Add", "n0", "n1")],
    [node("t0", "Add", "w1", "w2"), node("t1", "Conv", "x", "t0", **CONV_PARAMS)],
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
assert len({r.id for r in FIXTURE_RULES}) == len(FIXTURE_RULES), "two fixture rules share an id"


def fuzz_rules() -> tuple[Rule, ...]:
    """The shipped library (when generated) followed by the fixture rules."""
    return default_rules() + FIXTURE_RULES


def relu_is_identity() -> Rule:
    """A deliberately wrong rule, marked proved, to show the numeric check catches it."""
    return Rule(
        "wrong", "Relu(x) = x", (PatternInput("x"),),
        Pattern((PatternNode("a", "Relu", ("x",)),)), Pattern(()),
        (("a", "x"),), proof=FIXTURE_PROOF,
    ).validate()
