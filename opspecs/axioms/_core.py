"""Axioms as data: two builders (lhs, rhs) over an ``Algebra``, side conditions, configs.

An axiom's sides are written once as Python functions ``side(a, v, p)`` that
apply operators through the algebra ``a`` to the tensor variables ``v`` with
the parameters ``p``.  Interpreting the same builder with different algebras
gives the NumPy value (random-tensor check), the bounded symbolic value (object
arrays of Z3 reals), the uninterpreted Z3 term used by rule proofs, and a
``Term`` tree (data for printing and for the rule generator).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import z3

from taso.opspecs._registry import spec_by_name
from taso.opspecs._types import Exactness, Params, Shape
from taso.opspecs._z3 import TENSOR

Value = Any  # np.ndarray | z3.ExprRef | Term, depending on the algebra
Side = Callable[["Algebra", Mapping[str, Value], Params], Value]


class Algebra(Protocol):
    """Applies a spec by name; returns one value, or a tuple for multi-output ops."""

    def __call__(self, op: str, *inputs: Value, **params: object) -> Value: ...


@dataclass(frozen=True)
class AxiomConfig:
    """Concrete shapes for the tensor variables and values for the axiom's parameters."""

    shapes: Mapping[str, Shape]
    params: Mapping[str, object] = field(default_factory=dict)


def cfg(shapes: Mapping[str, Shape], **params: object) -> AxiomConfig:
    """Shorthand used by the axiom tables."""
    return AxiomConfig(dict(shapes), params)


def _always(shapes: Mapping[str, Shape], params: Params) -> bool:
    return True


@dataclass(frozen=True)
class Axiom:
    """``lhs == rhs`` for all tensors of the given shapes, whenever ``condition`` holds."""

    name: str
    math: str  # one line
    inputs: tuple[str, ...]
    lhs: Side
    rhs: Side
    configs: tuple[AxiomConfig, ...]
    condition: Callable[[Mapping[str, Shape], Params], bool] = _always
    exactness: Exactness = Exactness.EXACT
    positive: frozenset[str] = frozenset()  # inputs sampled from positive values (variances...)
    derive: Callable[[Mapping[str, Shape], Params], Mapping[str, object]] | None = None
    exact_constants: Mapping[float, Fraction] = field(default_factory=dict)
    """For a `ROUNDS_CONSTANTS` axiom: each literal the written form uses (the float32
    nearest an exact value, e.g. fl(1/6)) -> that exact value. Validation evaluates the
    literal as the exact value: the identity holds over the reals with the exact constant."""

    def bind(self, config: AxiomConfig) -> dict[str, object]:
        """The config's parameters plus those derived from shapes (split sizes, pads...)."""
        params = dict(config.params)
        if self.derive is not None:
            params.update(self.derive(config.shapes, config.params))
        return params

    @property
    def param_names(self) -> tuple[str, ...]:
        """Names of the axiom's parameters (those its configs bind)."""
        return tuple(sorted({k for c in self.configs for k in c.params}))

    def instance(self, shapes: Mapping[str, Shape], params: Params) -> z3.BoolRef | None:
        """The uninterpreted-function formula for new shapes/params; ``None`` when the side
        condition fails.  This is how a rule prover instantiates axioms."""
        config = AxiomConfig(dict(shapes), dict(params))
        if not self.condition(config.shapes, config.params):
            return None
        return self.z3_formula(config)

    def sides(self, algebra: Algebra, values: Mapping[str, Value], params: Params) -> tuple:
        """(lhs outputs, rhs outputs) as tuples."""
        return (_as_tuple(self.lhs(algebra, values, params)),
                _as_tuple(self.rhs(algebra, values, params)))

    def ops(self) -> frozenset[str]:
        """Spec names mentioned on either side (traced on the first config)."""
        config = self.configs[0]
        variables = {n: Var(n) for n in self.inputs}
        lhs, rhs = self.sides(TermAlgebra(), variables, self.bind(config))
        return frozenset().union(*(t.op_names() for t in (*lhs, *rhs) if isinstance(t, Term)))

    def terms(self, config: AxiomConfig) -> tuple[tuple[Term | Var, ...], tuple[Term | Var, ...]]:
        """Both sides as ``Term`` trees with the config's parameters substituted."""
        return self.sides(TermAlgebra(), {n: Var(n) for n in self.inputs}, self.bind(config))

    def z3_formula(self, config: AxiomConfig) -> z3.BoolRef:
        """``ForAll tensors: lhs == rhs`` over uninterpreted operator functions."""
        tensors = {n: z3.Const(n, TENSOR) for n in self.inputs}
        lhs, rhs = self.sides(Z3TermAlgebra(), tensors, self.bind(config))
        body = z3.And(*[a == b for a, b in zip(lhs, rhs, strict=True)])
        return z3.ForAll(list(tensors.values()), body) if tensors else body


def _as_tuple(value: Value) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


# -- algebras ------------------------------------------------------------------------


class ArrayAlgebra:
    """Evaluates with the specs' NumPy semantics (float arrays or Z3 object arrays)."""

    def __call__(self, op: str, *inputs: Value, **params: object) -> Value:
        spec = spec_by_name(op)
        full = spec.complete(params)
        outs = spec.semantics([np.asarray(v) for v in inputs], full)
        return outs[0] if len(outs) == 1 else tuple(outs)


class Z3TermAlgebra:
    """Builds uninterpreted Z3 terms over the ``Tensor`` sort."""

    def __call__(self, op: str, *inputs: Value, **params: object) -> Value:
        outs = spec_by_name(op).z3_term(list(inputs), params)
        return outs[0] if len(outs) == 1 else tuple(outs)


@dataclass(frozen=True)
class Var:
    """A tensor variable of an axiom or pattern."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Term:
    """``op(inputs; params)[output]`` as data."""

    op: str
    inputs: tuple[Term | Var, ...]
    params: tuple[tuple[str, object], ...]
    output: int = 0

    def op_names(self) -> frozenset[str]:
        inner = [t.op_names() for t in self.inputs if isinstance(t, Term)]
        return frozenset({self.op}).union(*inner)

    def __str__(self) -> str:
        args = [str(t) for t in self.inputs] + [f"{k}={v!r}" for k, v in self.params]
        suffix = f"[{self.output}]" if self.output else ""
        return f"{self.op}({', '.join(args)}){suffix}"


class TermAlgebra:
    """Records the expression tree instead of computing anything."""

    def __call__(self, op: str, *inputs: Value, **params: object) -> Value:
        spec = spec_by_name(op)
        items = tuple(sorted(params.items()))
        count = spec.num_outputs(params)
        terms = tuple(Term(op, tuple(inputs), items, i) for i in range(count))
        return terms[0] if count == 1 else terms


def shapes_of(config: AxiomConfig, names: Sequence[str]) -> dict[str, Shape]:
    return {n: tuple(config.shapes[n]) for n in names}
