"""Lemmas of channel padding (`taso.pipeline._pad_channels`): why widening a channel class
leaves the real channels unchanged. Validated like every axiom (Z3 and numerically, on the
configs and on drawn shapes); not in the rule bank: the padding is one whole-graph rewrite,
not a rule the search matches.

Write a widened value as ``concat(x, p)`` over channels (axis 1): ``x`` the original's
channels, ``p`` the extra ones. Then:

* a group-1 conv with extra weight rows writes ``concat(conv(x, w, b), conv(x, v, d))``
  (`conv_rows_concat`);
* every op the padding carries a class through maps ``concat(x, p)`` to
  ``concat(op(x), op(p))``, per-channel operands split the same way (the `*_concat` lemmas);
* a group-1 conv reading ``concat(x, p)`` with zero weight columns for ``p`` computes
  ``conv(x, w, b)`` whatever ``p`` holds (`conv_zero_columns`), and so does one reading
  extra channels between real ones, ``concat(x, p, y)`` with zero columns for ``p``
  (`conv_zero_columns_inside`);
* a channel Concat of widened values is the concatenation of every part in order
  (`concat_flatten`): real and extra channels interleave, segment by segment.

So a widened value is ``concat(x1, p1, x2, p2, ...)``: the original's channels in
segments, in order, with extra channels after each (one segment unless a Concat made it).
By induction over the graph in topological order (the lemmas applied at each segment
boundary), every value of a widened class is the original value with extra channels
inserted; each conv that reads one computes the original conv's value; values outside
widened classes are the original's.
"""

from __future__ import annotations

from taso.opspecs.axioms._core import Axiom, cfg
from taso.opspecs.axioms.conv import conv

_X = {"x": (1, 2, 3, 3), "p": (1, 1, 3, 3)}
_X2 = {"x": (1, 3, 4, 4), "p": (1, 2, 4, 4)}
_X3 = {"x": (2, 1, 3, 2), "p": (2, 2, 3, 2)}
_SPLIT = (cfg(_X), cfg(_X2), cfg(_X3))


def concat_channels(a, *values):  # noqa: ANN001, ANN002, ANN202
    return a("Concat", *values, axis=1)


def _carried(op: str, **params: object) -> Axiom:
    """op(concat(x, p)) = concat(op(x), op(p)) for an op that maps each channel to itself."""
    return Axiom(f"{op.lower()}_concat", f"{op.lower()}(concat(x, p, 1)) = concat({op.lower()}(x), {op.lower()}(p), 1)",
                 ("x", "p"),
                 lambda a, v, p: a(op, concat_channels(a, v["x"], v["p"]), **params),
                 lambda a, v, p: concat_channels(a, a(op, v["x"], **params), a(op, v["p"], **params)),
                 _SPLIT)


def _binary(op: str) -> Axiom:
    """op(concat(x, p), concat(c, e)) = concat(op(x, c), op(p, e)): a per-channel operand
    (a constant extended by ``e``) split like the value."""
    configs = tuple(cfg({**c.shapes, "c": (1, c.shapes["x"][1], 1, 1), "e": (1, c.shapes["p"][1], 1, 1)})
                    for c in _SPLIT)
    name = op.lower()
    return Axiom(f"{name}_channel_concat", f"{name}(concat(x, p, 1), concat(c, e, 1)) = concat({name}(x, c), {name}(p, e), 1)",
                 ("x", "p", "c", "e"),
                 lambda a, v, p: a(op, concat_channels(a, v["x"], v["p"]), concat_channels(a, v["c"], v["e"])),
                 lambda a, v, p: concat_channels(a, a(op, v["x"], v["c"]), a(op, v["p"], v["e"])),
                 configs, positive=frozenset({"c", "e"}) if op == "Div" else frozenset())


def _scalar(op: str) -> Axiom:
    """op(concat(x, p), s) = concat(op(x, s), op(p, s)) for a scalar s, or an s of one
    channel broadcast over all (a spatial attention map)."""
    configs = (*(cfg({**c.shapes, "s": ()}) for c in _SPLIT),
               *(cfg({**c.shapes, "s": (c.shapes["x"][0], 1, *c.shapes["x"][2:])}) for c in _SPLIT))
    name = op.lower()
    return Axiom(f"{name}_scalar_concat", f"{name}(concat(x, p, 1), s) = concat({name}(x, s), {name}(p, s), 1)",
                 ("x", "p", "s"),
                 lambda a, v, p: a(op, concat_channels(a, v["x"], v["p"]), v["s"]),
                 lambda a, v, p: concat_channels(a, a(op, v["x"], v["s"]), a(op, v["p"], v["s"])),
                 configs, positive=frozenset({"s"}) if op == "Div" else frozenset())


