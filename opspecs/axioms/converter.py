"""Axioms for the shapes model converters emit: a per-channel Mul into a bias-free Conv,
``Gemm = MatMul + Add``, and BatchNorm folding into a Conv with any parameters and epsilon
(the normalization axiom ``bn_fold_conv`` binds them to its configs), with and without a
bias input. Rule proofs of the converter forms (``substitutions/generate/_converter_forms.py``) use
them; they are validated and mutation-tested like every other axiom.
"""

from __future__ import annotations

from taso.opspecs._types import Exactness
from taso.opspecs.axioms._core import Axiom, cfg

CONV_KEYS = ("strides", "pads", "dilations", "group")
CHANNEL_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "c": (1, 3, 1, 1)}),
    cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "b": (2,), "c": (2, 1, 1)},
        strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (2, 4, 3, 3), "w": (4, 1, 3, 3), "b": (4,), "c": (1, 4, 1, 1)},
        group=4, pads=(1, 1, 1, 1)),
)
NOBIAS_CONFIGS = tuple(cfg({k: v for k, v in c.shapes.items() if k != "b"}, **c.params)
                       for c in CHANNEL_CONFIGS)


def conv_params(p: dict) -> dict:
    """The Conv parameters among an axiom's parameters."""
    return {k: p[k] for k in CONV_KEYS if k in p}


def fill(a, value: float):  # noqa: ANN001, ANN202 - algebra values are untyped
    """A 0-d constant."""
    return a("ConstFill", shape=(), value=value)


def reshape_4d(a, c):  # noqa: ANN001, ANN202
    """A per-channel constant as (M, 1, 1, 1), to scale a Conv weight."""
    return a("Reshape", c, shape=(-1, 1, 1, 1))


def reshape_1d(a, c):  # noqa: ANN001, ANN202
    """A per-channel constant as (M,), a Conv bias."""
    return a("Reshape", c, shape=(-1,))


def _gemm_rhs(a, v, p):  # noqa: ANN001, ANN202
    b = a("Transpose", v["B"], perm=(1, 0)) if p["transB"] else v["B"]
    return a("Add", a("MatMul", v["A"], b), v["C"])


GEMM_CONFIGS = (cfg({"A": (2, 3), "B": (3, 4), "C": (4,)}, transB=0),
                cfg({"A": (2, 3), "B": (4, 3), "C": (2, 4)}, transB=1),
                cfg({"A": (1, 3), "B": (3, 2), "C": (1, 2)}, transB=0),
                cfg({"A": (3, 2), "B": (1, 2), "C": ()}, transB=1))


def _bn(a, x, v, p):  # noqa: ANN001, ANN202
    return a("BatchNormalization", x, v["s"], v["beta"], v["mean"], v["var"],
             epsilon=p["epsilon"])


def bn_scale(a, v, p):  # noqa: ANN001, ANN202
    """k = scale / sqrt(var + epsilon)."""
    return a("Div", v["s"], a("Sqrt", a("Add", v["var"], fill(a, p["epsilon"]))))


def _bn_shapes(c: int, **extra: tuple[int, ...]) -> dict:
    return {"s": (c,), "beta": (c,), "mean": (c,), "var": (c,), **extra}


BN_CONFIGS = (
    cfg(_bn_shapes(2, x=(1, 2, 3, 3), w=(2, 2, 1, 1), b=(2,)), epsilon=1e-5),
    cfg(_bn_shapes(3, x=(1, 2, 4, 4), w=(3, 2, 3, 3), b=(3,)), epsilon=1e-5,
        strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg(_bn_shapes(2, x=(1, 2, 3, 3), w=(2, 1, 3, 3), b=(2,)), epsilon=1e-3,
        group=2, pads=(1, 1, 1, 1)),
)
BN_STATS = frozenset({"var"})
BN_INPUTS = ("x", "w", "b", "s", "beta", "mean", "var")
BN_NOBIAS_CONFIGS = tuple(cfg({k: v for k, v in c.shapes.items() if k != "b"}, **c.params)
                          for c in BN_CONFIGS)


def _bn_fold_bias(a, v, p):  # noqa: ANN001, ANN202
    k = bn_scale(a, v, p)
    bias = a("Add", a("Mul", a("Sub", v["b"], v["mean"]), k), v["beta"])
    return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, k)), bias, **conv_params(p))


def _bn_fold_nobias(a, v, p):  # noqa: ANN001, ANN202
    k = bn_scale(a, v, p)
    shift = a("Sub", v["beta"], a("Mul", v["mean"], k))
    return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, k)), shift, **conv_params(p))


AXIOMS = (
    Axiom("conv_mul_channel_nobias", "conv(x, w) * c = conv(x, w * reshape(c, (M,1,1,1)))",
          ("x", "w", "c"),
          lambda a, v, p: a("Mul", a("Conv", v["x"], v["w"], **conv_params(p)), v["c"]),
          lambda a, v, p: a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, v["c"])), **conv_params(p)),
          NOBIAS_CONFIGS, exactness=Exactness.REASSOCIATES),
    Axiom("gemm_matmul_add", "gemm(A, B, C; 1, 1, 0, tB) = A @ op(B) + C", ("A", "B", "C"),
          lambda a, v, p: a("Gemm", v["A"], v["B"], v["C"], transB=p["transB"]),
          _gemm_rhs, GEMM_CONFIGS),
    Axiom("bn_fold_conv_any", "bn(conv(x, w, b)) = conv(x, w * k, (b - mean) * k + beta)  (any conv)",
          BN_INPUTS, lambda a, v, p: _bn(a, a("Conv", v["x"], v["w"], v["b"], **conv_params(p)), v, p),
          _bn_fold_bias, BN_CONFIGS, positive=BN_STATS, exactness=Exactness.REASSOCIATES),
    Axiom("bn_fold_conv_nobias", "bn(conv(x, w)) = conv(x, w * k, beta - mean * k)",
          BN_INPUTS[:2] + BN_INPUTS[3:],
          lambda a, v, p: _bn(a, a("Conv", v["x"], v["w"], **conv_params(p)), v, p),
          _bn_fold_nobias, BN_NOBIAS_CONFIGS, positive=BN_STATS, exactness=Exactness.REASSOCIATES),
)
