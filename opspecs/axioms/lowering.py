"""The lemma of lowered Transposes (`taso.pipeline._lower_transposes`): a Transpose moves
the same elements as one over its input with the size-1 axes dropped and each run of axes
that stay adjacent, in order, merged. Validated like every axiom (Z3 and numerically, on
the configs and on drawn shapes); not in the rule bank: the lowering is one whole-graph
rewrite, not a rule the search matches.

Why it holds: a row-major Reshape that merges adjacent axes (or drops size-1 ones) keeps
every element's flat index, and an element at index ``(..., i, j, ...)`` of merged axes
``(a, b)`` sits at ``i * b + j`` of the merged one. A run of axes adjacent in the input
and in the output is read and written in the same order, so moving it as one axis moves
each of its elements where the Transpose over the unmerged axes moves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from taso.opspecs._types import Params, Shape
from taso.opspecs.axioms._core import Axiom, cfg

__all__ = ["LEMMAS", "Lowering", "lowering"]


@dataclass(frozen=True)
class Lowering:
    """A Transpose's input shape with runs merged (`shape`), and the permutation of the
    merged axes (`perm`) that moves the same elements."""

    shape: tuple[int, ...]
    perm: tuple[int, ...]

    @property
    def is_reshape(self) -> bool:
        return self.perm == tuple(range(len(self.perm)))


def lowering(shape: Sequence[int], perm: Sequence[int]) -> Lowering:
    """`shape` by `perm` with the size-1 axes dropped and each run of axes adjacent in the
    input that stays adjacent, in order, in the output merged into one."""
    kept = [axis for axis in range(len(shape)) if shape[axis] != 1]
    position = {axis: i for i, axis in enumerate(kept)}
    runs: list[list[int]] = []
    for axis in perm:
        if shape[axis] == 1:
            continue
        if runs and position[runs[-1][-1]] + 1 == position[axis]:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    merged = sorted(runs, key=lambda run: run[0])
    sizes = []
    for run in merged:
        size = 1
        for axis in run:
            size *= int(shape[axis])
        sizes.append(size)
    return Lowering(tuple(sizes), tuple(merged.index(run) for run in runs))


def _lowered(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    shape, perm = tuple(int(d) for d in s["x"]), tuple(int(a) for a in p["perm"])  # type: ignore[attr-defined]
    low = lowering(shape, perm)
    return {"m": low.shape, "q": low.perm, "out": tuple(shape[a] for a in perm)}


LEMMAS = (
    Axiom("transpose_lowered", "transpose(x, p) = reshape(transpose(reshape(x, m), q), shape(transpose(x, p)))",
          ("x",),
          lambda a, v, p: a("Transpose", v["x"], perm=p["perm"]),
          lambda a, v, p: a("Reshape", a("Transpose", a("Reshape", v["x"], shape=p["m"]), perm=p["q"]),
                            shape=p["out"]),
          (cfg({"x": (1, 3, 2, 2, 3)}, perm=(2, 0, 3, 4, 1)),  # cross-covariance attention's q, k, v
           cfg({"x": (1, 3, 2, 2, 3)}, perm=(2, 0, 3, 1, 4)),  # ViT's heads
           cfg({"x": (1, 2, 3, 2, 2)}, perm=(0, 2, 1, 3, 4)),  # ShuffleNet's channel shuffle
           cfg({"x": (2, 1, 3, 2)}, perm=(1, 0, 2, 3))),  # only a size-1 axis moves: a reshape
          derive=_lowered),
)
