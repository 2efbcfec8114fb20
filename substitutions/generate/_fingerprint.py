"""Fingerprints: evaluate operators exactly over the integers modulo a prime.

Random inputs are drawn uniformly from Z_p; polynomial operators (Add, Sub, Mul, MatMul,
Conv, Gemm, data movement, weight transforms, constants) are computed exactly mod p with
the specs' own NumPy semantics on int64 arrays (p < 2**25, so every product fits and sums
of up to 2**13 products do too). Rational constants (0.2, 1/6, pool weights) become field
elements, Div multiplies by the modular inverse.

Non-polynomial operators are treated as *uninterpreted*: every elementwise one (Relu, Clip,
Sigmoid, HardSwish, ...) is a random function Z_p -> Z_p, keyed by the op, its parameters
and the evaluation's seed; MaxPool is a random *symmetric* function of each window's
multiset, g(sum_i h(v_i)) over the valid (unpadded) positions; the square root inside
BatchNormalization is a random function too. Equal fingerprints therefore mean "equal
for every choice of those functions" with high probability: no identity is found that
holds only for max/relu (idempotence, monotonicity); those come from the axioms, which
are rules of their own. A second evaluation with another prime, seed and hash key must
agree before a pair becomes a candidate.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from taso.opspecs import OpSpec, spec_by_name
from taso.opspecs._window import _patch, pad_spatial, window_shape

PRIMES = (33554393, 33554383)  # the two largest primes below 2**25

FieldOp = Callable[["FieldEvaluator", Sequence[np.ndarray], dict], list[np.ndarray]]


@functools.cache
def _spec(op: str) -> OpSpec:
    return spec_by_name(op)


def field_element(value: float, prime: int) -> int:
    """A rational constant (given as a float) as an element of Z_p."""
    frac = Fraction(value).limit_denominator(1_000_000)
    return (frac.numerator % prime) * pow(frac.denominator, prime - 2, prime) % prime


@dataclass(frozen=True)
class FieldEvaluator:
    """Evaluates specs over Z_p; ``key`` separates the random functions of two evaluations."""

    prime: int
    key: int

    def random_tensor(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(0, self.prime, size=shape, dtype=np.int64)

    def evaluate(self, op: str, inputs: Sequence[np.ndarray], params: dict) -> list[np.ndarray]:
        full = _spec(op).complete(params)
        handler = _HANDLERS.get(op) or _by_kind(op)
        return [np.asarray(o, dtype=np.int64) % self.prime for o in handler(self, inputs, full)]

    def scalar(self, value: float) -> np.int64:
        return np.int64(field_element(value, self.prime))

    def hash_fn(self, x: np.ndarray, label: str) -> np.ndarray:
        """A random function Z_p -> Z_p (splitmix64 keyed by label and key), elementwise."""
        digest = hashlib.blake2b(f"{label}|{self.key}".encode(), digest_size=8).digest()
        salt = np.uint64(int.from_bytes(digest, "little"))
        with np.errstate(over="ignore"):
            z = x.astype(np.uint64) + salt
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        return (z % np.uint64(self.prime)).astype(np.int64)

    def inverse(self, x: np.ndarray) -> np.ndarray:
        """Elementwise modular inverse x**(p-2) (0 maps to 0)."""
        result = np.ones_like(x)
        base, exp = x % self.prime, self.prime - 2
        while exp:
            if exp & 1:
                result = result * base % self.prime
            base = base * base % self.prime
            exp >>= 1
        return result


def _label(op: str, params: dict) -> str:
    return f"{op}{sorted(params.items())!r}"


def _via_spec(op: str) -> FieldOp:
    def run(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
        return list(spec_by_name(op).semantics([np.asarray(a) for a in inputs], p))

    return run


def _uninterpreted(op: str) -> FieldOp:
    def run(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
        return [ev.hash_fn(inputs[0], _label(op, p))]

    return run


def _div(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    return [inputs[0] * ev.inverse(inputs[1]) % ev.prime]


def _rational_const(op: str) -> FieldOp:
    def run(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
        values = np.asarray(spec_by_name(op).semantics([], p)[0], dtype=np.float64)
        flat = [field_element(float(v), ev.prime) for v in values.reshape(-1)]
        return [np.asarray(flat, dtype=np.int64).reshape(values.shape)]

    return run


def _conv(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    plain = dict(p, activation="none")
    y = spec_by_name("Conv").semantics([np.asarray(a) for a in inputs], plain)[0] % ev.prime
    return [ev.hash_fn(y, "Relu[]") if p["activation"] == "relu" else y]


def _gemm(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    a, b = inputs[0], inputs[1]
    a = a.T if p["transA"] else a
    b = b.T if p["transB"] else b
    out = (a @ b) % ev.prime * ev.scalar(p["alpha"]) % ev.prime
    if len(inputs) == 3:
        out = out + inputs[2] * ev.scalar(p["beta"]) % ev.prime
    return [out]


def _window_sum(x: np.ndarray, p: dict, *, include_pad: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sum over each window (padding adds nothing) and the divisor of each output position."""
    kernel, strides, pads = tuple(p["kernel_shape"]), tuple(p["strides"]), tuple(p["pads"])
    oh, ow = window_shape(x.shape[2:], kernel, strides, (1, 1), pads)
    xp = pad_spatial(x, pads)
    valid = pad_spatial(np.ones(x.shape[-2:], dtype=np.int64), pads)
    total = np.zeros((*x.shape[:2], oh, ow), dtype=np.int64)
    count = np.zeros((oh, ow), dtype=np.int64)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            total = total + _patch(xp, i, j, (oh, ow), strides)
            count = count + _patch(valid, i, j, (oh, ow), strides)
    if include_pad:
        count = np.full((oh, ow), kernel[0] * kernel[1], dtype=np.int64)
    return total, count


