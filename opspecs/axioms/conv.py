"""Axioms of Conv: linearity in input and weight, scalar movement, merging convs that share
an input or whose inputs concatenate (grouped), identity and enlarged kernels, regrouping,
un-merging a conv whose channels are split, and folding per-channel Mul/Add and zero Pad
into the weight, bias and pads."""

from __future__ import annotations

from collections.abc import Mapping

from taso.opspecs._types import Exactness, Params, Shape
from taso.opspecs.axioms._core import Axiom, cfg
from taso.opspecs.axioms.converter import SCALAR_CONFIGS, per_channel

CONV_KEYS = ("strides", "pads", "dilations", "group")


def conv(p: Params, **override: object) -> dict[str, object]:
    """The Conv parameters an axiom config carries, with overrides."""
    out = {k: p[k] for k in CONV_KEYS if k in p}
    out.update(override)
    return out


def _two(xs: Shape, ws: Shape, **params: object) -> tuple:
    """Three configs with x, y (same shape) and w, w2 (same shape)."""
    return (cfg({"x": xs, "y": xs, "w": ws, "w2": ws}, **params),)


LINEAR_CONFIGS = (
    *_two((1, 2, 3, 3), (2, 2, 1, 1)),
    *_two((1, 2, 4, 4), (3, 2, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
    *_two((1, 4, 4, 4), (4, 2, 2, 2), group=2, dilations=(2, 2), pads=(1, 0, 1, 0)),
)
SMUL_CONFIGS = tuple(cfg({**c.shapes, "s": ()}, **c.params) for c in LINEAR_CONFIGS)


def _same_pads(k: int) -> tuple[int, int, int, int]:
    return (k // 2,) * 4


def _enlarge_pads(s: Mapping[str, Shape], p: Params) -> tuple[int, ...]:
    kh, kw = p["kernel_shape"]  # type: ignore[misc]
    mh, mw = (kh - int(s["w"][2])) // 2, (kw - int(s["w"][3])) // 2
    t, left, b, r = p.get("pads", (0, 0, 0, 0))  # type: ignore[misc]
    return (t + mh, left + mw, b + mh, r + mw)


def _channel(a, c, rank: int):  # noqa: ANN001, ANN202
    """Per-channel constant (1, M, 1, 1) or (M, 1, 1) reshaped to broadcast over the weight."""
    return a("Reshape", c, shape=(-1,) + (1,) * (rank - 1))


def merge_parallel_params(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    """The smaller conv's pads (the larger's less the margins that centre its kernel in the
    larger one) and the larger kernel's size, for `conv_bias_merge_parallel`."""
    mh, mw = (int(s["w"][2]) - int(s["w2"][2])) // 2, (int(s["w"][3]) - int(s["w2"][3])) // 2
    t, left, b, r = p.get("pads", (0, 0, 0, 0))  # type: ignore[misc]
    return {"kernel_shape": (int(s["w"][2]), int(s["w"][3])), "small_pads": (t - mh, left - mw, b - mh, r - mw)}


def _centred_in(s: Mapping[str, Shape], p: Params) -> bool:
    """w2's kernel fits centred in w's (same filters and input channels, odd margins excluded),
    the smaller conv's pads stay non-negative, dilation 1."""
    if tuple(s["w"][:2]) != tuple(s["w2"][:2]) or p.get("dilations", (1, 1)) != (1, 1):
        return False
    margins = (int(s["w"][2]) - int(s["w2"][2]), int(s["w"][3]) - int(s["w2"][3]))
    if any(m < 0 or m % 2 for m in margins):
        return False
    return all(q >= 0 for q in merge_parallel_params(s, p)["small_pads"])  # type: ignore[union-attr]


MERGE_PARALLEL_CONFIGS = (
    cfg({"x": (1, 2, 5, 5), "w": (3, 2, 3, 3), "b": (3,), "w2": (3, 2, 1, 1), "b2": (3,)}, pads=(1, 1, 1, 1)),
    cfg({"x": (1, 2, 6, 6), "w": (4, 2, 3, 3), "b": (4,), "w2": (4, 2, 1, 1), "b2": (4,)},
        strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (1, 4, 5, 4), "w": (4, 2, 3, 1), "b": (4,), "w2": (4, 2, 1, 1), "b2": (4,)},
        group=2, pads=(1, 0, 1, 0)),
    cfg({"x": (1, 2, 6, 5), "w": (2, 2, 5, 5), "b": (2,), "w2": (2, 2, 3, 3), "b2": (2,)}, pads=(2, 2, 1, 2)),
)
"""A 1x1 into a 3x3 (RepVGG), strided, grouped with a 3x1 kernel, 3x3 into 5x5 with uneven pads."""


def identity_merge_params(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    """The identity kernel's channels, size and groups, for the identity merges."""
    return {"channels": int(s["w"][0]), "kernel_shape": (int(s["w"][2]), int(s["w"][3])),
            "identity_group": int(p.get("group", 1))}  # type: ignore[call-overload]


def _identity_fits(s: Mapping[str, Shape], p: Params) -> bool:
    """The conv maps C channels to C at stride 1, dilation 1, group 1 or depthwise (group C),
    and its odd kernel's pads are centred, so each output pixel's window is centred on the
    same input pixel, where the identity kernel reads x."""
    c, ci, kh, kw = (int(d) for d in s["w"])
    group = int(p.get("group", 1))  # type: ignore[call-overload]
    if not c == int(s["x"][1]) == ci * group or group not in (1, c) or kh % 2 == 0 or kw % 2 == 0:
        return False
    if tuple(p.get("strides", (1, 1))) != (1, 1) or tuple(p.get("dilations", (1, 1))) != (1, 1):  # type: ignore[arg-type]
        return False
    return tuple(p.get("pads", (0, 0, 0, 0))) == (kh // 2, kw // 2, kh // 2, kw // 2)  # type: ignore[arg-type]


def _bn_scale(a, v, p):  # noqa: ANN001, ANN202 - algebra values are untyped
    """k = g / sqrt(var + eps)."""
    return a("Div", v["g"], a("Sqrt", a("Add", v["var"], a("ConstFill", shape=(), value=p["epsilon"]))))


def _identity_merged(op: str):  # noqa: ANN202
    """conv(x, w op iconv(C, k, g) * k4, b op (beta - mean * k)), op Add or Sub."""
    def rhs(a, v, p):  # noqa: ANN001, ANN202
        k = _bn_scale(a, v, p)
        identity = a("ConstIdentityConv", channels=p["channels"], kernel_shape=p["kernel_shape"],
                     group=p["identity_group"])
        weight = a(op, v["w"], a("Mul", identity, a("Reshape", k, shape=(-1, 1, 1, 1))))
        bias = a(op, v["b"], a("Sub", v["beta"], a("Mul", v["mean"], k)))
        return a("Conv", v["x"], weight, bias, **conv(p))
    return rhs


def _identity_merge(op: str) -> Axiom:
    """`conv(x, w, b) op bn(x)` as one conv, for op Add (RepVGG's and MobileOne's identity
    branch, RepGhost's fusion batch norm) or Sub (FastViT's RepMixer, ``mixer(x) - norm(x)``)."""
    sign = "+" if op == "Add" else "-"
    return Axiom(
        "conv_bias_bn_identity_merge" if op == "Add" else "conv_bias_bn_identity_sub",
        f"conv(x, w, b; pads) {sign} bn(x; g, beta, mean, var) = conv(x, w {sign} iconv(C, k, g) * s,"
        f" b {sign} (beta - mean * s); pads), s = g / sqrt(var + eps)  (C to C channels, group g 1 or C, stride 1,"
        " odd kernel k, centred pads)",
        ("x", "w", "b", *_BN_STATS),
        lambda a, v, p: a(op, a("Conv", v["x"], v["w"], v["b"], **conv(p)),
                          a("BatchNormalization", v["x"], *(v[n] for n in _BN_STATS), epsilon=p["epsilon"])),
        _identity_merged(op),
        IDENTITY_MERGE_CONFIGS, condition=_identity_fits, derive=identity_merge_params, positive=frozenset({"var"}),
        exactness=Exactness.REASSOCIATES)


_BN_STATS = ("g", "beta", "mean", "var")
IDENTITY_MERGE_CONFIGS = (
    cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "b": (2,), **dict.fromkeys(_BN_STATS, (2,))},
        pads=(1, 1, 1, 1), epsilon=1e-5),
    cfg({"x": (1, 3, 3, 3), "w": (3, 3, 1, 1), "b": (3,), **dict.fromkeys(_BN_STATS, (3,))}, epsilon=1e-3),
    cfg({"x": (2, 2, 4, 3), "w": (2, 2, 3, 1), "b": (2,), **dict.fromkeys(_BN_STATS, (2,))},
        pads=(1, 0, 1, 0), epsilon=0.0),
    cfg({"x": (1, 3, 4, 4), "w": (3, 1, 3, 3), "b": (3,), **dict.fromkeys(_BN_STATS, (3,))},
        pads=(1, 1, 1, 1), group=3, epsilon=1e-5),
    cfg({"x": (2, 4, 3, 3), "w": (4, 1, 1, 1), "b": (4,), **dict.fromkeys(_BN_STATS, (4,))}, group=4, epsilon=1e-3),
)
"""A 3x3 (RepVGG), a 1x1, a 3x1 with a batch of two, and depthwise a 3x3 (MobileOne, FastViT,
RepGhost) and a 1x1 (MobileOne's scale branch) with a batch of two; epsilon 1e-5, 1e-3 and 0."""

MERGE_IDENTITY_CONFIGS = (
    cfg({"x": (1, 3, 4, 4), "w": (3, 1, 3, 3), "b": (3,), "w2": (3, 1, 1, 1), "b2": (3,)}, pads=(1, 1, 1, 1), group=3),
    cfg({"x": (1, 2, 5, 4), "w": (2, 2, 3, 3), "b": (2,), "w2": (2, 2, 1, 1), "b2": (2,)}, pads=(1, 1, 1, 1)),
    cfg({"x": (2, 4, 5, 5), "w": (4, 1, 5, 3), "b": (4,), "w2": (4, 1, 3, 1), "b2": (4,)}, pads=(2, 1, 2, 1), group=4),
)
"""Two convs of x and x itself summed (RepViT's RepVggDw, ``bn(conv(x) + conv1(x) + x)``, whose
batch norm then folds into the one conv): depthwise 3x3 and 1x1, full, depthwise 5x3 and 3x1."""


CHANNEL_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "w": (3, 2, 1, 1), "b": (3,), "c": (1, 3, 1, 1)}),
    cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "b": (2,), "c": (2, 1, 1)},
        strides=(2, 2), pads=(1, 1, 1, 1)),
    cfg({"x": (2, 4, 3, 3), "w": (4, 1, 3, 3), "b": (4,), "c": (1, 4, 1, 1)},
        group=4, pads=(1, 1, 1, 1)),
)

