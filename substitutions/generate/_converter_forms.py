"""Converter-form rules: the shapes TF/Paddle/PyTorch exporters emit, proved from axioms.

(``clip(x + 3, 0, 6) / 6 = hardsigmoid(x; 1/6, 1/2)`` is not here: 1/6 has no exact
float, so the identity holds only up to rounding and no exact proof exists.)

Real exported models write BatchNorm as a per-channel ``Mul`` then ``Add`` after a
bias-free ``Conv``, HardSwish as ``x * (clip(x + 3, 0, 6) / 6)`` and dense layers as
``MatMul`` then ``Add``. Each rule here is written once as a pair of builders (the
`Axiom` data type serves as the container: name, math, inputs, sides, witness configs),
turned into a parametric `Rule`, **proved by Z3 from the axiom bank** and checked
numerically on its configs (`converter_rules`).

The identities these proofs need beyond the core axioms (a per-channel Mul into a
bias-free Conv, ``Gemm = MatMul + Add``, BatchNorm folding into any Conv) are axioms of
their own in `taso.opspecs.axioms.converter`, validated like every other axiom.

Per-channel folds carry shape constraints (the constant is ``(1, M, 1, 1)`` or ``(M, 1, 1)``
with ``M`` the Conv's output channels, and a weight), since the uninterpreted proof does
not see broadcasting.
"""

from __future__ import annotations

from dataclasses import replace

from taso.opspecs import Exactness
from taso.opspecs.axioms import Axiom, cfg
from taso.opspecs.axioms.converter import AXIOMS as CONVERTER_AXIOMS
from taso.opspecs.axioms.converter import (
    CHANNEL_CONFIGS,
    COLUMN_CONFIGS,
    GEMM_CONFIGS,
    INPUT_SHIFT_CONFIGS,
    NOBIAS_CONFIGS,
    SCALAR_CONFIGS,
    SCALAR_NOBIAS_CONFIGS,
    conv_params,
    drop_bias,
    fill,
    reshape_1d,
    reshape_4d,
)


def _per_channel(name: str, *, scalar: bool = False) -> str:
    """`name` is per output channel of the conv's weight `w` ((1, M, 1, 1) or (M, 1, 1)), or
    with `scalar` also one value for all."""
    shapes = "(1, shape('w')[0], 1, 1), (shape('w')[0], 1, 1)"
    return f"shape({name!r}) in ({'(), ' if scalar else ''}{shapes})"


CHANNEL = _per_channel("c")
CHANNEL_OR_SCALAR = _per_channel("c", scalar=True)
FOLD = ("rank('x') == 4", "is_const('c')", CHANNEL)
FOLD_OR_SCALAR = ("rank('x') == 4", "is_const('c')", CHANNEL_OR_SCALAR)
INPUT_SCALAR = ("rank('x') == 4", "rank('w') == 4", "is_const('w')", "is_const('s')", "shape('s') == ()")
"""A scalar (the canonical stage writes every one-element constant operand as a scalar)
folded into the weight of the conv that reads it."""
SCALE_SHIFT = ("is_const('s')", _per_channel("s", scalar=True), "is_const('t')", _per_channel("t", scalar=True))
"""A scale then a shift of a conv's output: per channel or one value each."""
F32_MAX = 3.4028234663852886e38
"""A finite positive scale: relu(x) * inf is NaN at x = 0 where relu(x * inf) is 0."""
GEMM = ("rank('A') == 2", "rank('B') == 2", "rank('C') <= 2")
COLUMNS = ("rank('x') >= 2", "rank('w') == 2", "is_const('w')", "is_const('g')",
           "shape('g') in ((shape('w')[1],), (1, shape('w')[1]))")
