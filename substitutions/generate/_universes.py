"""The typed input sets the generator enumerates over (TASO's operators, split by domain).

Each universe is small on purpose: a few activations and weights whose shapes make the
interesting operators valid (square matrices, a 3x3 and a 1x1 kernel of the same
channels, a 0-d scale), so enumeration stays exhaustive up to K operators.
"""

from __future__ import annotations

from dataclasses import replace

from taso.substitutions.generate._enumerate import Leaf, Role, Universe

A, W = Role.ACTIVATION, Role.WEIGHT

TASO_OPS = ("Conv", "MatMul", "Add", "Mul", "Relu", "ScalarMul", "Enlarge", "Concat", "Split",
            "Transpose", "AveragePool", "MaxPool")

CONV = Universe(
    "conv",
    ("Conv", "Add", "Relu", "Enlarge", "Concat", "Split"),
    (Leaf("x", (1, 2, 3, 3), A),
     Leaf("w1", (2, 2, 3, 3), W), Leaf("w2", (2, 2, 3, 3), W), Leaf("w3", (2, 2, 1, 1), W),
     ),
    param_values=(("Conv", "strides", ((1, 1),)), ("Conv", "activation", ("none",)),
                  ("Concat", "axis", (0, 1)), ("Split", "axis", (1,))),
)

POOL = Universe(
    "pool",
    ("Conv", "Relu", "Concat", "AveragePool", "MaxPool"),
    (Leaf("x", (1, 2, 3, 3), A), Leaf("y", (1, 2, 3, 3), A), Leaf("w1", (2, 2, 3, 3), W)),
    param_values=(("Conv", "strides", ((1, 1),)), ("Conv", "pads", ((1, 1, 1, 1),)),
                  ("Conv", "activation", ("none",)),
                  ("Concat", "axis", (1,)), ("AveragePool", "strides", ((1, 1),)),
                  ("MaxPool", "strides", ((1, 1),))),
)

MATMUL = Universe(
    "matmul",
    ("MatMul", "Add", "Mul", "Relu", "ScalarMul", "Concat", "Split", "Transpose"),
    (Leaf("a", (4, 4), A), Leaf("b", (4, 4), A), Leaf("c", (4, 4), A), Leaf("s", (), W)),
)

UNIVERSES = (MATMUL, CONV, POOL)

CHANNEL = Universe(
    "channel",
    ("Conv", "Mul", "Add", "Reshape"),
    (Leaf("x", (1, 2, 2, 2), A), Leaf("w", (3, 2, 1, 1), W),
     Leaf("k", (3, 1, 1), W), Leaf("t", (3, 1, 1), W)),
    param_values=(("Conv", "strides", ((1, 1),)), ("Conv", "pads", ((0, 0, 0, 0),)),
                  ("Conv", "activation", ("none",)),
                  ("Reshape", "shape", ((-1, 1, 1, 1), (-1,)))),
    max_outputs=1,
    arities=(("Conv", (2, 3)),),
)
"""A per-channel affine map after a Conv, as BatchNorm is (`bn_decompose`: ``bn(y) = y * k
+ t`` with ``k``, ``t`` of shape (C, 1, 1)) and as converters emit it: the scale ``k`` and
shift ``t``, the two layouts a Conv needs them in (weight (M, 1, 1, 1), bias (M,)), and
Conv with and without its bias. Its 4-op run finds BatchNorm folding,
``conv(x, w) * k + t = conv(x, w * reshape(k, (M,1,1,1)), reshape(t, (M,)))``. Not part of
TASO's set (`UNIVERSES`)."""


def select(ops: tuple[str, ...] | None) -> tuple[Universe, ...]:
    """Universes restricted to ``ops`` (None: all); universes left without ops are dropped."""
    if not ops:
        return UNIVERSES
    out = []
    for u in UNIVERSES:
        kept = tuple(o for o in u.ops if o in ops)
        if kept:
            out.append(replace(u, ops=kept, arities=tuple(a for a in u.arities if a[0] in kept)))
    uncovered = tuple(o for o in ops if not any(o in u.ops for u in UNIVERSES))
    if uncovered:
        out.append(_elementwise(uncovered + tuple(o for o in ops if o in _ELEMENTWISE_PARTNERS and o not in uncovered)))
    return tuple(out)


_ELEMENTWISE_PARTNERS = ("Add", "Mul", "Relu")


def _elementwise(ops: tuple[str, ...]) -> Universe:
    """A universe for requested operators no built-in universe has (Sub, Div, an operator
    of the user's own such as examples/neg_op.py), with the elementwise operators asked
    for alongside: three same-shape activations and a 0-d weight. Operators invalid on
    these shapes are skipped by the enumerator, as everywhere."""
    return Universe(
        "elementwise", ops,
        (Leaf("x", (2, 3), A), Leaf("y", (2, 3), A), Leaf("z", (2, 3), A), Leaf("s", (), W)),
    )
