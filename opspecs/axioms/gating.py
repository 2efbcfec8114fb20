"""Axioms of squeeze-and-excitation gating: the squeeze as GlobalAveragePool, the excite's
broadcast multiply with its gate upsampled to the full plane.

ORT's CPU provider keeps convs in a blocked channel layout (NCHWc) and runs an SE block's
``x * g`` (g of shape (N, C, 1, 1)) outside it: the blocked ``x`` is reordered out, multiplied
and reordered back. A same-shape Mul and a nearest Resize with whole-number scales both stay
blocked, so ``x * resize(g)`` does too; a ReduceMean over H, W is GlobalAveragePool, which ORT
runs blocked where ReduceMean is not.
"""

from __future__ import annotations

from taso.opspecs.axioms._core import Axiom, cfg

NEAREST = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
"""The one Resize form the Resize spec models: x[i // k]."""


def plane_scales(shapes: dict, params: dict) -> dict:
    """Scales that upsample a (N, C, 1, 1) gate to x's plane: (1, 1, H, W)."""
    h, w = shapes["x"][2:]
    return {"scales": (1.0, 1.0, float(h), float(w))}


def _is_channel_gate(shapes: dict, params: dict) -> bool:
    x, g = shapes["x"], shapes["g"]
    return len(x) == 4 and len(g) == 4 and tuple(g) == (x[0], x[1], 1, 1)


def _spatial_axes(shapes: dict, params: dict) -> bool:
    return len(shapes["x"]) == 4 and sorted(a % 4 for a in params["axes"]) == [2, 3]


AXIOMS = (
    Axiom("reduce_mean_spatial_as_gap", "reducemean(x; axes (H, W), keepdims) = globalavgpool(x)",
          ("x",),
          lambda a, v, p: a("ReduceMean", v["x"], axes=p["axes"], keepdims=1),
          lambda a, v, p: a("GlobalAveragePool", v["x"]),
          (cfg({"x": (1, 3, 4, 5)}, axes=(2, 3)), cfg({"x": (2, 2, 3, 3)}, axes=(-1, -2)),
           cfg({"x": (1, 4, 1, 6)}, axes=(3, -2))),
          condition=_spatial_axes),
    Axiom("mul_channel_gate_upsampled", "x * g = x * resize(g; scales (1, 1, H, W), nearest), g (N, C, 1, 1)",
          ("x", "g"),
          lambda a, v, p: a("Mul", v["x"], v["g"]),
          lambda a, v, p: a("Mul", v["x"], a("Resize", v["g"], scales=p["scales"], **NEAREST)),
          (cfg({"x": (1, 3, 4, 5), "g": (1, 3, 1, 1)}), cfg({"x": (2, 2, 3, 3), "g": (2, 2, 1, 1)}),
           cfg({"x": (1, 4, 1, 6), "g": (1, 4, 1, 1)})),
          condition=_is_channel_gate, derive=plane_scales),
)
