"""Axioms for the shapes model converters emit: a per-channel Mul into a bias-free Conv,
a layer scale into a dense layer's weight columns (also
through the permute back to NCHW that follows it), ``Gemm = MatMul + Add``, and BatchNorm
folding into a Conv with any parameters and epsilon
(the normalization axiom ``bn_fold_conv`` binds them to its configs), with and without a
bias input. Rule proofs of the converter forms (``substitutions/generate/_converter_forms.py``) use
them; they are validated and mutation-tested like every other axiom.
"""

from __future__ import annotations

from collections.abc import Mapping

from taso.opspecs._types import Exactness, Shape
from taso.opspecs.axioms._core import Axiom, AxiomConfig, cfg

CONV_KEYS = ("strides", "pads", "dilations", "group")
CHANNEL_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "c": (1, 3, 1, 1)}),
    cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "b": (2,), "c": (2, 1, 1)},
        strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (2, 4, 3, 3), "w": (4, 1, 3, 3), "b": (4,), "c": (1, 4, 1, 1)},
        group=4, pads=(1, 1, 1, 1)),
)


def per_channel(shapes: Mapping[str, Shape], name: str = "c", *, scalar: bool = False) -> bool:
    """`name` holds one value per output channel of the 2-d conv of x by w, (1, M, 1, 1) or
    (M, 1, 1) with M = w's first dim, or with `scalar` one value for all: the shapes where
    the per-channel axioms hold (a (1, 1, 1, W) constant scales the output's width)."""
    if not len(shapes["x"]) == len(shapes["w"]) == 4:
        return False
    m = shapes["w"][0]
    return tuple(shapes[name]) in ((1, m, 1, 1), (m, 1, 1), *(((),) if scalar else ()))


def drop_bias(configs: tuple[AxiomConfig, ...]) -> tuple[AxiomConfig, ...]:
    """The configs without their bias input `b` (for an axiom's bias-free form)."""
    return tuple(cfg({k: v for k, v in c.shapes.items() if k != "b"}, **c.params) for c in configs)


NOBIAS_CONFIGS = drop_bias(CHANNEL_CONFIGS)
SCALAR_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "c": ()}),
    cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "b": (2,), "c": ()}, strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (2, 4, 3, 3), "w": (4, 1, 3, 3), "b": (4,), "c": ()}, group=4, pads=(1, 1, 1, 1)),
)
"""The per-channel configs with a scalar constant: one value for every channel (real
exports scale by a learnable scalar per block, written as a (1,)-shaped constant that the
canonical stage makes a scalar)."""
SCALAR_NOBIAS_CONFIGS = drop_bias(SCALAR_CONFIGS)
INPUT_SCALE_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "s": ()}),
    cfg({"x": (1, 2, 5, 5), "w": (2, 2, 3, 3), "b": (2,), "s": ()}, strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (2, 4, 4, 4), "w": (4, 1, 3, 3), "b": (4,), "s": ()}, group=4, pads=(1, 2, 1, 0)),
    cfg({"x": (1, 4, 5, 5), "w": (6, 2, 2, 2), "b": (6,), "s": ()}, group=2, strides=(1, 2)),
)
"""Scalar scales of a conv's input: padded, strided, depthwise and grouped."""
INPUT_SHIFT_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "s": ()}),
    cfg({"x": (1, 2, 5, 5), "w": (2, 2, 3, 3), "b": (2,), "s": ()}, strides=(2, 2)),
    cfg({"x": (2, 4, 4, 4), "w": (4, 1, 3, 3), "b": (4,), "s": ()}, group=4),
    cfg({"x": (1, 4, 5, 5), "w": (6, 2, 2, 2), "b": (6,), "s": ()}, group=2, strides=(1, 2)),
)
"""Scalar shifts of an unpadded conv's input (no ``pads`` key: the default, zero, only)."""



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


def scales_columns(shapes: Mapping[str, Shape], name: str = "g") -> bool:
    """`name` scales the columns of the matrix w: (N,) or (1, N) with N = w's last dim, and
    x at least a matrix (a vector x @ w times a (1, N) g would gain an axis that
    x @ (w * g) lacks): the shapes where ``(x @ w) * g = x @ (w * g)`` holds (a (M, 1) g
    scales the product's rows, which w cannot)."""
    w = shapes["w"]
    return len(w) == 2 and len(shapes["x"]) >= 2 and tuple(shapes[name]) in ((w[1],), (1, w[1]))


