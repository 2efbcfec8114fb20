"""Axioms of the activations: Relu movement (through Concat, Transpose, MaxPool, into Conv;
a positive scalar scale through it; a positive scalar affine after it as a Clip with the
shift as its bound) and the decompositions converters emit (HardSigmoid, HardSwish, SiLU,
Gelu, Relu6)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from taso.opspecs._types import Exactness
from taso.opspecs.axioms._core import Axiom, cfg

SQRT2 = math.sqrt(2.0)
SIXTH = float(np.float32(1 / 6))
"""1/6 as a float32 model writes it (tf2onnx multiplies by it instead of dividing by 6)."""
UNARY = (cfg({"x": (2, 3)}), cfg({"x": (1, 3, 2, 2)}), cfg({"x": (5,)}))
SCALED = (cfg({"x": (2, 3), "s": ()}), cfg({"x": (1, 2, 1, 2), "s": ()}), cfg({"x": (5,), "s": ()}))
"""x with a scalar s (a learnable scale after an activation); few elements, as Z3 proves
products of two unknowns slowly."""
AFFINE = (cfg({"x": (2, 3), "s": (), "t": ()}), cfg({"x": (1, 2, 1, 2), "s": (), "t": ()}),
          cfg({"x": (5,), "s": (), "t": ()}))
"""x with a scalar scale s and shift t (PP-HGNetV2's learnable affine after each Relu)."""
AFFINE_CONV = (
    cfg({"x": (1, 2, 1, 2), "w": (2, 2, 1, 1), "s": (), "t": ()}),
    cfg({"x": (1, 1, 3, 3), "w": (1, 1, 2, 2), "s": (), "t": ()}, strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (1, 2, 1, 2), "w": (2, 1, 1, 2), "s": (), "t": ()}, group=2),
)
"""Plain, strided and padded, grouped; few elements, as Z3 proves products of unknowns slowly."""
AFFINE_CONV_BIAS = tuple(cfg({**c.shapes, "b": (c.shapes["w"][0],)}, **c.params) for c in AFFINE_CONV)
AFFINE_CONV_BN = tuple(cfg({**c.shapes, **{k: (c.shapes["w"][0],) for k in ("g", "beta", "mean", "var")}},
                           epsilon=eps, **c.params) for c, eps in zip(AFFINE_CONV, (1e-5, 1e-3, 0.0), strict=True))


def _scalar_affine(shapes, params) -> bool:  # noqa: ANN001 - an axiom condition
    """s and t are one value each (the canonical stage writes a (1,) constant as a scalar)."""
    return tuple(shapes["s"]) == () and tuple(shapes["t"]) == ()


def _affine_as_clip(a, y, v):  # noqa: ANN001, ANN202
    """relu(y) * s + t."""
    return a("Add", a("Mul", a("Relu", y), v["s"]), v["t"])


def _conv_bn(a, v, p):  # noqa: ANN001, ANN202
    """bn(conv(x, w); g, beta, mean, var)."""
    conv = a("Conv", v["x"], v["w"], **_conv_params(p))
    return a("BatchNormalization", conv, v["g"], v["beta"], v["mean"], v["var"], epsilon=p["epsilon"])


def _conv_bn_scaled(a, v, p):  # noqa: ANN001, ANN202
    """conv(x, w * k * s, (beta - mean * k) * s + t) with k = g / sqrt(var + eps): the BN
    folded into the conv, then the affine."""
    k = a("Div", v["g"], a("Sqrt", a("Add", v["var"], _fill(a, p["epsilon"]))))
    weight = a("Mul", v["w"], a("Reshape", a("Mul", k, v["s"]), shape=(-1, 1, 1, 1)))
    bias = a("Add", a("Mul", a("Sub", v["beta"], a("Mul", v["mean"], k)), v["s"]), v["t"])
    return a("Conv", v["x"], weight, bias, **_conv_params(p))


def _conv_scaled(a, v, p):  # noqa: ANN001, ANN202
    """conv(x, w * s, b * s + t)."""
    bias = a("Add", a("Mul", v["b"], v["s"]), v["t"])
    return a("Conv", v["x"], a("Mul", v["w"], v["s"]), bias, **_conv_params(p))


def _fill(a, value: float):  # noqa: ANN001, ANN202 - algebra values are untyped
    return a("ConstFill", shape=(), value=value)


def _conv_params(p: dict) -> dict:
    return {k: p[k] for k in ("strides", "pads", "group") if k in p}