_BN = ("g", "beta", "mean", "var")
_BN_CONFIGS = tuple(cfg({**c.shapes, **{f"{n}1": (c.shapes["x"][1],) for n in _BN},
                         **{f"{n}2": (c.shapes["p"][1],) for n in _BN}}) for c in _SPLIT)

_CONV_ROWS = (cfg({"x": (1, 2, 3, 3), "w": (2, 2, 1, 1), "b": (2,), "v": (1, 2, 1, 1), "d": (1,)}),
              cfg({"x": (1, 3, 4, 4), "w": (1, 3, 3, 3), "b": (1,), "v": (2, 3, 3, 3), "d": (2,)}, pads=(1, 1, 1, 1)),
              cfg({"x": (2, 1, 5, 5), "w": (2, 1, 3, 3), "b": (2,), "v": (2, 1, 3, 3), "d": (2,)}, strides=(2, 2)))
_CONV_COLUMNS = (cfg({"x": (1, 2, 3, 3), "p": (1, 1, 3, 3), "w": (2, 2, 1, 1), "b": (2,)}),
                 cfg({"x": (1, 3, 4, 4), "p": (1, 2, 4, 4), "w": (1, 3, 3, 3), "b": (1,)}, pads=(1, 1, 1, 1)),
                 cfg({"x": (2, 1, 5, 5), "p": (2, 3, 5, 5), "w": (2, 1, 3, 3), "b": (2,)}, strides=(2, 2)))
_DEPTHWISE = (cfg({"x": (1, 2, 3, 3), "p": (1, 1, 3, 3), "w": (2, 1, 3, 3), "b": (2,), "v": (1, 1, 3, 3),
                   "d": (1,)}, pads=(1, 1, 1, 1)),
              cfg({"x": (1, 3, 4, 4), "p": (1, 2, 4, 4), "w": (3, 1, 1, 1), "b": (3,), "v": (2, 1, 1, 1), "d": (2,)}),
              cfg({"x": (2, 1, 5, 5), "p": (2, 2, 5, 5), "w": (1, 1, 3, 3), "b": (1,), "v": (2, 1, 3, 3), "d": (2,)},
                  strides=(2, 2)))
_INSIDE = (cfg({"x": (1, 2, 3, 3), "p": (1, 1, 3, 3), "y": (1, 1, 3, 3), "w": (2, 2, 1, 1), "u": (2, 1, 1, 1),
                 "b": (2,)}),
           cfg({"x": (1, 1, 4, 4), "p": (1, 2, 4, 4), "y": (1, 2, 4, 4), "w": (1, 1, 3, 3), "u": (1, 2, 3, 3),
                "b": (1,)}, pads=(1, 1, 1, 1)),
           cfg({"x": (2, 1, 5, 5), "p": (2, 3, 5, 5), "y": (2, 1, 5, 5), "w": (2, 1, 3, 3), "u": (2, 1, 3, 3),
                "b": (2,)}, strides=(2, 2)))
_FLATTEN = (cfg({"a": (1, 1, 2, 2), "b": (1, 2, 2, 2), "c": (1, 1, 2, 2), "d": (1, 3, 2, 2)}),
            cfg({"a": (2, 2, 1, 3), "b": (2, 1, 1, 3), "c": (2, 2, 1, 3), "d": (2, 1, 1, 3)}),
            cfg({"a": (1, 3, 3, 1), "b": (1, 1, 3, 1), "c": (1, 1, 3, 1), "d": (1, 1, 3, 1)}))


def _columns_shape(s, p) -> dict[str, object]:  # noqa: ANN001
    return {"zeros": (s["w"][0], s["p"][1], *s["w"][2:])}