REGROUP_CONFIGS = (
    cfg({"x": (1, 4, 4, 4), "w": (4, 1, 3, 3)}, group=4, factor=2, pads=(1, 1, 1, 1)),
    cfg({"x": (2, 8, 5, 5), "w": (4, 2, 3, 3)}, group=4, factor=4, strides=(2, 2), pads=(1, 0, 1, 0)),
    cfg({"x": (1, 6, 5, 5), "w": (12, 1, 2, 2)}, group=6, factor=3, dilations=(2, 2)),
    cfg({"x": (1, 4, 3, 3), "w": (8, 2, 1, 1)}, group=2, factor=2),
)
"""Grouped convs regrouped: depthwise, several output channels per group, strides, dilations."""

SPLIT_ACTIVATIONS = ("none", "relu", "silu")
"""What may sit between a Conv and the Split of its channels (SiLU as exporters write it)."""


def activation(a, y, kind: str):  # noqa: ANN001, ANN201
    """`y` through the activation `kind` (one of `SPLIT_ACTIVATIONS`)."""
    if kind == "relu":
        return a("Relu", y)
    if kind == "silu":
        return a("Mul", y, a("Sigmoid", y))
    return y


def _split_output(bias: bool) -> Axiom:
    """split(act(conv(x, w[, b])), 1, s) = act(conv(x, w_i[, b_i])) for w_i, b_i = split(w, b; 0, s)."""
    inputs = ("x", "w", "b") if bias else ("x", "w")

    def lhs(a, v, p):  # noqa: ANN001, ANN202
        y = a("Conv", *(v[n] for n in inputs), **conv(p))
        return a("Split", activation(a, y, p["act"]), axis=1, split=p["split"])

    def rhs(a, v, p):  # noqa: ANN001, ANN202
        parts = [a("Split", v[n], axis=0, split=p["split"]) for n in inputs[1:]]
        return tuple(activation(a, a("Conv", v["x"], *(t[i] for t in parts), **conv(p)), p["act"])
                     for i in range(len(p["split"])))

    shapes = ({"x": (1, 2, 4, 4), "w": (4, 2, 3, 3), "b": (4,)}, {"x": (1, 3, 5, 5), "w": (6, 3, 1, 1), "b": (6,)},
              {"x": (2, 2, 5, 5), "w": (5, 2, 2, 2), "b": (5,)})
    extra = ({"split": (1, 3), "pads": (1, 1, 1, 1), "act": "none"}, {"split": (3, 3), "strides": (2, 2), "act": "silu"},
             {"split": (2, 3), "dilations": (2, 2), "act": "relu"})
    configs = tuple(cfg({k: v for k, v in sh.items() if k in inputs}, **ex) for sh, ex in zip(shapes, extra, strict=True))
    name = "conv_bias_split_output" if bias else "conv_split_output"
    b = ", b" if bias else ""
    return Axiom(name, f"split(act(conv(x, w{b})), 1, s) = act(conv(x, split(w, 0, s)[i]{b and ', split(b, 0, s)[i]'}))"
                 "  (group 1)", inputs, lhs, rhs, configs, condition=lambda s, p: p.get("group", 1) == 1)


