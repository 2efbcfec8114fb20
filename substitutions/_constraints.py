"""Evaluating rule constraints and target parameter expressions on a concrete match.

Expressions see the bound parameter variables and four helpers over pattern inputs
(named by string, e.g. `shape('x')[1] == 1`): `shape`, `rank`, `is_const` and `value`
(the value of a small constant scalar or all-equal tensor, else None). Concrete
dims are ints; a symbolic or unknown dim is a `SymbolicDim`, which only answers
questions it can decide: a symbol equals itself, and every other comparison or
arithmetic on it raises `Undecidable`. A constraint that raises is *not satisfied*:
the matcher never guesses on symbolic shapes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType

import numpy as np

from taso.ir import Graph
from taso.substitutions.rule import RuleError, expression_names


class Undecidable(Exception):
    """The expression depends on the value of a symbolic or unknown dimension."""


@dataclass(frozen=True, eq=False)
class SymbolicDim:
    """A dimension without a known value: equal only to the same symbol."""

    name: str
    known_symbol: bool  # False: an unknown dim, equal only to itself

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, SymbolicDim) and self.known_symbol and other.known_symbol and other.name == self.name:
            return True
        raise Undecidable(f"cannot compare symbolic dim {self.name!r} with {other!r}")

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.name)

    def _undecidable(self, *args: object) -> object:
        raise Undecidable(f"symbolic dim {self.name!r} has no known value")

    __lt__ = __le__ = __gt__ = __ge__ = _undecidable
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _undecidable
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = __abs__ = _undecidable
    __bool__ = __index__ = __int__ = _undecidable  # type: ignore[assignment]


_FAILURES = (Undecidable, RuleError, TypeError, ValueError, KeyError, IndexError, ArithmeticError, NameError)


def tensor_env(
    graph: Graph,
    tensors: Mapping[str, str],
    is_const: Callable[[str], bool],
    constant_array: Callable[[str], np.ndarray | None] | None = None,
) -> dict[str, object]:
    """The helpers `shape`, `rank`, `is_const`, `value` over the pattern inputs bound in `tensors`."""

    def shape(name: str) -> tuple[object, ...]:
        value = tensors[name]
        tensor_type = graph.types.get(value)
        if tensor_type is None or tensor_type.shape is None:
            raise Undecidable(f"rank of {name!r} is unknown")
        return tuple(_dim(d, f"{value}[{i}]") for i, d in enumerate(tensor_type.shape))

    def rank(name: str) -> int:
        return len(shape(name))

    def constant(name: str) -> bool:
        return is_const(tensors[name])

    def value(name: str) -> float | None:
        """The value of a constant scalar or all-equal constant tensor, else None."""
        array = constant_array(tensors[name]) if constant_array is not None else None
        if array is None or array.size == 0 or array.dtype.kind not in "fiub":
            return None
        first = array.reshape(-1)[0]
        return float(first) if bool(np.all(array == first)) else None

    return {"shape": shape, "rank": rank, "is_const": constant, "value": value}


def _dim(dim: object, where: str) -> object:
    if isinstance(dim, int):
        return dim
    if isinstance(dim, str):
        return SymbolicDim(dim, known_symbol=True)
    return SymbolicDim(where, known_symbol=False)


_BUILTINS = {"len": len, "all": all, "any": any, "min": min, "max": max, "abs": abs, "tuple": tuple, "range": range}


@functools.lru_cache(maxsize=4096)
def _compiled(expr: str) -> CodeType:
    """Validate (`rule.expression_names`) and compile an expression once."""
    expression_names(expr)
    return compile(expr, "<rule>", "eval")


def evaluate_expression(expr: str, env: Mapping[str, object]) -> object:
    """`rule.evaluate_expression` with the parse and compile cached (matching is a hot path).

    The environment is passed as globals so that names inside generator expressions
    (`all(d == k for d in s)`) resolve to parameters too."""
    return eval(_compiled(expr), {"__builtins__": _BUILTINS, **env})  # noqa: S307


def constraint_holds(expr: str, env: Mapping[str, object]) -> bool:
    """True only if `expr` evaluates to a decidable true value."""
    try:
        return bool(evaluate_expression(expr, env))
    except _FAILURES:
        return False


def evaluate_param(expr: str, env: Mapping[str, object]) -> object:
    """Value of a target `ParamExpr`; raises Undecidable when it cannot be computed."""
    try:
        value = evaluate_expression(expr, env)
    except _FAILURES as exc:
        raise Undecidable(f"cannot evaluate {expr!r}: {exc}") from None
    if isinstance(value, SymbolicDim) or (isinstance(value, tuple) and any(isinstance(v, SymbolicDim) for v in value)):
        raise Undecidable(f"{expr!r} depends on a symbolic dim")
    return value
