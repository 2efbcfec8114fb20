"""The axioms as Z3 formulas over uninterpreted operators, for rule proofs (as TASO did).

Three forms, tried in this order for each axiom:
* *parametric*: the axiom's parameters are Z3 constants too, and the formula is
  ``ForAll tensors, params: condition -> lhs == rhs`` (Conv strides/pads/groups, Concat
  axes, ...); possible when the builders only pass parameters through;
* *concrete*: one ``ForAll tensors`` formula per validation config, when the builders
  compute with parameter values (``2 * group``, composed permutations) but do not look at
  shapes;
* *shape-guarded*: when the axiom depends on shapes (``derive``, shape side conditions),
  one instance per assignment of goal shapes to its tensor variables, guarded by
  ``shape(t) == "..."`` (an uninterpreted ``Tensor -> String``); the goal asserts the
  shape of each of its subterms, so such axioms fire only where shapes are known. An
  instance is built only where it holds: the side condition is met and both sides infer
  the same shapes (otherwise it would contradict the goal's shape facts and prove anything).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral

import z3

from taso.opspecs import TENSOR, ShapeError, spec_by_name
from taso.opspecs.axioms import Axiom, Z3TermAlgebra, all_axioms

SHAPE = z3.Function("shape", TENSOR, z3.StringSort())
MAX_GUARDED_INSTANCES = 64  # per axiom and goal
# Axioms whose tables state no side condition but that hold only for matching shapes
# (reshape to x's own shape; elementwise ops on concats with equal piece sizes): the
# equal-shape check of `guarded_instance` restricts them to where they hold.
SHAPE_DEPENDENT = frozenset({"reshape_identity", "concat_add", "concat_mul"})


def shape_literal(shape: tuple[int, ...]) -> z3.ExprRef:
    return z3.StringVal(",".join(str(int(d)) for d in shape) or "scalar")


class _NoShapes(Mapping):
    """Shapes that refuse to be read: detects side conditions that depend on shapes."""

    def __getitem__(self, key: str) -> tuple:
        raise LookupError(key)

    def __iter__(self):  # noqa: ANN204
        return iter(())

    def __len__(self) -> int:
        return 0


def _sort_of(value: object) -> z3.SortRef:
    if isinstance(value, bool | int):
        return z3.IntSort()
    if isinstance(value, float):
        return z3.RealSort()
    return z3.StringSort()


@dataclass(frozen=True)
class BankAxiom:
    """One axiom in the form the prover uses; ``formulas`` empty when shape-guarded."""

    name: str
    ops: frozenset[str]
    formulas: tuple[z3.BoolRef, ...]
    guarded: bool


class _PassThroughAlgebra(Z3TermAlgebra):
    """Z3 terms, refusing parameters computed from symbolic ones (``(0, 0, q[0], ...)``)."""

    def __call__(self, op: str, *inputs: object, **params: object) -> object:
        for value in params.values():
            if isinstance(value, tuple) and any(isinstance(v, z3.ExprRef) for v in value):
                raise TypeError("parameter computed from a symbolic parameter")
        return super().__call__(op, *inputs, **params)


def _parametric(axiom: Axiom) -> z3.BoolRef | None:
    keys: dict[str, object] = {}
    for config in axiom.configs:
        keys.update(config.params)
    params = {k: z3.Const(f"{axiom.name}.{k}", _sort_of(v)) for k, v in sorted(keys.items())}
    tensors = {n: z3.Const(n, TENSOR) for n in axiom.inputs}
    try:
        lhs, rhs = axiom.sides(_PassThroughAlgebra(), tensors, params)
        condition = axiom.condition(_NoShapes(), params)
    except Exception:  # noqa: BLE001 - builders that compute with parameters
        return None
    if condition is False:
        return None
    body = z3.And(*[a == b for a, b in zip(lhs, rhs, strict=True)])
    if isinstance(condition, z3.BoolRef):
        body = z3.Implies(condition, body)
    return z3.ForAll([*tensors.values(), *params.values()], body)


def _concrete(axiom: Axiom) -> tuple[z3.BoolRef, ...] | None:
    try:
        if not all(axiom.condition(_NoShapes(), c.params) for c in axiom.configs):
            return None
    except LookupError:
        return None
    formulas = {str(f): f for f in (axiom.z3_formula(c) for c in axiom.configs)}
    return tuple(formulas[k] for k in sorted(formulas))


@functools.cache
def axiom_bank() -> tuple[BankAxiom, ...]:
    bank = []
    for axiom in bank_axioms():
        ops = axiom.ops()
        if axiom.derive is None and axiom.name not in SHAPE_DEPENDENT:
            formula = _parametric(axiom)
            if formula is not None:
                bank.append(BankAxiom(axiom.name, ops, (formula,), False))
                continue
            concrete = _concrete(axiom)
            if concrete is not None:
                bank.append(BankAxiom(axiom.name, ops, concrete, False))
                continue
        bank.append(BankAxiom(axiom.name, ops, (), True))
    return tuple(bank)


class ShapeAlgebra:
    """Applies specs to shapes only (raises ShapeError when an op is invalid)."""

    def __call__(self, op: str, *inputs: tuple, **params: object) -> object:
        outs = spec_by_name(op).infer_shapes(list(inputs), params)
        return outs[0] if len(outs) == 1 else tuple(outs)


def guarded_instances(axiom: Axiom, shapes: tuple[tuple[int, ...], ...]) -> list[z3.BoolRef]:
    """Instances of a shape-dependent axiom for every assignment of ``shapes`` to its inputs."""
    out: dict[str, z3.BoolRef] = {}
    configs = {repr(sorted(c.params.items())): c.params for c in axiom.configs}
    for assignment in itertools.product(shapes, repeat=len(axiom.inputs)):
        for key in sorted(configs):
            instance = _instance(axiom.name, assignment, key)
            if instance is not None:
                out.setdefault(*instance)
            if len(out) >= MAX_GUARDED_INSTANCES:
                return [out[k] for k in sorted(out)]
    return [out[k] for k in sorted(out)]


@functools.cache
def _instance(name: str, assignment: tuple[tuple[int, ...], ...], config: str
              ) -> tuple[str, z3.BoolRef] | None:
    """One guarded instance and its text (the sort key), built once per process: goals of
    one universe share a few shapes, and printing a Z3 formula costs more than proving."""
    axiom = find_axiom(name)
    params = next(c.params for c in axiom.configs if repr(sorted(c.params.items())) == config)
    formula = guarded_instance(axiom, dict(zip(axiom.inputs, assignment, strict=True)), params)
    return None if formula is None else (str(formula), formula)


def guarded_instance(axiom: Axiom, shape_map: Mapping[str, tuple[int, ...]],
                     config_params: Mapping[str, object]) -> z3.BoolRef | None:
    """``ForAll tensors: shapes(tensors) == shape_map -> lhs == rhs`` for one config's
    parameters, or None where the axiom does not hold at these shapes: its side condition
    fails, a side is ill-formed, or the two sides infer different shapes. (An instance
    whose sides differ in shape, ``reshape(x, (2, 3)) = x`` for x of shape (3, 2), is
    false; with the goal's shape facts it is a contradiction that proves any goal.)"""
    params = dict(config_params)
    try:
        if not axiom.condition(shape_map, params):
            return None
        if axiom.derive is not None:
            params.update(axiom.derive(shape_map, params))
        lhs_shapes, rhs_shapes = (_shapes_of(side(ShapeAlgebra(), shape_map, params))
                                  for side in (axiom.lhs, axiom.rhs))
    except (ShapeError, ValueError, LookupError, TypeError, IndexError):
        return None
    if lhs_shapes != rhs_shapes:
        return None
    tensors = {n: z3.Const(n, TENSOR) for n in axiom.inputs}
    lhs, rhs = axiom.sides(Z3TermAlgebra(), tensors, params)
    guard = z3.And(*[SHAPE(tensors[n]) == shape_literal(shape_map[n]) for n in axiom.inputs])
    body = z3.And(*[a == b for a, b in zip(lhs, rhs, strict=True)])
    return z3.ForAll(list(tensors.values()), z3.Implies(guard, body))


def _shapes_of(side: object) -> tuple[tuple[int, ...], ...]:
    """The output shapes of a side built with `ShapeAlgebra`: one shape (a tuple of
    ints) or a tuple of shapes for a multi-output op."""
    if isinstance(side, tuple | list) and all(isinstance(d, Integral) for d in side):
        return (tuple(int(d) for d in side),)
    return tuple(tuple(int(d) for d in shape) for shape in side)  # type: ignore[union-attr]


@functools.cache
def bank_axioms() -> tuple[Axiom, ...]:
    """The opspecs axioms (the converter ones included, last: the order proofs saw)."""
    return all_axioms()


@functools.cache
def find_axiom(name: str) -> Axiom:
    return next(a for a in bank_axioms() if a.name == name)