AXIOMS = (
    Axiom("relu_concat", "relu(concat(x, y)) = concat(relu(x), relu(y))", ("x", "y"),
          lambda a, v, p: a("Relu", a("Concat", v["x"], v["y"], axis=p["axis"])),
          lambda a, v, p: a("Concat", a("Relu", v["x"]), a("Relu", v["y"]), axis=p["axis"]),
          (cfg({"x": (2, 3), "y": (1, 3)}, axis=0), cfg({"x": (2, 3), "y": (2, 1)}, axis=1),
           cfg({"x": (1, 2, 2, 2), "y": (1, 1, 2, 2)}, axis=1))),
    Axiom("relu_transpose", "relu(transpose(x, p)) = transpose(relu(x), p)", ("x",),
          lambda a, v, p: a("Relu", a("Transpose", v["x"], perm=p["perm"])),
          lambda a, v, p: a("Transpose", a("Relu", v["x"]), perm=p["perm"]),
          (cfg({"x": (2, 3)}, perm=(1, 0)), cfg({"x": (2, 3, 4)}, perm=(2, 0, 1)),
           cfg({"x": (1, 2, 3, 2)}, perm=(0, 2, 3, 1)))),
    Axiom("relu_into_conv", "relu(conv(x, w)) = conv(x, w; activation=relu)", ("x", "w"),
          lambda a, v, p: a("Relu", a("Conv", v["x"], v["w"], **_conv_params(p))),
          lambda a, v, p: a("Conv", v["x"], v["w"], activation="relu", **_conv_params(p)),
          (cfg({"x": (1, 2, 3, 3), "w": (2, 2, 1, 1)}),
           cfg({"x": (1, 2, 4, 4), "w": (3, 2, 3, 3)}, strides=(2, 2), pads=(1, 1, 1, 1)),
           cfg({"x": (1, 4, 3, 3), "w": (4, 2, 2, 2)}, group=2))),
    Axiom("relu_idempotent", "relu(relu(x)) = relu(x)", ("x",),
          lambda a, v, p: a("Relu", a("Relu", v["x"])),
          lambda a, v, p: a("Relu", v["x"]), UNARY),
    Axiom("relu6_as_clip", "clip(relu(x), -inf, 6) = clip(x, 0, 6)", ("x",),
          lambda a, v, p: a("Clip", a("Relu", v["x"]), max=6.0),
          lambda a, v, p: a("Clip", v["x"], min=0.0, max=6.0), UNARY),
    Axiom("relu_as_clip", "relu(x) = clip(x, 0, +inf)", ("x",),
          lambda a, v, p: a("Relu", v["x"]),
          lambda a, v, p: a("Clip", v["x"], min=0.0), UNARY),
    Axiom("hard_sigmoid_decompose", "hardsigmoid(x; a, b) = clip(x*a + b, 0, 1)", ("x",),
          lambda a, v, p: a("HardSigmoid", v["x"], alpha=p["alpha"], beta=p["beta"]),
          lambda a, v, p: a("Clip", a("Add", a("Mul", v["x"], _fill(a, p["alpha"])),
                                      _fill(a, p["beta"])), min=0.0, max=1.0),
          (cfg({"x": (2, 3)}, alpha=0.2, beta=0.5), cfg({"x": (1, 3, 2, 2)}, alpha=0.5, beta=0.5),
           cfg({"x": (6,)}, alpha=0.25, beta=0.25))),
    Axiom("hard_sigmoid_sixth", "hardsigmoid(x; fl(1/6), 1/2) = clip(x + 3, 0, 6) * fl(1/6)  (rounds 1/6)", ("x",),
          lambda a, v, p: a("HardSigmoid", v["x"], alpha=SIXTH, beta=0.5),
          lambda a, v, p: a("Mul", a("Clip", a("Add", v["x"], _fill(a, 3.0)), min=0.0, max=6.0), _fill(a, SIXTH)),
          UNARY, exactness=Exactness.ROUNDS_CONSTANTS, exact_constants={SIXTH: Fraction(1, 6)}),
    Axiom("hard_sigmoid_div6", "hardsigmoid(x; fl(1/6), 1/2) = clip(x + 3, 0, 6) / 6  (rounds 1/6)", ("x",),
          lambda a, v, p: a("HardSigmoid", v["x"], alpha=SIXTH, beta=0.5),
          lambda a, v, p: a("Div", a("Clip", a("Add", v["x"], _fill(a, 3.0)), min=0.0, max=6.0), _fill(a, 6.0)),
          UNARY, exactness=Exactness.ROUNDS_CONSTANTS, exact_constants={SIXTH: Fraction(1, 6)}),
    Axiom("hard_swish_decompose", "hardswish(x) = x * clip(x + 3, 0, 6) / 6", ("x",),
          lambda a, v, p: a("HardSwish", v["x"]),
          lambda a, v, p: a("Div", a("Mul", v["x"], a("Clip", a("Add", v["x"], _fill(a, 3.0)),
                                                    min=0.0, max=6.0)), _fill(a, 6.0)), UNARY),
    Axiom("hard_swish_mul_sixth", "hardswish(x) = x * (clip(x + 3, 0, 6) * fl(1/6))  (rounds 1/6)", ("x",),
          lambda a, v, p: a("HardSwish", v["x"]),
          lambda a, v, p: a("Mul", v["x"], a("Mul", a("Clip", a("Add", v["x"], _fill(a, 3.0)), min=0.0, max=6.0),
                                             _fill(a, SIXTH))),
          UNARY, exactness=Exactness.ROUNDS_CONSTANTS, exact_constants={SIXTH: Fraction(1, 6)}),
    Axiom("hard_swish_mul_first_sixth", "hardswish(x) = (x * clip(x + 3, 0, 6)) * fl(1/6)  (rounds 1/6)", ("x",),
          lambda a, v, p: a("HardSwish", v["x"]),
          lambda a, v, p: a("Mul", a("Mul", v["x"], a("Clip", a("Add", v["x"], _fill(a, 3.0)), min=0.0, max=6.0)),
                            _fill(a, SIXTH)),
          UNARY, exactness=Exactness.ROUNDS_CONSTANTS, exact_constants={SIXTH: Fraction(1, 6)}),
    Axiom("hard_swish_hardsigmoid", "hardswish(x) = x * hardsigmoid(x; fl(1/6), 1/2)  (rounds 1/6)", ("x",),
          lambda a, v, p: a("HardSwish", v["x"]),
          lambda a, v, p: a("Mul", v["x"], a("HardSigmoid", v["x"], alpha=SIXTH, beta=0.5)),
          UNARY, exactness=Exactness.ROUNDS_CONSTANTS, exact_constants={SIXTH: Fraction(1, 6)}),
    Axiom("hard_swish_via_relu6", "hardswish(x) = x * relu6(x + 3) / 6", ("x",),
          lambda a, v, p: a("HardSwish", v["x"]),
          lambda a, v, p: a("Div", a("Mul", v["x"], a("Clip", a("Relu", a("Add", v["x"], _fill(a, 3.0))),
                                                    max=6.0)), _fill(a, 6.0)), UNARY),
    Axiom("silu_decompose", "silu(x; alpha) = x * sigmoid(x * alpha)", ("x",),
          lambda a, v, p: a("SiLU", v["x"], alpha=p["alpha"]),
          lambda a, v, p: a("Mul", v["x"], a("Sigmoid", a("Mul", v["x"], _fill(a, p["alpha"])))),
          (cfg({"x": (2, 3)}, alpha=1.0), cfg({"x": (1, 3, 2, 2)}, alpha=1.0),
           cfg({"x": (4,)}, alpha=1.702))),
    Axiom("gelu_decompose", "gelu(x) = x * (erf(x / sqrt 2) + 1) * 0.5", ("x",),
          lambda a, v, p: a("Gelu", v["x"]),
          lambda a, v, p: a("Mul", a("Mul", v["x"], a("Add", a("Erf", a("Div", v["x"], _fill(a, SQRT2))),
                                                    _fill(a, 1.0))), _fill(a, 0.5)), UNARY),
    Axiom("relu_maxpool", "relu(maxpool(x)) = maxpool(relu(x))", ("x",),
          lambda a, v, p: a("Relu", a("MaxPool", v["x"], **p)),
          lambda a, v, p: a("MaxPool", a("Relu", v["x"]), **p),
          (cfg({"x": (1, 1, 3, 3)}, kernel_shape=(2, 2)),
           cfg({"x": (1, 2, 4, 4)}, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
           cfg({"x": (2, 1, 3, 3)}, kernel_shape=(3, 3), pads=(1, 1, 1, 1)))),
    Axiom("relu_scale_positive", "relu(x) * s = relu(x * s)  (s a positive scalar)", ("x", "s"),
          lambda a, v, p: a("Mul", a("Relu", v["x"]), v["s"]),
          lambda a, v, p: a("Relu", a("Mul", v["x"], v["s"])),
          SCALED, condition=lambda s, p: tuple(s["s"]) == (), positive=frozenset({"s"})),
    Axiom("relu_affine_as_clip", "relu(x) * s + t = clip(x * s + t; min t)  (s > 0, t scalars)",
          ("x", "s", "t"),
          lambda a, v, p: _affine_as_clip(a, v["x"], v),
          lambda a, v, p: a("Clip", a("Add", a("Mul", v["x"], v["s"]), v["t"]), min=v["t"]),
          AFFINE, condition=_scalar_affine, positive=frozenset({"s"})),
    Axiom("conv_relu_affine_as_clip",
          "relu(conv(x, w, b)) * s + t = clip(conv(x, w * s, b * s + t); min t)  (s > 0, t scalars)",
          ("x", "w", "b", "s", "t"),
          lambda a, v, p: _affine_as_clip(a, a("Conv", v["x"], v["w"], v["b"], **_conv_params(p)), v),
          lambda a, v, p: a("Clip", _conv_scaled(a, v, p), min=v["t"]),
          AFFINE_CONV_BIAS, condition=_scalar_affine, positive=frozenset({"s"}), exactness=Exactness.REASSOCIATES),
    Axiom("conv_bn_relu_affine_as_clip",
          "relu(bn(conv(x, w); g, beta, mean, var)) * s + t = clip(conv(x, w * k * s, (beta - mean * k) * s + t);"
          " min t), k = g / sqrt(var + eps)  (s > 0, t scalars)",
          ("x", "w", "g", "beta", "mean", "var", "s", "t"),
          lambda a, v, p: _affine_as_clip(a, _conv_bn(a, v, p), v),
          lambda a, v, p: a("Clip", _conv_bn_scaled(a, v, p), min=v["t"]),
          AFFINE_CONV_BN, condition=_scalar_affine, positive=frozenset({"s", "var"}),
          exactness=Exactness.REASSOCIATES),
)
