"""The prover asserts an axiom instance only where it holds (issue 19, Build item 1).

A shape-restricted axiom (``reshape(x, shape(x)) = x``, ``concat(x, y) + concat(u, w) =
concat(x + u, y + w)`` with equal piece sizes, ...) instantiated at shapes where its two
sides have different shapes is a false fact; next to the goal's shape facts it is a
contradiction, from which Z3 proves anything (a wrong rule was once proved that way).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from numbers import Integral

import pytest
import z3

from taso.opspecs import ShapeError
from taso.substitutions.generate._axiom_bank import (
    ShapeAlgebra,
    axiom_bank,
    find_axiom,
    guarded_instance,
)
from taso.substitutions.generate._prove import encode_rule, premises, prove
from taso.substitutions.generate._verify import Verdict, verify_rule
from taso.substitutions.rule import ProofStatus, Rule
from tests.helpers.rules import ANY, node, rule

RLIMIT = 400_000  # enough for the proofs below; a wrong rule must not be proved at any limit
RESHAPED = {"s": (2, 3), "x": (3, 2)}  # x is reshaped to (2, 3): not its own shape


def _with_witness(r: Rule, shapes: dict, positive: tuple[str, ...] = ()) -> Rule:
    config = {"shapes": {k: list(v) for k, v in shapes.items()}, "bindings": {},
              "positive": list(positive)}
    return replace(r, provenance=(("witness", json.dumps([config])),))


def _relu_scale_reshape() -> Rule:
    """relu(s * reshape(x)) = s * relu(reshape(x)): false for negative s."""
    return rule(
        "wrong-relu-scale-reshape", "relu(s * reshape(x)) = s * relu(reshape(x))",
        [("s", ANY), ("x", ANY)],
        [node("n0", "Reshape", "x", shape=(2, 3)), node("n1", "Mul", "s", "n0"),
         node("n2", "Relu", "n1")],
        [node("t0", "Reshape", "x", shape=(2, 3)), node("t1", "Relu", "t0"),
         node("t2", "Mul", "s", "t1")],
        [("n2", "t2")])


def _reshape_is_identity() -> Rule:
    """reshape(x, (2, 3)) = x: false for x of shape (3, 2)."""
    return rule("wrong-reshape-identity", "reshape(x, (2, 3)) = x", [("x", ANY)],
                [node("n0", "Reshape", "x", shape=(2, 3))], [], [("n0", "x")])


def test_wrong_rule_through_reshape_is_not_proved() -> None:
    result = prove(_relu_scale_reshape(), rlimit=RLIMIT, shapes=RESHAPED)
    assert result.status is not ProofStatus.PROVED, result


def test_wrong_rule_with_a_passing_witness_is_not_verified() -> None:
    # a positive s passes the numeric witness: only the prover stands between it and "proved"
    wrong = _with_witness(_relu_scale_reshape(), RESHAPED, positive=("s",))
    check = verify_rule(wrong, rlimit=RLIMIT)
    assert check.witness_ok
    assert check.verdict is not Verdict.PROVED, check


def test_premises_do_not_contradict_the_goals_shape_facts() -> None:
    """Axiom instances plus the goal's shape facts, without the negated conclusion, must
    not be unsatisfiable: unsat there proves every goal at these shapes."""
    for wrong, shapes in ((_relu_scale_reshape(), RESHAPED), (_reshape_is_identity(), {"x": (3, 2)})):
        _, _, goal = encode_rule(wrong, shapes, {})
        solver = z3.Solver()
        solver.set("rlimit", RLIMIT)
        solver.add(*(formula for _, formula in premises(wrong, goal)), *goal.facts)
        assert solver.check() != z3.unsat, wrong.id


def test_a_rule_between_different_shapes_is_not_proved() -> None:
    # x of shape (3, 2) is not reshape(x, (2, 3)); no axiom may say otherwise
    result = prove(_reshape_is_identity(), rlimit=RLIMIT, shapes={"x": (3, 2)})
    assert result.status is not ProofStatus.PROVED, result


def test_a_right_rule_through_reshape_still_proves() -> None:
    right = rule("relu-reshape-identity", "relu(reshape(x, shape(x))) = relu(x)", [("x", ANY)],
                 [node("n0", "Reshape", "x", shape=(2, 3)), node("n1", "Relu", "n0")],
                 [node("t0", "Relu", "x")], [("n1", "t0")])
    result = prove(right, rlimit=RLIMIT, shapes={"x": (2, 3)})
    assert result.status is ProofStatus.PROVED and "reshape_identity" in result.axioms_used


# ----- one case per shape-restricted axiom: sides of different shapes, no instance --------

_CAT_SWAPPED = {"x": (2, 3), "y": (1, 3), "u": (1, 3), "w": (2, 3)}  # pieces 2+1 vs 1+2
_CAT_MATCHED = {"x": (2, 3), "y": (1, 3), "u": (2, 3), "w": (1, 3)}
SHAPE_RESTRICTED = {
    # axiom: (shapes and parameters where the sides differ in shape, ... where they agree)
    "reshape_identity": (({"x": (3, 2)}, {"s": (2, 3)}), ({"x": (2, 3)}, {"s": (2, 3)})),
    "concat_add": ((_CAT_SWAPPED, {"axis": 0}), (_CAT_MATCHED, {"axis": 0})),
    "concat_mul": ((_CAT_SWAPPED, {"axis": 0}), (_CAT_MATCHED, {"axis": 0})),
    "mul_const_ones": (({"x": (2, 1)}, {"ones": (2, 3)}), ({"x": (2, 3)}, {"ones": (2, 3)})),
}


@pytest.mark.parametrize("name", sorted(SHAPE_RESTRICTED))
def test_shape_restricted_axiom_not_instantiated_where_sides_differ(name: str) -> None:
    axiom = find_axiom(name)
    (bad_shapes, bad_params), (good_shapes, good_params) = SHAPE_RESTRICTED[name]
    assert _side_shapes(axiom, bad_shapes, bad_params)[0] != _side_shapes(axiom, bad_shapes, bad_params)[1]
    assert guarded_instance(axiom, bad_shapes, bad_params) is None
    assert guarded_instance(axiom, good_shapes, good_params) is not None


def _side_shapes(axiom, shapes: dict, params: dict) -> tuple:  # noqa: ANN001
    full = dict(params)
    if axiom.derive is not None:
        full.update(axiom.derive(shapes, full))
    return tuple(_normal(side(ShapeAlgebra(), shapes, full)) for side in (axiom.lhs, axiom.rhs))


def _normal(value: object) -> tuple:
    if all(isinstance(d, Integral) for d in value):  # one shape
        return (tuple(int(d) for d in value),)
    return tuple(tuple(int(d) for d in s) for s in value)


def _pool(axiom) -> list[tuple[int, ...]]:  # noqa: ANN001
    """The axiom's config shapes, reversed, and with the last dimension 1 (broadcasts)."""
    pool = set()
    for config in axiom.configs:
        for shape in map(tuple, config.shapes.values()):
            pool |= {shape, shape[::-1], shape[:-1] + (1,) if shape else ()}
    return sorted(pool)


@pytest.mark.parametrize("name", sorted(a.name for a in axiom_bank() if a.guarded))
def test_every_guarded_instance_has_sides_of_equal_shape(name: str) -> None:
    axiom = find_axiom(name)
    pool = _pool(axiom)
    for config in axiom.configs:
        for assignment in itertools.product(pool, repeat=len(axiom.inputs)):
            shapes = dict(zip(axiom.inputs, assignment, strict=True))
            try:
                lhs, rhs = _side_shapes(axiom, shapes, dict(config.params))
            except (ShapeError, ValueError, LookupError, TypeError, IndexError):
                continue  # not well-formed here: never instantiated
            if lhs != rhs:
                assert guarded_instance(axiom, shapes, config.params) is None, (shapes, config)