"""A constant layer scale g of a dense layer's constant weight w, one value per column
(`taso.opspecs.axioms.converter.scales_columns`)."""
RULE_CONSTRAINTS: dict[str, tuple[str, ...]] = {
    "conv_bias_add": ("rank('x') == 4", CHANNEL),
    "conv_bias_add_again": ("rank('x') == 4", CHANNEL),
    "conv_mul_channel": ("rank('x') == 4", CHANNEL),
    "conv_mul_channel_nobias": ("rank('x') == 4", CHANNEL),
    "gemm_matmul_add": GEMM,
    "relu_scale_positive": ("is_const('s')", "shape('s') == ()", f"0 < value('s') <= {F32_MAX!r}"),
    "add_right_comm": ("is_const('y')", "not is_const('z')"),  # a sum's constant term added last
    "matmul_mul_columns": COLUMNS,
}
"""Side conditions of axiom-derived rules that the axioms' configs only imply (a sign that
the axiom's `positive` inputs only sample: the prover's bank leaves such axioms out)."""

UNARY = (cfg({"x": (2, 3)}), cfg({"x": (1, 3, 2, 2)}), cfg({"x": (5,)}))


def _recip(a, c):  # noqa: ANN001, ANN202
    return a("Div", fill(a, 1.0), c)


def _hard_sigmoid6(a, x):  # noqa: ANN001, ANN202
    """clip(x + 3, 0, 6) / 6 as exporters write it."""
    return a("Div", a("Clip", a("Add", x, fill(a, 3.0)), min=0.0, max=6.0), fill(a, 6.0))




def _conv_b(v: dict, bias: bool) -> tuple:
    return (v["x"], v["w"], v["b"]) if bias else (v["x"], v["w"])


def _takes_scalar(op: str, bias: bool) -> bool:
    """A scalar c folds like a per-channel one, except into a missing bias, which must be
    (M,): ``conv(x, w) + c`` with c a scalar has no bias of the right shape to become."""
    return bias or op != "Add"


def _fold(op: str, bias: bool) -> Axiom:
    """``op(conv(x, w[, b]), c)`` folded into the weight (and bias) for Mul, Add and Div."""
    inputs = ("x", "w", "b", "c") if bias else ("x", "w", "c")
    configs = CHANNEL_CONFIGS if bias else NOBIAS_CONFIGS
    if _takes_scalar(op, bias):
        configs += SCALAR_CONFIGS if bias else SCALAR_NOBIAS_CONFIGS
    name = f"fold_{op.lower()}_conv{'_bias' if bias else ''}"

    def lhs(a, v, p):  # noqa: ANN001, ANN202
        return a(op, a("Conv", *_conv_b(v, bias), **conv_params(p)), v["c"])

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        if op == "Add":
            b = a("Add", v["b"], reshape_1d(a, v["c"])) if bias else reshape_1d(a, v["c"])
            return a("Conv", v["x"], v["w"], b, **conv_params(p))
        c = v["c"] if op == "Mul" else _recip(a, v["c"])
        args = [v["x"], a("Mul", v["w"], reshape_4d(a, c))]
        if bias:
            args.append(a("Mul", v["b"], reshape_1d(a, c)))
        return a("Conv", *args, **conv_params(p))

    positive = frozenset({"c"}) if op == "Div" else frozenset()
    return Axiom(name, f"{op.lower()}(conv(x, w{', b' if bias else ''}), c) folded into the conv",
                 inputs, lhs, rhs, configs, positive=positive, exactness=Exactness.REASSOCIATES)