def _avg_pool(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    total, count = _window_sum(inputs[0], p, include_pad=bool(p["count_include_pad"]))
    return [total % ev.prime * ev.inverse(count) % ev.prime]


def _max_pool(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    """g(sum of h(v) over the window's valid positions): a random symmetric aggregate."""
    hashed = ev.hash_fn(inputs[0], "MaxPool.h")
    total, _ = _window_sum(hashed, p, include_pad=False)
    return [ev.hash_fn(total % ev.prime, _label("MaxPool", p))]


def _global_avg(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    x = inputs[0]
    total = x.sum(axis=(2, 3), keepdims=True) % ev.prime
    return [total * ev.scalar(1.0 / (x.shape[2] * x.shape[3])) % ev.prime]


def _batch_norm(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    x, scale, bias, mean, var = inputs
    shape = (-1,) + (1,) * (x.ndim - 2)
    root = ev.hash_fn((var + ev.scalar(p["epsilon"])) % ev.prime, "Sqrt[]")
    k = (scale * ev.inverse(root) % ev.prime).reshape(shape)
    centred = (x - mean.reshape(shape)) % ev.prime
    return [(centred * k % ev.prime + bias.reshape(shape)) % ev.prime]


def _const_fill(ev: FieldEvaluator, inputs: Sequence[np.ndarray], p: dict) -> list[np.ndarray]:
    return [np.full(tuple(p["shape"]), ev.scalar(float(p["value"])), dtype=np.int64)]


_POLY_OPS = ("Add", "Sub", "Mul", "MatMul", "Concat", "Split", "Transpose", "Reshape", "Flatten",
             "Squeeze", "Unsqueeze", "Identity", "Enlarge", "ScalarMul", "ConstOnes",
             "ConstIdentityMatrix", "ConstIdentityConv")
_HASHED_OPS = ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Clip", "HardSigmoid", "HardSwish",
               "SiLU", "Gelu")

_HANDLERS: dict[str, FieldOp] = {
    **{op: _via_spec(op) for op in _POLY_OPS},
    **{op: _uninterpreted(op) for op in _HASHED_OPS},
    "Div": _div,
    "Conv": _conv,
    "Gemm": _gemm,
    "AveragePool": _avg_pool,
    "MaxPool": _max_pool,
    "GlobalAveragePool": _global_avg,
    "BatchNormalization": _batch_norm,
    "ConstFill": _const_fill,
    "ConstPoolKernel": _rational_const("ConstPoolKernel"),
}


def digest(arrays: Sequence[np.ndarray]) -> bytes:
    """A 16-byte digest of values and shapes (the bucket key of one graph output)."""
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(repr(a.shape).encode())
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return h.digest()


@functools.cache
def _by_kind(op: str) -> FieldOp:
    """An operator without a handler of its own (one the user added, see
    `taso.opspecs.EXTRA_SPECS_ENV`): its NumPy semantics mod p if its spec says it is
    polynomial, else an uninterpreted random function, like the built-in ones."""
    return _via_spec(op) if _spec(op).polynomial else _uninterpreted(op)