LEMMAS = (
    *(_carried(op) for op in ("Relu", "Sigmoid", "Tanh", "HardSwish", "Identity", "GlobalAveragePool")),
    _carried("HardSigmoid", alpha=1 / 6, beta=0.5),
    _carried("Clip", min=0.0, max=6.0),
    _carried("MaxPool", kernel_shape=(2, 2), strides=(1, 1)),
    _carried("AveragePool", kernel_shape=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1)),
    _carried("Pad", pads=(0, 0, 1, 0, 0, 0, 0, 1)),
    *(_binary(op) for op in ("Add", "Sub", "Mul", "Div")),
    *(_scalar(op) for op in ("Add", "Sub", "Mul", "Div")),
    Axiom("batchnormalization_concat",
          "bn(concat(x, p, 1); concat(g1, g2), ...) = concat(bn(x; g1, ...), bn(p; g2, ...), 1)",
          ("x", "p", *(f"{n}{i}" for i in (1, 2) for n in _BN)),
          lambda a, v, p: a("BatchNormalization", concat_channels(a, v["x"], v["p"]),
                            *(a("Concat", v[f"{n}1"], v[f"{n}2"], axis=0) for n in _BN)),
          lambda a, v, p: concat_channels(a, a("BatchNormalization", v["x"], *(v[f"{n}1"] for n in _BN)),
                               a("BatchNormalization", v["p"], *(v[f"{n}2"] for n in _BN))),
          _BN_CONFIGS, positive=frozenset({"var1", "var2"})),
    Axiom("conv_rows_concat", "conv(x, concat(w, v, 0), concat(b, d, 0)) = concat(conv(x, w, b), conv(x, v, d), 1)",
          ("x", "w", "b", "v", "d"),
          lambda a, v, p: a("Conv", v["x"], a("Concat", v["w"], v["v"], axis=0), a("Concat", v["b"], v["d"], axis=0),
                            **conv(p)),
          lambda a, v, p: concat_channels(a, a("Conv", v["x"], v["w"], v["b"], **conv(p)), a("Conv", v["x"], v["v"], v["d"], **conv(p))),
          _CONV_ROWS),
    Axiom("depthwise_conv_concat",
          "dwconv(concat(x, p, 1), concat(w, v, 0), concat(b, d, 0)) = concat(dwconv(x, w, b), dwconv(p, v, d), 1)",
          ("x", "p", "w", "b", "v", "d"),
          lambda a, v, p: a("Conv", concat_channels(a, v["x"], v["p"]), a("Concat", v["w"], v["v"], axis=0),
                            a("Concat", v["b"], v["d"], axis=0), **conv(p, group=p["all"])),
          lambda a, v, p: concat_channels(a, a("Conv", v["x"], v["w"], v["b"], **conv(p, group=p["real"])),
                               a("Conv", v["p"], v["v"], v["d"], **conv(p, group=p["extra"]))),
          _DEPTHWISE,
          derive=lambda s, p: {"real": s["x"][1], "extra": s["p"][1], "all": s["x"][1] + s["p"][1]}),
    Axiom("conv_zero_columns", "conv(concat(x, p, 1), concat(w, 0, 1), b) = conv(x, w, b)",
          ("x", "p", "w", "b"),
          lambda a, v, p: a("Conv", concat_channels(a, v["x"], v["p"]),
                            concat_channels(a, v["w"], a("ConstFill", shape=p["zeros"], value=0.0)), v["b"], **conv(p)),
          lambda a, v, p: a("Conv", v["x"], v["w"], v["b"], **conv(p)),
          _CONV_COLUMNS, derive=_columns_shape),
    Axiom("conv_zero_columns_inside",
          "conv(concat(x, p, y, 1), concat(w, 0, u, 1), b) = conv(concat(x, y, 1), concat(w, u, 1), b)",
          ("x", "p", "y", "w", "u", "b"),
          lambda a, v, p: a("Conv", a("Concat", v["x"], v["p"], v["y"], axis=1),
                            a("Concat", v["w"], a("ConstFill", shape=p["zeros"], value=0.0), v["u"], axis=1),
                            v["b"], **conv(p)),
          lambda a, v, p: a("Conv", concat_channels(a, v["x"], v["y"]), concat_channels(a, v["w"], v["u"]),
                            v["b"], **conv(p)),
          _INSIDE, derive=_columns_shape),
    Axiom("concat_flatten", "concat(concat(a, b, 1), concat(c, d, 1), 1) = concat(a, b, c, d, 1)",
          ("a", "b", "c", "d"),
          lambda a, v, p: concat_channels(a, concat_channels(a, v["a"], v["b"]), concat_channels(a, v["c"], v["d"])),
          lambda a, v, p: a("Concat", v["a"], v["b"], v["c"], v["d"], axis=1),
          _FLATTEN),
)
"""Every lemma the channel padding rests on."""
