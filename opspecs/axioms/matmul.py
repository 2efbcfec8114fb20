"""Axioms of MatMul and Gemm: associativity, linearity, merging products that share an
operand (concat), splitting the inner dimension, transpose of a product, identity matrix,
and Gemm as MatMul + Add."""

from __future__ import annotations

from collections.abc import Mapping

from taso.opspecs._types import Exactness, Params, Shape
from taso.opspecs.axioms._core import Axiom, cfg


def _swap_last(rank: int) -> tuple[int, ...]:
    return (*range(rank - 2), rank - 1, rank - 2)


def _fill(a, value: float):  # noqa: ANN001, ANN202
    return a("ConstFill", shape=(), value=value)


def _gemm_rhs(a, v, p):  # noqa: ANN001, ANN202
    """alpha * op(A) @ op(B) + beta * C with explicit Transpose/Mul ops."""
    lhs = a("Transpose", v["A"], perm=(1, 0)) if p["transA"] else v["A"]
    rhs = a("Transpose", v["B"], perm=(1, 0)) if p["transB"] else v["B"]
    product = a("Mul", a("MatMul", lhs, rhs), _fill(a, p["alpha"]))
    return a("Add", product, a("Mul", v["C"], _fill(a, p["beta"])))


def _front_axes(s: Mapping[str, Shape], p: Params) -> dict[str, object]:
    """The last two axes counted from the front (Concat/Split axes are often written so)."""
    rank = len(next(iter(s.values())))
    return {"last": rank - 1, "second_last": rank - 2}


def _same_rank(s: Mapping[str, Shape], p: Params) -> bool:
    return len({len(shape) for shape in s.values()}) == 1


def _merge_lhs(axis: str) -> tuple:
    return (lambda a, v, p: a("Concat", a("MatMul", v["x"], v["y"]), a("MatMul", v["x"], v["z"]),
                              axis=p[axis]),
            lambda a, v, p: a("MatMul", v["x"], a("Concat", v["y"], v["z"], axis=p[axis])))


def _merge_rhs(axis: str) -> tuple:
    return (lambda a, v, p: a("Concat", a("MatMul", v["x"], v["z"]), a("MatMul", v["y"], v["z"]),
                              axis=p[axis]),
            lambda a, v, p: a("MatMul", a("Concat", v["x"], v["y"], axis=p[axis]), v["z"]))


def _split_inner(last: str, second_last: str) -> tuple:
    return (lambda a, v, p: a("Add", a("MatMul", v["x1"], v["y1"]), a("MatMul", v["x2"], v["y2"])),
            lambda a, v, p: a("MatMul", a("Concat", v["x1"], v["x2"], axis=p[last]),
                              a("Concat", v["y1"], v["y2"], axis=p[second_last])))


MERGE_LHS = (cfg({"x": (2, 3), "y": (3, 2), "z": (3, 1)}),
             cfg({"x": (2, 2, 3), "y": (2, 3, 2), "z": (2, 3, 2)}),
             cfg({"x": (4, 2), "y": (2, 1), "z": (2, 3)}))
MERGE_RHS = (cfg({"x": (2, 3), "y": (1, 3), "z": (3, 2)}),
             cfg({"x": (2, 2, 3), "y": (2, 1, 3), "z": (2, 3, 2)}),
             cfg({"x": (1, 2), "y": (3, 2), "z": (2, 2)}))
SPLIT_INNER = (cfg({"x1": (2, 3), "x2": (2, 1), "y1": (3, 2), "y2": (1, 2)}),
               cfg({"x1": (2, 2, 2), "x2": (2, 2, 2), "y1": (2, 2, 3), "y2": (2, 2, 3)}),
               cfg({"x1": (1, 1), "x2": (1, 3), "y1": (1, 4), "y2": (3, 4)}))