def _fold_affine(bias: bool) -> Axiom:
    """``conv(x, w[, b]) * c + d`` folded into the conv in one step (BatchNorm as Keras and
    tf2onnx write it: a per-channel Mul then Add after the conv). Folding the Mul alone
    leaves an Add that ORT runs apart from the conv where the two together do not."""
    inputs = ("x", "w", "b", "c", "d") if bias else ("x", "w", "c", "d")

    def lhs(a, v, p):  # noqa: ANN001, ANN202
        return a("Add", a("Mul", a("Conv", *_conv_b(v, bias), **conv_params(p)), v["c"]), v["d"])

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        shift = reshape_1d(a, v["d"])
        new_bias = a("Add", a("Mul", v["b"], reshape_1d(a, v["c"])), shift) if bias else shift
        return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, v["c"])), new_bias, **conv_params(p))

    configs = tuple(cfg({**c.shapes, "d": c.shapes["c"]}, **c.params)
                    for c in (CHANNEL_CONFIGS + SCALAR_CONFIGS if bias else NOBIAS_CONFIGS))
    return Axiom(f"fold_mul_add_conv{'_bias' if bias else ''}",
                 f"conv(x, w{', b' if bias else ''}) * c + d folded into the conv", inputs, lhs, rhs, configs,
                 exactness=Exactness.REASSOCIATES)


def _fold_shift_affine(bias: bool) -> Axiom:
    """``(conv(x, w[, b]) + c) * s + t`` folded into the conv in one step: paddle2onnx 2.1
    writes a conv's bias as an Add after a bias-free Conv, and a LearnableAffineBlock as a
    scalar Mul then Add after it. ORT folds the bias Add on its own, so folding it alone
    gains nothing, and the affine left between the conv and its HardSwish keeps ORT from
    fusing the three into one kernel."""
    inputs = ("x", "w", "b", "c", "s", "t") if bias else ("x", "w", "c", "s", "t")

    def lhs(a, v, p):  # noqa: ANN001, ANN202
        biased = a("Add", a("Conv", *_conv_b(v, bias), **conv_params(p)), v["c"])
        return a("Add", a("Mul", biased, v["s"]), v["t"])

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        shift = reshape_1d(a, v["c"])
        old_bias = a("Add", v["b"], shift) if bias else shift
        new_bias = a("Add", a("Mul", old_bias, reshape_1d(a, v["s"])), reshape_1d(a, v["t"]))
        return a("Conv", v["x"], a("Mul", v["w"], reshape_4d(a, v["s"])), new_bias, **conv_params(p))

    channel = CHANNEL_CONFIGS if bias else NOBIAS_CONFIGS
    per_channel = channel[0].shapes["c"]
    configs = (*(cfg({**c.shapes, "s": (), "t": ()}, **c.params) for c in channel),
               cfg({**channel[0].shapes, "s": per_channel, "t": ()}, **channel[0].params),
               cfg({**channel[1].shapes, "s": (), "t": channel[1].shapes["c"]}, **channel[1].params))
    if bias:
        configs += tuple(cfg({**c.shapes, "s": (), "t": ()}, **c.params) for c in SCALAR_CONFIGS[:1])
    return Axiom(f"fold_add_mul_add_conv{'_bias' if bias else ''}",
                 f"(conv(x, w{', b' if bias else ''}) + c) * s + t folded into the conv", inputs, lhs, rhs,
                 configs, exactness=Exactness.REASSOCIATES)


def _affine_input(bias: bool) -> Axiom:
    """``conv(x * s + t, w[, b])`` for scalars s, t, unpadded: both folded in one step (the
    scale alone or the shift alone gains little where ORT runs the other as a separate pass)."""
    inputs = ("x", "w", "b", "s", "t") if bias else ("x", "w", "s", "t")

    def lhs(a, v, p):  # noqa: ANN001, ANN202
        affine = a("Add", a("Mul", v["x"], v["s"]), v["t"])
        return a("Conv", affine, *_conv_b(v, bias)[1:], **conv_params(p))

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        shift = a("Mul", v["t"], a("FilterSum", v["w"]))
        return a("Conv", v["x"], a("Mul", v["w"], v["s"]), a("Add", v["b"], shift) if bias else shift,
                 **conv_params(p))

    configs = tuple(cfg({**c.shapes, "t": ()}, **c.params) for c in INPUT_SHIFT_CONFIGS)
    if not bias:
        configs = drop_bias(configs)
    return Axiom(f"conv_affine_input{'' if bias else '_nobias'}",
                 f"conv(x * s + t, w{', b' if bias else ''}) = conv(x, w * s, {'b + ' if bias else ''}t * filtersum(w))"
                 "  (s, t scalars, no padding)", inputs, lhs, rhs, configs, exactness=Exactness.REASSOCIATES)


