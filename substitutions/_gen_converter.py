"""Converter-form rules: the shapes TF/Paddle/PyTorch exporters emit, proved from axioms.

(``clip(x + 3, 0, 6) / 6 = hardsigmoid(x; 1/6, 1/2)`` is not here: 1/6 has no exact
float, so the identity holds only up to rounding and no exact proof exists.)

Real exported models write BatchNorm as a per-channel ``Mul`` then ``Add`` after a
bias-free ``Conv``, HardSwish as ``x * (clip(x + 3, 0, 6) / 6)`` and dense layers as
``MatMul`` then ``Add``. Each rule here is written once as a pair of builders (the
`Axiom` data type serves as the container: name, math, inputs, sides, witness configs),
turned into a parametric `Rule`, **proved by Z3 from the axiom bank** and checked
numerically on its configs (`converter_rules`).

Identities the opspecs axioms do not state yet are added as generator axioms
(`EXTRA_AXIOMS`, validated numerically and symbolically like the others by
`tests/test_generate_converter.py`): a per-channel Mul into a bias-free Conv, the
``Gemm = MatMul + Add`` and BatchNorm
folding into a Conv with any parameters and epsilon (the opspecs axiom binds them to its
configs), with and without a bias input.

Per-channel folds carry shape constraints (the constant is ``(1, M, 1, 1)`` or ``(M, 1, 1)``
with ``M`` the Conv's output channels, and a weight), since the uninterpreted proof does
not see broadcasting.
"""

from __future__ import annotations

from dataclasses import replace

from taso.opspecs import Exactness
from taso.opspecs.axioms import Axiom, cfg

CHANNEL = "shape('c') in ((1, shape('w')[0], 1, 1), (shape('w')[0], 1, 1))"
FOLD = ("rank('x') == 4", "is_const('c')", CHANNEL)
GEMM = ("rank('A') == 2", "rank('B') == 2", "rank('C') <= 2")
RULE_CONSTRAINTS: dict[str, tuple[str, ...]] = {
    "conv_bias_add": ("rank('x') == 4", CHANNEL),
    "conv_bias_add_again": ("rank('x') == 4", CHANNEL),
    "conv_mul_channel": ("rank('x') == 4", CHANNEL),
    "conv_mul_channel_nobias": ("rank('x') == 4", CHANNEL),
    "gemm_matmul_add": GEMM,
}
"""Side conditions of axiom-derived rules that the axioms' configs only imply."""

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
UNARY = (cfg({"x": (2, 3)}), cfg({"x": (1, 3, 2, 2)}), cfg({"x": (5,)}))


def _conv(p: dict) -> dict:
    return {k: p[k] for k in CONV_KEYS if k in p}


def _fill(a, value: float):  # noqa: ANN001, ANN202 - algebra values are untyped
    return a("ConstFill", shape=(), value=value)


def _r4(a, c):  # noqa: ANN001, ANN202
    return a("Reshape", c, shape=(-1, 1, 1, 1))


def _r1(a, c):  # noqa: ANN001, ANN202
    return a("Reshape", c, shape=(-1,))


def _recip(a, c):  # noqa: ANN001, ANN202
    return a("Div", _fill(a, 1.0), c)


def _hard_sigmoid6(a, x):  # noqa: ANN001, ANN202
    """clip(x + 3, 0, 6) / 6 as exporters write it."""
    return a("Div", a("Clip", a("Add", x, _fill(a, 3.0)), min=0.0, max=6.0), _fill(a, 6.0))


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


def _bn_k(a, v, p):  # noqa: ANN001, ANN202
    return a("Div", v["s"], a("Sqrt", a("Add", v["var"], _fill(a, p["epsilon"]))))


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
    k = _bn_k(a, v, p)
    bias = a("Add", a("Mul", a("Sub", v["b"], v["mean"]), k), v["beta"])
    return a("Conv", v["x"], a("Mul", v["w"], _r4(a, k)), bias, **_conv(p))


def _bn_fold_nobias(a, v, p):  # noqa: ANN001, ANN202
    k = _bn_k(a, v, p)
    shift = a("Sub", v["beta"], a("Mul", v["mean"], k))
    return a("Conv", v["x"], a("Mul", v["w"], _r4(a, k)), shift, **_conv(p))