def scales_moved_columns(shapes: Mapping[str, Shape], perm: tuple[int, ...]) -> bool:
    """`g` scales the axis that ``transpose(x @ w + b, perm)`` moves w's columns to: N = w's
    last dim on that axis and 1 on every other, broadcast from the right ((1, N, 1, 1) or
    (N, 1, 1) after a (0, 3, 1, 2) permute back to NCHW), b one value per column, w a matrix
    and the product of perm's rank: the shapes where the layer scale folds into the columns."""
    w, rank = shapes["w"], len(perm)
    if len(w) != 2 or len(shapes["x"]) != rank or rank < 2 or tuple(shapes["b"]) != (w[1],):
        return False
    full = tuple(w[1] if axis == rank - 1 else 1 for axis in perm)
    g = tuple(shapes["g"])
    return len(g) <= rank and g == full[rank - len(g):]  # too short to reach N's axis: one value


def scales_unit_columns(shapes: Mapping[str, Shape]) -> bool:
    """`g` is (1, ..., 1, N) with N = w's last dim and no higher rank than x, w a matrix and b
    one value per column: the layer scale of ``x @ w + b`` written at the product's rank
    (as a Transpose sunk below it leaves it), where folding it keeps the product's shape."""
    unpermuted = tuple(range(len(shapes["x"])))
    return len(shapes["g"]) >= 1 and scales_moved_columns(shapes, unpermuted)


def _folded_columns(a, v):  # noqa: ANN001, ANN202
    """x @ (w * g') + b * g' with g' = reshape(g, (-1,)): a layer scale folded into the columns."""
    g = reshape_1d(a, v["g"])
    return a("Add", a("MatMul", v["x"], a("Mul", v["w"], g)), a("Mul", v["b"], g))


UNIT_COLUMN_CONFIGS = (
    cfg({"x": (1, 2, 3, 4), "w": (4, 3), "b": (3,), "g": (1, 1, 1, 3)}),
    cfg({"x": (2, 3, 2), "w": (2, 4), "b": (4,), "g": (1, 1, 4)}),
    cfg({"x": (3, 2), "w": (2, 2), "b": (2,), "g": (2,)}),
)
"""A layer scale on a channels-last product (rank 4, 3) and on a matrix."""


MOVED_COLUMN_CONFIGS = (
    cfg({"x": (1, 2, 3, 4), "w": (4, 3), "b": (3,), "g": (1, 3, 1, 1)}, perm=(0, 3, 1, 2)),
    cfg({"x": (1, 3, 2, 2), "w": (2, 4), "b": (4,), "g": (4, 1, 1)}, perm=(0, 3, 1, 2)),
    cfg({"x": (2, 3), "w": (3, 2), "b": (2,), "g": (2, 1)}, perm=(1, 0)),
    cfg({"x": (2, 3, 2), "w": (2, 3), "b": (3,), "g": (3, 1, 1)}, perm=(2, 0, 1)),
)
"""A dense layer's output permuted back to NCHW, then a layer scale per channel (torchvision
and timm ConvNeXt), written (1, C, 1, 1) and (C, 1, 1); a matrix transposed; rank 3."""


COLUMN_CONFIGS = (cfg({"x": (2, 3), "w": (3, 4), "g": (4,)}),
                  cfg({"x": (2, 2, 3), "w": (3, 2), "g": (1, 2)}),
                  cfg({"x": (1, 5, 1), "w": (1, 3), "g": (3,)}))
"""A layer scale after a dense layer: a matrix, a batch of them, a product of rank 1."""


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
BN_NOBIAS_CONFIGS = drop_bias(BN_CONFIGS)


def _bn_fold_bias(a, v, p):  # noqa: ANN001, ANN202
    k = bn_scale(a, v, p)
    bias = a("Add", a("Mul", a("Sub", v["b"], v["mean"]), k), v["beta"])
    return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, k)), bias, **conv_params(p))


def _bn_fold_nobias(a, v, p):  # noqa: ANN001, ANN202
    k = bn_scale(a, v, p)
    shift = a("Sub", v["beta"], a("Mul", v["mean"], k))
    return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, k)), shift, **conv_params(p))


def _conv_args(v, bias: bool) -> tuple:  # noqa: ANN001
    return (v["x"], v["w"], v["b"]) if bias else (v["x"], v["w"])


