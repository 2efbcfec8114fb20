"""Axioms of BatchNormalization (inference form): folding into a preceding Conv and
decomposition into per-channel Mul and Add, with k = scale / sqrt(var + eps)."""

from __future__ import annotations

from taso.opspecs._types import Exactness
from taso.opspecs.axioms._core import Axiom, cfg


def bn_k(a, v, p):  # noqa: ANN001, ANN202
    """k = s / sqrt(var + eps), per channel, computed with ops over constants."""
    eps = a("ConstFill", shape=(), value=p["epsilon"])
    return a("Div", v["s"], a("Sqrt", a("Add", v["var"], eps)))


def _bn(a, x, v, p):  # noqa: ANN001, ANN202
    return a("BatchNormalization", x, v["s"], v["beta"], v["mean"], v["var"],
             epsilon=p["epsilon"])


def _chan(a, t, rank: int):  # noqa: ANN001, ANN202
    return a("Reshape", t, shape=(-1,) + (1,) * (rank - 2))


def _bn_shapes(x: tuple[int, ...], c: int, **extra: tuple[int, ...]) -> dict:
    return {"x": x, "s": (c,), "beta": (c,), "mean": (c,), "var": (c,), **extra}


STATS = frozenset({"var"})

AXIOMS = (
    Axiom("bn_decompose", "bn(x) = x * k + (beta - mean * k)", ("x", "s", "beta", "mean", "var"),
          lambda a, v, p: _bn(a, v["x"], v, p),
          lambda a, v, p: a("Add", a("Mul", v["x"], _chan(a, bn_k(a, v, p), p["rank"])),
                            _chan(a, a("Sub", v["beta"], a("Mul", v["mean"], bn_k(a, v, p))),
                                  p["rank"])),
          (cfg(_bn_shapes((1, 2, 2, 2), 2), epsilon=1e-5, rank=4),
           cfg(_bn_shapes((2, 3), 3), epsilon=1e-3, rank=2),
           cfg(_bn_shapes((1, 2, 3), 2), epsilon=1e-5, rank=3)),
          positive=STATS, exactness=Exactness.REASSOCIATES,
          condition=lambda s, p: len(s["x"]) == p["rank"]),  # reshaped (C, 1, ...) fits x's rank
    Axiom("bn_fold_conv",
          "bn(conv(x, w, b)) = conv(x, w * k[:,None,None,None], (b - mean) * k + beta)",
          ("x", "w", "b", "s", "beta", "mean", "var"),
          lambda a, v, p: _bn(a, a("Conv", v["x"], v["w"], v["b"], **p["conv"]), v, p),
          lambda a, v, p: a("Conv", v["x"], a("Mul", v["w"], a("Reshape", bn_k(a, v, p),
                                                                shape=(-1, 1, 1, 1))),
                            a("Add", a("Mul", a("Sub", v["b"], v["mean"]), bn_k(a, v, p)),
                              v["beta"]), **p["conv"]),
          (cfg(_bn_shapes((1, 2, 3, 3), 2, w=(2, 2, 1, 1), b=(2,)), epsilon=1e-5, conv={}),
           cfg(_bn_shapes((1, 2, 4, 4), 3, w=(3, 2, 3, 3), b=(3,)), epsilon=1e-5,
               conv={"strides": (2, 2), "pads": (1, 1, 1, 1)}),
           cfg(_bn_shapes((1, 2, 3, 3), 2, w=(2, 1, 3, 3), b=(2,)), epsilon=1e-3,
               conv={"group": 2, "pads": (1, 1, 1, 1)})),
          positive=STATS, exactness=Exactness.REASSOCIATES),
)
