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
  Instances are built at the configs' parameters and, for an axiom whose builders pass
  parameters through (`BankAxiom.passes_params`), also at the goal's own (a per-channel
  fold into a conv of any strides and pads).

`check-axioms` proves an axiom symbolically only at its listed configs, so the bank's
all-shape formulas are trusted, not established, for other shapes. `shape_generic_axioms`
names those that are established for every shape: pure elementwise identities (see there).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from numbers import Integral

import z3

from taso.opspecs import TENSOR, ShapeError, spec_by_name
from taso.opspecs.axioms import Axiom, AxiomConfig, Term, Var, Z3TermAlgebra, all_axioms
from taso.opspecs.axioms.validate import Status, check_symbolic

SHAPE = z3.Function("shape", TENSOR, z3.StringSort())
MAX_GUARDED_INSTANCES = 64  # per axiom and goal
# Axioms whose tables state no side condition but that hold only for matching shapes
# (reshape to x's own shape; elementwise ops on concats with equal piece sizes): the
# equal-shape check of `guarded_instance` restricts them to where they hold.
SHAPE_DEPENDENT = frozenset({"reshape_identity", "concat_add", "concat_mul"})
# Axioms that hold only for a sign of a value (relu(x) * s = relu(x * s) for s > 0): an
# uninterpreted formula cannot say so, and asserted for every s it would prove wrong rules.
# Their own rules carry the sign as a constraint (`RULE_CONSTRAINTS`); the bank leaves them out.
VALUE_DEPENDENT = frozenset({"relu_scale_positive", "relu_affine_as_clip", "conv_relu_affine_as_clip",
                             "conv_bn_relu_affine_as_clip"})
# Axioms whose rules are built by hand only (`_axiom_families.FAMILIES`) and which the bank
# has in parts: conv_bias_merge_parallel composes conv_enlarge_kernel, conv_linear_weight and
# conv_bias_add; as a guarded axiom of five tensor inputs its instances over a pool of
# shapes would grow as the pool's fifth power. conv_bias_bn_identity_merge and _sub (seven
# inputs) compose conv_identity_kernel, the batch norm's own axioms and the same linearity;
# conv_bias_merge_parallel_identity, the parallel merge and conv_identity_kernel.
# affine_as_depthwise_conv and scale_as_depthwise_conv compose conv_identity_kernel (group C)
# with the per-channel folds.
# The transpose-through-constant axioms are transpose_add's broadcast kin, rules of their own;
# transpose_matmul_bias_mul_columns (four inputs) composes them with matmul_mul_columns and
# mul_add_distrib, and matmul_bias_mul_unit_columns the latter two with a reshape.
FAMILY_ONLY = frozenset({"transpose_matmul_bias_mul_columns", "matmul_bias_mul_unit_columns", "conv_bias_merge_parallel", "conv_bias_bn_identity_merge", "conv_bias_bn_identity_sub",
                         "conv_bias_merge_parallel_identity",
                         "affine_as_depthwise_conv", "scale_as_depthwise_conv", "transpose_add_const", "transpose_mul_const",
                         "transpose_add_const_scalar", "transpose_mul_const_scalar",
                         *(f"transpose_{a}_{b}_const" for a in ("add", "mul") for b in ("add", "mul"))})


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
    passes_params: bool = False  # guarded, but instantiable at any parameter values


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
        if axiom.name in VALUE_DEPENDENT | FAMILY_ONLY:
            continue
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
        bank.append(BankAxiom(axiom.name, ops, (), True, _passes_params(axiom)))
    return tuple(bank)


def _passes_params(axiom: Axiom) -> bool:
    """The builders only pass parameters through (a shape condition kept it from the
    parametric form)."""
    if axiom.derive is not None or axiom.name in SHAPE_DEPENDENT:
        return False
    keys: dict[str, object] = {}
    for config in axiom.configs:
        keys.update(config.params)
    params = {k: z3.Const(f"{axiom.name}.{k}", _sort_of(v)) for k, v in keys.items()}
    try:
        axiom.sides(_PassThroughAlgebra(), {n: z3.Const(n, TENSOR) for n in axiom.inputs}, params)
    except Exception:  # noqa: BLE001 - builders that compute with parameters
        return False
    return True