AXIOMS = (
    Axiom("matmul_assoc", "(x @ y) @ z = x @ (y @ z)", ("x", "y", "z"),
          lambda a, v, p: a("MatMul", a("MatMul", v["x"], v["y"]), v["z"]),
          lambda a, v, p: a("MatMul", v["x"], a("MatMul", v["y"], v["z"])),
          (cfg({"x": (2, 3), "y": (3, 2), "z": (2, 2)}),
           cfg({"x": (2, 2, 3), "y": (3, 1), "z": (1, 2)}),
           cfg({"x": (1, 4), "y": (2, 4, 2), "z": (2, 2, 3)})),
          exactness=Exactness.REASSOCIATES),
    Axiom("matmul_linear", "x @ (y + z) = x @ y + x @ z", ("x", "y", "z"),
          lambda a, v, p: a("MatMul", v["x"], a("Add", v["y"], v["z"])),
          lambda a, v, p: a("Add", a("MatMul", v["x"], v["y"]), a("MatMul", v["x"], v["z"])),
          (cfg({"x": (2, 3), "y": (3, 2), "z": (3, 2)}),
           cfg({"x": (2, 2, 3), "y": (3, 2), "z": (2, 3, 2)}),
           cfg({"x": (1, 3), "y": (3, 4), "z": (3, 1)})),
          exactness=Exactness.REASSOCIATES),
    Axiom("matmul_merge_shared_lhs", "concat(x @ y, x @ z, -1) = x @ concat(y, z, -1)",
          ("x", "y", "z"),
          lambda a, v, p: a("Concat", a("MatMul", v["x"], v["y"]), a("MatMul", v["x"], v["z"]), axis=-1),
          lambda a, v, p: a("MatMul", v["x"], a("Concat", v["y"], v["z"], axis=-1)),
          (cfg({"x": (2, 3), "y": (3, 2), "z": (3, 1)}),
           cfg({"x": (2, 2, 3), "y": (2, 3, 2), "z": (2, 3, 2)}),
           cfg({"x": (4, 2), "y": (2, 1), "z": (2, 3)}))),
    Axiom("matmul_merge_shared_rhs", "concat(x @ z, y @ z, -2) = concat(x, y, -2) @ z",
          ("x", "y", "z"),
          lambda a, v, p: a("Concat", a("MatMul", v["x"], v["z"]), a("MatMul", v["y"], v["z"]), axis=-2),
          lambda a, v, p: a("MatMul", a("Concat", v["x"], v["y"], axis=-2), v["z"]),
          (cfg({"x": (2, 3), "y": (1, 3), "z": (3, 2)}),
           cfg({"x": (2, 2, 3), "y": (2, 1, 3), "z": (2, 3, 2)}),
           cfg({"x": (1, 2), "y": (3, 2), "z": (2, 2)}))),
    Axiom("matmul_split_inner", "x1 @ y1 + x2 @ y2 = concat(x1, x2, -1) @ concat(y1, y2, -2)",
          ("x1", "x2", "y1", "y2"),
          lambda a, v, p: a("Add", a("MatMul", v["x1"], v["y1"]), a("MatMul", v["x2"], v["y2"])),
          lambda a, v, p: a("MatMul", a("Concat", v["x1"], v["x2"], axis=-1),
                            a("Concat", v["y1"], v["y2"], axis=-2)),
          (cfg({"x1": (2, 3), "x2": (2, 1), "y1": (3, 2), "y2": (1, 2)}),
           cfg({"x1": (2, 2, 2), "x2": (2, 2, 2), "y1": (2, 2, 3), "y2": (2, 2, 3)}),
           cfg({"x1": (1, 1), "x2": (1, 3), "y1": (1, 4), "y2": (3, 4)})),
          exactness=Exactness.REASSOCIATES),
    Axiom("matmul_transpose", "transpose(x @ y) = transpose(y) @ transpose(x)  (last two axes)",
          ("x", "y"),
          lambda a, v, p: a("Transpose", a("MatMul", v["x"], v["y"]), perm=_swap_last(p["rank"])),
          lambda a, v, p: a("MatMul", a("Transpose", v["y"], perm=_swap_last(p["rank"])),
                            a("Transpose", v["x"], perm=_swap_last(p["rank"]))),
          (cfg({"x": (2, 3), "y": (3, 4)}, rank=2), cfg({"x": (2, 2, 3), "y": (2, 3, 1)}, rank=3),
           cfg({"x": (1, 2, 1, 3), "y": (1, 2, 3, 2)}, rank=4)),
          condition=lambda s, p: len(s["x"]) == len(s["y"]) == p["rank"]),
    Axiom("matmul_identity", "x @ I(n) = x", ("x",),
          lambda a, v, p: a("MatMul", v["x"], a("ConstIdentityMatrix", n=p["n"])),
          lambda a, v, p: v["x"],
          (cfg({"x": (2, 3)}, n=3), cfg({"x": (2, 2, 4)}, n=4), cfg({"x": (1, 1)}, n=1)),
          condition=lambda s, p: s["x"][-1] == p["n"]),
    Axiom("gemm_as_matmul", "gemm(A, B, C; a, b, tA, tB) = op(A) @ op(B) * a + C * b",
          ("A", "B", "C"),
          lambda a, v, p: a("Gemm", v["A"], v["B"], v["C"], alpha=p["alpha"], beta=p["beta"],
                            transA=p["transA"], transB=p["transB"]),
          _gemm_rhs,
          (cfg({"A": (2, 3), "B": (3, 4), "C": (4,)}, alpha=1.0, beta=1.0, transA=0, transB=0),
           cfg({"A": (2, 3), "B": (4, 3), "C": (2, 4)}, alpha=1.0, beta=1.0, transA=0, transB=1),
           cfg({"A": (3, 2), "B": (3, 1), "C": (1, 1)}, alpha=0.5, beta=2.0, transA=1, transB=0))),
    # the three merges again with the axes counted from the front (rank r): the forms the
    # enumerator writes, since a Concat axis 1 and an axis -1 are different Z3 terms
    Axiom("matmul_merge_shared_lhs_front", "concat(x @ y, x @ z, r-1) = x @ concat(y, z, r-1)",
          ("x", "y", "z"), *_merge_lhs("last"), MERGE_LHS, condition=_same_rank,
          derive=_front_axes),
    Axiom("matmul_merge_shared_rhs_front", "concat(x @ z, y @ z, r-2) = concat(x, y, r-2) @ z",
          ("x", "y", "z"), *_merge_rhs("second_last"), MERGE_RHS, condition=_same_rank,
          derive=_front_axes),
    Axiom("matmul_split_inner_front",
          "x1 @ y1 + x2 @ y2 = concat(x1, x2, r-1) @ concat(y1, y2, r-2)",
          ("x1", "x2", "y1", "y2"), *_split_inner("last", "second_last"), SPLIT_INNER,
          condition=_same_rank, derive=_front_axes, exactness=Exactness.REASSOCIATES),
)
