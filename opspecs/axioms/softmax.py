"""Axioms of Softmax: it commutes with a Transpose whose permutation carries its axis.

``softmax(transpose(x, p); a) = transpose(softmax(x; p[a]), p)``: output axis ``a`` of the
transpose is input axis ``p[a]``, and softmax normalizes each line along its axis
independently of how the other axes are ordered.

Why: ORT's CPU Softmax on an axis other than the last swaps that axis with the last
(a transpose in and out of the kernel), and how fast that transpose runs depends on the
axes it moves. YOLOv8's DFL head (ultralytics export) reshapes the box logits to
(1, 4, 16, A), transposes to (1, 16, 4, A) and takes the softmax over axis 1; taken over
axis 2 before the transpose, ORT's Softmax kernel time fell from 8.7% to 1.5% of the model
and the whole model ran 1.10-1.12x faster (interleaved, 2 threads, ORT CPU).
"""

from __future__ import annotations

from collections.abc import Mapping

from taso.opspecs._types import Params, Shape
from taso.opspecs.axioms._core import Axiom, cfg


def mapped_axis(shapes: Mapping[str, Shape], params: Params) -> dict[str, object]:
    """The input axis that the transpose moves to output axis ``axis``: perm[axis]."""
    perm = tuple(params["perm"])  # type: ignore[call-overload]
    return {"inner": perm[int(params["axis"]) % len(perm)]}  # type: ignore[call-overload]


TRANSPOSED = (
    cfg({"x": (2, 3)}, perm=(1, 0), axis=0),
    cfg({"x": (1, 2, 3, 2)}, perm=(0, 2, 1, 3), axis=1),
    cfg({"x": (2, 3, 2)}, perm=(2, 0, 1), axis=-1),
)
"""A matrix, the DFL head's swap of the two middle axes, a rotation with a negative axis."""

AXIOMS = (
    Axiom("softmax_transpose", "softmax(transpose(x, p); a) = transpose(softmax(x; p[a]), p)", ("x",),
          lambda a, v, p: a("Softmax", a("Transpose", v["x"], perm=p["perm"]), axis=p["axis"]),
          lambda a, v, p: a("Transpose", a("Softmax", v["x"], axis=p["inner"]), perm=p["perm"]),
          TRANSPOSED, derive=mapped_axis),
)