class ShapeAlgebra:
    """Applies specs to shapes only (raises ShapeError when an op is invalid)."""

    def __call__(self, op: str, *inputs: tuple, **params: object) -> object:
        outs = spec_by_name(op).infer_shapes(list(inputs), params)
        return outs[0] if len(outs) == 1 else tuple(outs)


def guarded_instances(axiom: Axiom, shapes: tuple[tuple[int, ...], ...],
                      params: tuple[Mapping[str, object], ...] = ()) -> list[z3.BoolRef]:
    """Instances of a shape-dependent axiom for every assignment of ``shapes`` to its
    inputs, at each config's parameters and at each of ``params``."""
    out: dict[str, z3.BoolRef] = {}
    settings = {_key(p) for p in (*(c.params for c in axiom.configs), *params)}
    for assignment in itertools.product(shapes, repeat=len(axiom.inputs)):
        for key in sorted(settings, key=repr):
            instance = _instance(axiom.name, assignment, key)
            if instance is not None:
                out.setdefault(*instance)
            if len(out) >= MAX_GUARDED_INSTANCES:
                return [out[k] for k in sorted(out)]
    return [out[k] for k in sorted(out)]


def _key(params: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(params.items()))


@functools.cache
def _instance(name: str, assignment: tuple[tuple[int, ...], ...],
              params: tuple[tuple[str, object], ...]) -> tuple[str, z3.BoolRef] | None:
    """One guarded instance and its text (the sort key), built once per process: goals of
    one universe share a few shapes, and printing a Z3 formula costs more than proving."""
    axiom = find_axiom(name)
    formula = guarded_instance(axiom, dict(zip(axiom.inputs, assignment, strict=True)), dict(params))
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


ELEMENTWISE_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Clip", "HardSigmoid",
                             "HardSwish", "Silu", "Erf", "Gelu", "Sqrt", "Identity", "ConstFill"})
"""Ops whose every output element is a scalar function of the input elements at the same
(NumPy-broadcast) index; ConstFill counts only as a scalar (shape ())."""


@functools.cache
def shape_generic_axioms() -> frozenset[str]:
    """Axioms whose all-shape Z3 formula is established for every shape, not only at their
    configs: unguarded, without parameters or positive inputs, built of `ELEMENTWISE_OPS`
    with scalar constants only, both sides reading the same tensors, and proved by Z3 on
    one-element inputs (the scalar identity). Such an identity holds elementwise at any broadcast shape: each output
    element is the same scalar expression of the inputs' elements at that index on both
    sides, and both sides broadcast the same set of tensors (so both are ill-typed
    together)."""
    return frozenset(b.name for b in axiom_bank()
                     if not b.guarded and b.ops <= ELEMENTWISE_OPS and _scalar_identity(find_axiom(b.name)))


def _scalar_identity(axiom: Axiom) -> bool:
    if axiom.param_names or axiom.positive or axiom.derive is not None:
        return False
    lhs, rhs = axiom.terms(axiom.configs[0])
    if _leaves(lhs) != _leaves(rhs) or not all(_scalar_constants(t) for t in (*lhs, *rhs)):
        return False
    one_element = AxiomConfig({n: (1,) for n in axiom.inputs})  # the scalar identity
    return check_symbolic(replace(axiom, configs=(one_element,)), 0).status is Status.PASSED


def _leaves(terms: tuple) -> frozenset[str]:
    out: set[str] = set()
    for term in terms:
        out |= {term.name} if isinstance(term, Var) else _leaves(term.inputs)
    return frozenset(out)


def _scalar_constants(term: object) -> bool:
    if not isinstance(term, Term):
        return True
    if term.op == "ConstFill" and tuple(dict(term.params).get("shape", ())) != ():
        return False
    return all(_scalar_constants(t) for t in term.inputs)