EXTRA_AXIOMS = (
    Axiom("conv_mul_channel_nobias", "conv(x, w) * c = conv(x, w * reshape(c, (M,1,1,1)))",
          ("x", "w", "c"),
          lambda a, v, p: a("Mul", a("Conv", v["x"], v["w"], **_conv(p)), v["c"]),
          lambda a, v, p: a("Conv", v["x"], a("Mul", v["w"], _r4(a, v["c"])), **_conv(p)),
          NOBIAS_CONFIGS, exactness=Exactness.REASSOCIATES),
    Axiom("gemm_matmul_add", "gemm(A, B, C; 1, 1, 0, tB) = A @ op(B) + C", ("A", "B", "C"),
          lambda a, v, p: a("Gemm", v["A"], v["B"], v["C"], transB=p["transB"]),
          _gemm_rhs, GEMM_CONFIGS),
    Axiom("bn_fold_conv_any", "bn(conv(x, w, b)) = conv(x, w * k, (b - mean) * k + beta)  (any conv)",
          BN_INPUTS, lambda a, v, p: _bn(a, a("Conv", v["x"], v["w"], v["b"], **_conv(p)), v, p),
          _bn_fold_bias, BN_CONFIGS, positive=BN_STATS, exactness=Exactness.REASSOCIATES),
    Axiom("bn_fold_conv_nobias", "bn(conv(x, w)) = conv(x, w * k, beta - mean * k)",
          BN_INPUTS[:2] + BN_INPUTS[3:],
          lambda a, v, p: _bn(a, a("Conv", v["x"], v["w"], **_conv(p)), v, p),
          _bn_fold_nobias, BN_NOBIAS_CONFIGS, positive=BN_STATS, exactness=Exactness.REASSOCIATES),
)


def _conv_b(v: dict, bias: bool) -> tuple:
    return (v["x"], v["w"], v["b"]) if bias else (v["x"], v["w"])


def _fold(op: str, bias: bool) -> Axiom:
    """``op(conv(x, w[, b]), c)`` folded into the weight (and bias) for Mul, Add and Div."""
    inputs = ("x", "w", "b", "c") if bias else ("x", "w", "c")
    configs = CHANNEL_CONFIGS if bias else NOBIAS_CONFIGS
    name = f"fold_{op.lower()}_conv{'_bias' if bias else ''}"

    def lhs(a, v, p):  # noqa: ANN001, ANN202
        return a(op, a("Conv", *_conv_b(v, bias), **_conv(p)), v["c"])

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        if op == "Add":
            b = a("Add", v["b"], _r1(a, v["c"])) if bias else _r1(a, v["c"])
            return a("Conv", v["x"], v["w"], b, **_conv(p))
        c = v["c"] if op == "Mul" else _recip(a, v["c"])
        args = [v["x"], a("Mul", v["w"], _r4(a, c))]
        if bias:
            args.append(a("Mul", v["b"], _r1(a, c)))
        return a("Conv", *args, **_conv(p))

    positive = frozenset({"c"}) if op == "Div" else frozenset()
    return Axiom(name, f"{op.lower()}(conv(x, w{', b' if bias else ''}), c) folded into the conv",
                 inputs, lhs, rhs, configs, positive=positive, exactness=Exactness.REASSOCIATES)


CONVERTER_FORMS = (
    *(_fold(op, bias) for op in ("Mul", "Add", "Div") for bias in (False, True)),
    *(replace(a, name=n) for a, n in zip(EXTRA_AXIOMS[2:4], ("fold_bn_conv_bias", "fold_bn_conv"),
                                          strict=True)),
    Axiom("hard_swish_mul_div6", "x * (clip(x + 3, 0, 6) / 6) = hardswish(x)", ("x",),
          lambda a, v, p: a("Mul", v["x"], _hard_sigmoid6(a, v["x"])),
          lambda a, v, p: a("HardSwish", v["x"]), UNARY),
    Axiom("hard_swish_div6_mul", "(clip(x + 3, 0, 6) / 6) * x = hardswish(x)", ("x",),
          lambda a, v, p: a("Mul", _hard_sigmoid6(a, v["x"]), v["x"]),
          lambda a, v, p: a("HardSwish", v["x"]), UNARY),
    Axiom("matmul_add_to_gemm", "A @ B + C = gemm(A, B, C)", ("A", "B", "C"),
          lambda a, v, p: a("Add", a("MatMul", v["A"], v["B"]), v["C"]),
          lambda a, v, p: a("Gemm", v["A"], v["B"], v["C"]), GEMM_CONFIGS[::2]),
    Axiom("matmul_transposed_add_to_gemm", "A @ transpose(B) + C = gemm(A, B, C; transB=1)",
          ("A", "B", "C"),
          lambda a, v, p: a("Add", a("MatMul", v["A"], a("Transpose", v["B"], perm=(1, 0))),
                            v["C"]),
          lambda a, v, p: a("Gemm", v["A"], v["B"], v["C"], transB=1), GEMM_CONFIGS[1::2]),
)
"""Converter-form rules (source -> target), each proved by Z3 when the library is built."""

FORM_CONSTRAINTS: dict[str, tuple[str, ...]] = {
    **{f.name: FOLD for f in CONVERTER_FORMS if f.name.startswith("fold_") and "bn" not in f.name},
    "fold_bn_conv_bias": ("rank('x') == 4",),
    "fold_bn_conv": ("rank('x') == 4",),
    "matmul_add_to_gemm": GEMM,
    "matmul_transposed_add_to_gemm": GEMM,
}
