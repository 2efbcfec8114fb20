"""Z3 vocabulary shared by the specs: the tensor sort, parameter sorts, symbolic arrays.

Two encodings live here:
* the *uninterpreted* one used for rule proofs: a tensor is a constant of the
  sort ``Tensor`` and each operator is an uninterpreted function
  ``op(p1, ..., pk, t1, ..., tn) -> Tensor`` with its parameters as leading
  arguments (ints -> Int, floats -> Real, tuples and strings -> String);
* the *elementwise* one used to check axioms by bounded symbolic evaluation:
  NumPy object arrays whose elements are Z3 reals; non-polynomial scalar
  functions (sigmoid, tanh, erf, sqrt) become uninterpreted ``Real -> Real``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import z3

from taso.opspecs._types import Dim, ParamKind

TENSOR = z3.DeclareSort("Tensor")


def param_sort(kind: ParamKind) -> z3.SortRef:
    """Z3 sort used for a parameter of this kind in operator functions."""
    if kind is ParamKind.INT:
        return z3.IntSort()
    if kind is ParamKind.FLOAT:
        return z3.RealSort()
    return z3.StringSort()


def param_value(kind: ParamKind, value: object) -> z3.ExprRef:
    """Z3 literal for a concrete parameter value (Z3 expressions pass through).

    ``None`` (an absent optional parameter) is one fixed uninterpreted constant per sort,
    so absent == absent holds but nothing else is assumed about it. A tensor given for a
    float (Clip's bound as the value of a scalar constant t) is ``scalar_value(t)``."""
    if isinstance(value, z3.ExprRef):
        if kind is ParamKind.FLOAT and value.sort() == TENSOR:  # a bound read off a scalar tensor
            return z3.Function("scalar_value", TENSOR, z3.RealSort())(value)
        return value
    if value is None:  # absent optional parameter (Clip bound, Transpose perm, ...)
        return z3.Const(f"absent_{param_sort(kind)}", param_sort(kind))
    if kind is ParamKind.INT:
        return z3.IntVal(int(value))  # type: ignore[call-overload]
    if kind is ParamKind.FLOAT:
        return z3.RealVal(repr(float(value)))  # type: ignore[arg-type]
    if kind in (ParamKind.INTS, ParamKind.FLOATS):
        return z3.StringVal(",".join(repr(v) for v in value))  # type: ignore[attr-defined]
    return z3.StringVal(str(value))


@functools.cache
def real_function(name: str) -> z3.FuncDecl:
    """Uninterpreted scalar function ``Real -> Real`` (sigmoid, tanh, erf, sqrt...)."""
    return z3.Function(f"scalar_{name}", z3.RealSort(), z3.RealSort())


def symbolic_array(name: str, shape: Sequence[Dim]) -> np.ndarray:
    """Object array of fresh Z3 reals ``name[i,j,...]`` with a concrete shape."""
    dims = tuple(int(d) for d in shape)
    out = np.empty(dims, dtype=object)
    for index in np.ndindex(*dims):
        label = ",".join(str(i) for i in index)
        out[index] = z3.Real(f"{name}[{label}]")
    return out


def is_symbolic(array: np.ndarray) -> bool:
    return array.dtype == object


def simplify_array(array: np.ndarray) -> np.ndarray:
    """Apply ``z3.simplify`` elementwise (plain numbers are turned into Z3 reals)."""
    flat = [z3.simplify(_as_real(v)) for v in array.reshape(-1)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(array.shape)


def _as_real(value: object) -> z3.ExprRef:
    if isinstance(value, z3.ExprRef):
        return value
    return z3.RealVal(repr(float(value)))  # type: ignore[arg-type]


def as_real(value: object) -> z3.ExprRef:
    """A Z3 real for a number or expression."""
    return _as_real(value)