CONVERTER_FORMS = (
    *(_fold(op, bias) for op in ("Mul", "Add", "Div") for bias in (False, True)),
    *(replace(a, name=n) for a, n in zip(CONVERTER_AXIOMS[2:4], ("fold_bn_conv_bias", "fold_bn_conv"),
                                          strict=True)),
    *(a for a in CONVERTER_AXIOMS if a.name.startswith(("conv_scale_input", "conv_shift_input"))),
    *(_affine_input(bias) for bias in (True, False)),
    *(_fold_affine(bias) for bias in (True, False)),
    *(_fold_shift_affine(bias) for bias in (True, False)),
    Axiom("hard_swish_mul_div6", "x * (clip(x + 3, 0, 6) / 6) = hardswish(x)", ("x",),
          lambda a, v, p: a("Mul", v["x"], _hard_sigmoid6(a, v["x"])),
          lambda a, v, p: a("HardSwish", v["x"]), UNARY),
    Axiom("hard_swish_div6_mul", "(clip(x + 3, 0, 6) / 6) * x = hardswish(x)", ("x",),
          lambda a, v, p: a("Mul", _hard_sigmoid6(a, v["x"]), v["x"]),
          lambda a, v, p: a("HardSwish", v["x"]), UNARY),
    # a layer scale after a dense layer (timm EdgeNeXt's gamma, LayerScale): ORT runs the Mul
    # as a pass of its own over the block's activations; folded, 1.02x on EdgeNeXt-XXS (AVX-512)
    Axiom("fold_mul_matmul_bias", "(x @ w + b) * g = x @ (w * g) + b * g  (g scales w's columns)",
          ("x", "w", "b", "g"),
          lambda a, v, p: a("Mul", a("Add", a("MatMul", v["x"], v["w"]), v["b"]), v["g"]),
          lambda a, v, p: a("Add", a("MatMul", v["x"], a("Mul", v["w"], v["g"])), a("Mul", v["b"], v["g"])),
          tuple(cfg({**c.shapes, "b": (c.shapes["w"][1],)}) for c in COLUMN_CONFIGS),
          exactness=Exactness.REASSOCIATES),
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
    **{f"fold_{op}_conv{suffix}": FOLD_OR_SCALAR for op in ("mul", "div", "add")
       for suffix in ("", "_bias") if _takes_scalar(op.capitalize(), suffix == "_bias")},
    **{f.name: INPUT_SCALAR for f in CONVERTER_FORMS if f.name.startswith(("conv_scale_input", "conv_shift_input"))},
    **{f"conv_affine_input{suffix}": (*INPUT_SCALAR, "is_const('t')", "shape('t') == ()")
       for suffix in ("", "_nobias")},
    "fold_mul_add_conv_bias": (*FOLD_OR_SCALAR, "is_const('d')", _per_channel("d", scalar=True)),
    "fold_mul_add_conv": (*FOLD, "is_const('d')", _per_channel("d")),
    "fold_add_mul_add_conv_bias": (*FOLD_OR_SCALAR, *SCALE_SHIFT),
    "fold_add_mul_add_conv": (*FOLD, *SCALE_SHIFT),
    "fold_bn_conv_bias": ("rank('x') == 4",),
    "fold_bn_conv": ("rank('x') == 4",),
    "matmul_add_to_gemm": GEMM,
    "matmul_transposed_add_to_gemm": GEMM,
    "fold_mul_matmul_bias": (*COLUMNS, "is_const('b')", "shape('b') == (shape('w')[1],)"),
}