def _affine_fits(s: Mapping[str, Shape], p: Params) -> bool:
    """x is 4-d, and the scale (and the shift) one value or one per channel of x."""
    if len(s["x"]) != 4:
        return False
    c = int(s["x"][1])
    return all(tuple(s[n]) in ((), (1, c, 1, 1), (c, 1, 1)) for n in ("s", "t") if n in s)


def _depthwise(a, v, p, *, shift: bool):  # noqa: ANN001, ANN202 - algebra values are untyped
    """conv(x, ones(C, 1, 1, 1) * s4[, ones(C) * t1]; group C): a 1x1 depthwise conv."""
    c = int(p["channels"])  # type: ignore[call-overload]
    weight = a("Mul", a("ConstOnes", shape=(c, 1, 1, 1)), a("Reshape", v["s"], shape=(-1, 1, 1, 1)))
    bias = (a("Mul", a("ConstOnes", shape=(c,)), a("Reshape", v["t"], shape=(-1,))),) if shift else ()
    return a("Conv", v["x"], weight, *bias, group=c)


def affine_channels(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    """The depthwise conv's channels (and groups): x's second dim."""
    return {"channels": int(s["x"][1])}


AFFINE_CONFIGS = (
    cfg({"x": (1, 2, 3, 3), "s": (), "t": ()}),
    cfg({"x": (1, 3, 2, 4), "s": (1, 3, 1, 1), "t": (1, 3, 1, 1)}),
    cfg({"x": (2, 4, 3, 2), "s": (4, 1, 1), "t": ()}),
)
"""A scalar pair (PP-OCR's LearnableAffineBlock), per-channel ones, one of each."""


AXIOMS = (
    Axiom("conv_linear_input", "conv(x + y, w) = conv(x, w) + conv(y, w)", ("x", "y", "w"),
          lambda a, v, p: a("Conv", a("Add", v["x"], v["y"]), v["w"], **conv(p)),
          lambda a, v, p: a("Add", a("Conv", v["x"], v["w"], **conv(p)),
                            a("Conv", v["y"], v["w"], **conv(p))),
          LINEAR_CONFIGS, exactness=Exactness.REASSOCIATES),
    Axiom("conv_linear_weight", "conv(x, w + w2) = conv(x, w) + conv(x, w2)", ("x", "w", "w2"),
          lambda a, v, p: a("Conv", v["x"], a("Add", v["w"], v["w2"]), **conv(p)),
          lambda a, v, p: a("Add", a("Conv", v["x"], v["w"], **conv(p)),
                            a("Conv", v["x"], v["w2"], **conv(p))),
          LINEAR_CONFIGS, condition=lambda s, p: tuple(s["w"]) == tuple(s["w2"]),
          exactness=Exactness.REASSOCIATES),
    Axiom("conv_smul_input", "conv(smul(x, s), w) = conv(x, smul(w, s))", ("x", "w", "s"),
          lambda a, v, p: a("Conv", a("ScalarMul", v["x"], v["s"]), v["w"], **conv(p)),
          lambda a, v, p: a("Conv", v["x"], a("ScalarMul", v["w"], v["s"]), **conv(p)),
          SMUL_CONFIGS, exactness=Exactness.REASSOCIATES),
    Axiom("conv_smul_output", "smul(conv(x, w), s) = conv(x, smul(w, s))", ("x", "w", "s"),
          lambda a, v, p: a("ScalarMul", a("Conv", v["x"], v["w"], **conv(p)), v["s"]),
          lambda a, v, p: a("Conv", v["x"], a("ScalarMul", v["w"], v["s"]), **conv(p)),
          SMUL_CONFIGS, exactness=Exactness.REASSOCIATES),
    Axiom("conv_merge_shared_input",
          "concat(conv(x, w), conv(x, w2), axis=1) = conv(x, concat(w, w2, axis=0))  (group 1)",
          ("x", "w", "w2"),
          lambda a, v, p: a("Concat", a("Conv", v["x"], v["w"], **conv(p)),
                            a("Conv", v["x"], v["w2"], **conv(p)), axis=1),
          lambda a, v, p: a("Conv", v["x"], a("Concat", v["w"], v["w2"], axis=0), **conv(p)),
          (cfg({"x": (1, 2, 3, 3), "w": (1, 2, 1, 1), "w2": (2, 2, 1, 1)}),
           cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "w2": (1, 2, 3, 3)},
               strides=(2, 2), pads=(1, 1, 1, 1)),
           cfg({"x": (2, 1, 4, 4), "w": (1, 1, 2, 2), "w2": (1, 1, 2, 2)}, dilations=(2, 2))),
          condition=lambda s, p: p.get("group", 1) == 1),
    Axiom("conv_merge_grouped",
          "concat(conv(x, w; g), conv(y, w2; g), 1) = conv(concat(x, y, 1), concat(w, w2, 0); 2g)",
          ("x", "y", "w", "w2"),
          lambda a, v, p: a("Concat", a("Conv", v["x"], v["w"], **conv(p)),
                            a("Conv", v["y"], v["w2"], **conv(p)), axis=1),
          lambda a, v, p: a("Conv", a("Concat", v["x"], v["y"], axis=1),
                            a("Concat", v["w"], v["w2"], axis=0),
                            **conv(p, group=2 * int(p.get("group", 1)))),  # type: ignore[call-overload]
          LINEAR_CONFIGS,
          condition=lambda s, p: s["x"] == s["y"] and s["w"] == s["w2"]),
    Axiom("conv_add_inputs",
          "conv(x, w) + conv(y, w2) = conv(concat(x, y, 1), concat(w, w2, 1))  (group 1)",
          ("x", "y", "w", "w2"),
          lambda a, v, p: a("Add", a("Conv", v["x"], v["w"], **conv(p)),
                            a("Conv", v["y"], v["w2"], **conv(p))),
          lambda a, v, p: a("Conv", a("Concat", v["x"], v["y"], axis=1),
                            a("Concat", v["w"], v["w2"], axis=1), **conv(p)),
          LINEAR_CONFIGS[:2] + (cfg({"x": (1, 1, 3, 3), "y": (1, 2, 3, 3), "w": (2, 1, 3, 3),
                                     "w2": (2, 2, 3, 3)}, pads=(1, 1, 1, 1)),),
          condition=lambda s, p: p.get("group", 1) == 1, exactness=Exactness.REASSOCIATES),
    Axiom("conv_identity_kernel", "conv(x, iconv(C, k, g); stride 1, SAME pads) = x", ("x",),
          lambda a, v, p: a("Conv", v["x"], a("ConstIdentityConv", channels=p["c"],
                                              kernel_shape=(p["k"], p["k"]), group=p["group"]),
                            pads=_same_pads(int(p["k"])), group=p["group"]),  # type: ignore[call-overload]
          lambda a, v, p: v["x"],
          (cfg({"x": (1, 2, 3, 3)}, c=2, k=1, group=1), cfg({"x": (1, 2, 3, 3)}, c=2, k=3, group=1),
           cfg({"x": (2, 4, 3, 3)}, c=4, k=3, group=4), cfg({"x": (1, 4, 3, 3)}, c=4, k=3, group=2)),
          condition=lambda s, p: s["x"][1] == p["c"] and int(p["k"]) % 2 == 1),  # type: ignore[call-overload]
    Axiom("conv_enlarge_kernel",
          "conv(x, w; s, pads) = conv(x, enlarge(w, K); s, pads + (K - k)/2)  (dilation 1)",
          ("x", "w"),
          lambda a, v, p: a("Conv", v["x"], v["w"], **conv(p)),
          lambda a, v, p: a("Conv", v["x"], a("Enlarge", v["w"], kernel_shape=p["kernel_shape"]),
                            **conv(p, pads=p["enlarged_pads"])),
          (cfg({"x": (1, 2, 3, 3), "w": (2, 2, 1, 1)}, kernel_shape=(3, 3)),
           cfg({"x": (1, 2, 5, 5), "w": (2, 2, 1, 3)}, kernel_shape=(3, 5), strides=(2, 2)),
           cfg({"x": (1, 2, 4, 4), "w": (2, 1, 1, 1)}, kernel_shape=(3, 3), group=2,
               pads=(1, 0, 1, 0))),
          condition=lambda s, p: p.get("dilations", (1, 1)) == (1, 1),
          derive=lambda s, p: {"enlarged_pads": _enlarge_pads(s, p)}),
    Axiom("conv_bias_merge_parallel",
          "conv(x, w, b; pads) + conv(x, w2, b2; pads - m) = conv(x, w + enlarge(w2, k), b + b2; pads)"
          "  (w2's kernel centred in w's k, margins m; same strides and groups; dilation 1)",
          ("x", "w", "b", "w2", "b2"),
          lambda a, v, p: a("Add", a("Conv", v["x"], v["w"], v["b"], **conv(p)),
                            a("Conv", v["x"], v["w2"], v["b2"], **conv(p, pads=p["small_pads"]))),
          lambda a, v, p: a("Conv", v["x"], a("Add", v["w"], a("Enlarge", v["w2"], kernel_shape=p["kernel_shape"])),
                            a("Add", v["b"], v["b2"]), **conv(p)),
          MERGE_PARALLEL_CONFIGS, condition=_centred_in, derive=merge_parallel_params,
          exactness=Exactness.REASSOCIATES),
    _identity_merge("Add"),
    _identity_merge("Sub"),
    Axiom("conv_bias_merge_parallel_identity",
          "conv(x, w, b; pads) + conv(x, w2, b2; pads - m) + x = conv(x, w + enlarge(w2, k) + iconv(C, k, g),"
          " b + b2; pads)  (w2 centred in w; C to C channels, group g 1 or C, stride 1, odd kernel k, centred pads)",
          ("x", "w", "b", "w2", "b2"),
          lambda a, v, p: a("Add", a("Add", a("Conv", v["x"], v["w"], v["b"], **conv(p)),
                                     a("Conv", v["x"], v["w2"], v["b2"], **conv(p, pads=p["small_pads"]))), v["x"]),
          lambda a, v, p: a("Conv", v["x"],
                            a("Add", a("Add", v["w"], a("Enlarge", v["w2"], kernel_shape=p["kernel_shape"])),
                              a("ConstIdentityConv", channels=p["channels"], kernel_shape=p["kernel_shape"],
                                group=p["identity_group"])),
                            a("Add", v["b"], v["b2"]), **conv(p)),
          MERGE_IDENTITY_CONFIGS, condition=lambda s, p: _centred_in(s, p) and _identity_fits(s, p),
          derive=lambda s, p: {**merge_parallel_params(s, p), **identity_merge_params(s, p)},
          exactness=Exactness.REASSOCIATES),
    Axiom("conv_regroup", "conv(x, w; g) = conv(x, regroup(w; g, k); g/k)  (k divides g)",
          ("x", "w"),
          lambda a, v, p: a("Conv", v["x"], v["w"], **conv(p)),
          lambda a, v, p: a("Conv", v["x"], a("Regroup", v["w"], group=p["group"], factor=p["factor"]),
                            **conv(p, group=int(p["group"]) // int(p["factor"]))),  # type: ignore[call-overload]
          REGROUP_CONFIGS,
          condition=lambda s, p: int(p["group"]) % int(p["factor"]) == 0),  # type: ignore[call-overload]
    Axiom("conv_regroup_bias", "conv(x, w, b; g) = conv(x, regroup(w; g, k), b; g/k)  (k divides g)",
          ("x", "w", "b"),
          lambda a, v, p: a("Conv", v["x"], v["w"], v["b"], **conv(p)),
          lambda a, v, p: a("Conv", v["x"], a("Regroup", v["w"], group=p["group"], factor=p["factor"]), v["b"],
                            **conv(p, group=int(p["group"]) // int(p["factor"]))),  # type: ignore[call-overload]
          tuple(cfg({**c.shapes, "b": (c.shapes["w"][0],)}, **c.params) for c in REGROUP_CONFIGS),
          condition=lambda s, p: int(p["group"]) % int(p["factor"]) == 0),  # type: ignore[call-overload]
    _split_output(bias=False),
    _split_output(bias=True),
    Axiom("conv_bias_add", "conv(x, w) + c = conv(x, w, reshape(c, (M,)))  (c per channel)",
          ("x", "w", "c"),
          lambda a, v, p: a("Add", a("Conv", v["x"], v["w"], **conv(p)), v["c"]),
          lambda a, v, p: a("Conv", v["x"], v["w"], a("Reshape", v["c"], shape=(-1,)), **conv(p)),
          CHANNEL_CONFIGS, condition=lambda s, p: per_channel(s)),
    Axiom("conv_bias_add_again", "conv(x, w, b) + c = conv(x, w, b + reshape(c, (M,)))",
          ("x", "w", "b", "c"),
          lambda a, v, p: a("Add", a("Conv", v["x"], v["w"], v["b"], **conv(p)), v["c"]),
          lambda a, v, p: a("Conv", v["x"], v["w"], a("Add", v["b"], a("Reshape", v["c"], shape=(-1,))),
                            **conv(p)),
          CHANNEL_CONFIGS + SCALAR_CONFIGS, condition=lambda s, p: per_channel(s, scalar=True),
          exactness=Exactness.REASSOCIATES),
    Axiom("conv_mul_channel",
          "conv(x, w, b) * c = conv(x, w * reshape(c, (M,1,1,1)), b * reshape(c, (M,)))",
          ("x", "w", "b", "c"),
          lambda a, v, p: a("Mul", a("Conv", v["x"], v["w"], v["b"], **conv(p)), v["c"]),
          lambda a, v, p: a("Conv", v["x"], a("Mul", v["w"], _channel(a, v["c"], 4)),
                            a("Mul", v["b"], a("Reshape", v["c"], shape=(-1,))), **conv(p)),
          CHANNEL_CONFIGS + SCALAR_CONFIGS, condition=lambda s, p: per_channel(s, scalar=True),
          exactness=Exactness.REASSOCIATES),
    Axiom("conv_pad_into_pads",
          "conv(pad(x, zero spatial pads q), w; pads 0) = conv(x, w; pads q)",
          ("x", "w"),
          lambda a, v, p: a("Conv", a("Pad", v["x"], pads=(0, 0, p["q"][0], p["q"][1],
                                                          0, 0, p["q"][2], p["q"][3])),
                            v["w"], **conv(p)),
          lambda a, v, p: a("Conv", v["x"], v["w"], **conv(p, pads=p["q"])),
          (cfg({"x": (1, 2, 3, 3), "w": (2, 2, 3, 3)}, q=(1, 1, 1, 1)),
           cfg({"x": (1, 2, 4, 4), "w": (2, 2, 3, 3)}, q=(0, 1, 2, 1), strides=(2, 2)),
           cfg({"x": (1, 2, 3, 3), "w": (2, 1, 2, 2)}, q=(1, 0, 0, 1), group=2)),
          condition=lambda s, p: "pads" not in p),
    Axiom("affine_as_depthwise_conv",
          "x * s + t = conv(x, ones(C, 1, 1, 1) * s, ones(C) * t; group C)  (x has C channels; s, t one value or"
          " one per channel)",
          ("x", "s", "t"),
          lambda a, v, p: a("Add", a("Mul", v["x"], v["s"]), v["t"]),
          lambda a, v, p: _depthwise(a, v, p, shift=True),
          AFFINE_CONFIGS, condition=_affine_fits, derive=affine_channels, exactness=Exactness.REASSOCIATES),
    Axiom("scale_as_depthwise_conv",
          "x * s = conv(x, ones(C, 1, 1, 1) * s; group C)  (x has C channels; s one value or one per channel)",
          ("x", "s"),
          lambda a, v, p: a("Mul", v["x"], v["s"]),
          lambda a, v, p: _depthwise(a, v, p, shift=False),
          tuple(cfg({k: sh for k, sh in c.shapes.items() if k != "t"}) for c in AFFINE_CONFIGS),
          condition=_affine_fits, derive=affine_channels, exactness=Exactness.REASSOCIATES),
)