def _scale_input(bias: bool) -> Axiom:
    """conv(x * s, w[, b]) = conv(x, w * s[, b]) for one scalar s: zero padding stays zero."""
    def lhs(a, v, p):  # noqa: ANN001, ANN202
        scaled = dict(v, x=a("Mul", v["x"], v["s"]))
        return a("Conv", *_conv_args(scaled, bias), **conv_params(p))

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        return a("Conv", *_conv_args(dict(v, w=a("Mul", v["w"], v["s"])), bias), **conv_params(p))

    suffix = "" if bias else "_nobias"
    return Axiom(f"conv_scale_input{suffix}",
                 f"conv(x * s, w{', b' if bias else ''}) = conv(x, w * s{', b' if bias else ''})  (s a scalar)",
                 ("x", "w", "b", "s") if bias else ("x", "w", "s"), lhs, rhs,
                 INPUT_SCALE_CONFIGS if bias else drop_bias(INPUT_SCALE_CONFIGS),
                 condition=lambda s, p: tuple(s["s"]) == (), exactness=Exactness.REASSOCIATES)


def _shift_input(bias: bool) -> Axiom:
    """conv(x + s, w[, b]) = conv(x, w, [b +] s * filtersum(w)) for one scalar s, unpadded."""
    def lhs(a, v, p):  # noqa: ANN001, ANN202
        return a("Conv", *_conv_args(dict(v, x=a("Add", v["x"], v["s"])), bias), **conv_params(p))

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        shift = a("Mul", v["s"], a("FilterSum", v["w"]))
        return a("Conv", v["x"], v["w"], a("Add", v["b"], shift) if bias else shift, **conv_params(p))

    suffix = "" if bias else "_nobias"
    return Axiom(f"conv_shift_input{suffix}",
                 f"conv(x + s, w{', b' if bias else ''}) = conv(x, w, {'b + ' if bias else ''}s * filtersum(w))"
                 "  (s a scalar, no padding)",
                 ("x", "w", "b", "s") if bias else ("x", "w", "s"), lhs, rhs,
                 INPUT_SHIFT_CONFIGS if bias else drop_bias(INPUT_SHIFT_CONFIGS),
                 condition=lambda s, p: tuple(p.get("pads", (0, 0, 0, 0))) == (0, 0, 0, 0),
                 exactness=Exactness.REASSOCIATES)


AXIOMS = (
    _scale_input(bias=True),
    _scale_input(bias=False),
    _shift_input(bias=True),
    _shift_input(bias=False),
    Axiom("conv_mul_channel_nobias", "conv(x, w) * c = conv(x, w * reshape(c, (M,1,1,1)))",
          ("x", "w", "c"),
          lambda a, v, p: a("Mul", a("Conv", v["x"], v["w"], **conv_params(p)), v["c"]),
          lambda a, v, p: a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, v["c"])), **conv_params(p)),
          NOBIAS_CONFIGS + SCALAR_NOBIAS_CONFIGS, condition=lambda s, p: per_channel(s, scalar=True),
          exactness=Exactness.REASSOCIATES),
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
    Axiom("matmul_mul_columns", "(x @ w) * g = x @ (w * g)  (g scales w's columns)", ("x", "w", "g"),
          lambda a, v, p: a("Mul", a("MatMul", v["x"], v["w"]), v["g"]),
          lambda a, v, p: a("MatMul", v["x"], a("Mul", v["w"], v["g"])),
          COLUMN_CONFIGS, condition=lambda s, p: scales_columns(s), exactness=Exactness.REASSOCIATES),
    Axiom("transpose_matmul_bias_mul_columns",
          "transpose(x @ w + b, p) * g = transpose(x @ (w * g') + b * g', p), g' = reshape(g, (-1,))  "
          "(g scales the axis p moves w's columns to)", ("x", "w", "b", "g"),
          lambda a, v, p: a("Mul", a("Transpose", a("Add", a("MatMul", v["x"], v["w"]), v["b"]), perm=p["perm"]),
                            v["g"]),
          lambda a, v, p: a("Transpose", _folded_columns(a, v), perm=p["perm"]),
          MOVED_COLUMN_CONFIGS, condition=lambda s, p: scales_moved_columns(s, tuple(p["perm"])),
          exactness=Exactness.REASSOCIATES),
    Axiom("matmul_bias_mul_unit_columns",
          "(x @ w + b) * g = x @ (w * g') + b * g', g' = reshape(g, (-1,))  (g is (1, ..., 1, N))",
          ("x", "w", "b", "g"),
          lambda a, v, p: a("Mul", a("Add", a("MatMul", v["x"], v["w"]), v["b"]), v["g"]),
          lambda a, v, p: _folded_columns(a, v),
          UNIT_COLUMN_CONFIGS, condition=lambda s, p: scales_unit_columns(s), exactness=Exactness.REASSOCIATES),
)
