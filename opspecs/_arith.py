"""Array helpers that work on numeric arrays and on object arrays of Z3 reals alike.

The NumPy semantics of every spec are written with these helpers so the same
code is the test oracle (float arrays) and the symbolic evaluator used to
prove axioms (object arrays of Z3 expressions).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import z3

from taso.opspecs._z3 import as_real, is_symbolic, real_function


def _map(fn: Callable[..., object], *arrays: np.ndarray) -> np.ndarray:
    """Elementwise application of a Python function, producing an object array."""
    return np.frompyfunc(fn, len(arrays), 1)(*arrays).astype(object)


def _symbolic(*arrays: object) -> bool:
    return any(isinstance(a, np.ndarray) and is_symbolic(a) for a in arrays)


def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """max(a, b) elementwise."""
    if _symbolic(a, b):
        return _map(lambda x, y: z3.If(as_real(x) >= as_real(y), x, y), a, np.asarray(b))
    return np.maximum(a, b)


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min(a, b) elementwise."""
    if _symbolic(a, b):
        return _map(lambda x, y: z3.If(as_real(x) <= as_real(y), x, y), a, np.asarray(b))
    return np.minimum(a, b)


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0)."""
    if _symbolic(x):
        return _map(lambda v: z3.If(as_real(v) > 0, v, 0), x)
    return np.maximum(x, np.zeros((), dtype=x.dtype))


def clip(x: np.ndarray, low: float | None, high: float | None) -> np.ndarray:
    """min(max(x, low), high) with ``None`` meaning unbounded."""
    out = x
    if low is not None:
        out = maximum(out, np.asarray(low, dtype=x.dtype if not _symbolic(x) else object))
    if high is not None:
        out = minimum(out, np.asarray(high, dtype=x.dtype if not _symbolic(x) else object))
    return out


_EXACT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
}


def scalar_function(name: str, x: np.ndarray) -> np.ndarray:
    """A transcendental function; uninterpreted over Z3 reals in symbolic mode."""
    if _symbolic(x):
        fn = real_function(name)
        return _map(lambda v: fn(as_real(v)), x)
    return _EXACT[name](x)


def constant_like(value: float, like: np.ndarray) -> np.ndarray:
    """A 0-d array holding ``value`` in the dtype of ``like`` (object stays object)."""
    if _symbolic(like):
        return np.asarray(as_real(value), dtype=object)
    return np.asarray(value, dtype=like.dtype)


def zeros(shape: tuple[int, ...], *, like: np.ndarray) -> np.ndarray:
    """Zeros of ``shape``; object zeros (Python ints) for symbolic arrays."""
    if _symbolic(like):
        out = np.empty(shape, dtype=object)
        out[...] = 0
        return out
    return np.zeros(shape, dtype=like.dtype)
