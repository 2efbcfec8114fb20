"""Regroup (internal): the weight of a grouped conv rewritten for `factor` times fewer groups.

A conv with ``group`` G and weight ``w`` of shape (M, C/G, kh, kw) equals a conv with
G / k groups over ``regroup(w; G, k)``, of shape (M, k*C/G, kh, kw): each new group holds
k old ones, and each output channel's filter sits in its old group's slice of the new,
wider input range, zeros elsewhere (block-diagonal). More FLOPs, but wider groups can be
what a CPU runs fastest (ORT's NCHWc convs want 16-channel blocks); the cost model decides.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    CheckResult,
    EnumHints,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSpec,
    Shape,
)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    w = shapes[0]
    group, factor = int(p["group"]), int(p["factor"])  # type: ignore[call-overload]
    if len(w) < 3 or not all(isinstance(d, int) for d in w):
        return CheckResult.failed("Regroup: concrete conv weight (rank 3 or more) required")
    if group < 1 or factor < 1 or group % factor:
        return CheckResult.failed(f"Regroup: factor {factor} does not divide group {group}")
    if int(w[0]) % group:
        return CheckResult.failed(f"Regroup: {w[0]} output channels not divisible by group {group}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    w = shapes[0]
    return ((w[0], int(w[1]) * int(p["factor"]), *w[2:]),)  # type: ignore[call-overload]


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    w = inputs[0]
    group, factor = int(p["group"]), int(p["factor"])  # type: ignore[call-overload]
    per_group, width = w.shape[0] // group, w.shape[1]
    out = np.zeros((w.shape[0], width * factor, *w.shape[2:]), dtype=w.dtype)
    for g in range(group):
        rows = slice(g * per_group, (g + 1) * per_group)
        slot = g % factor  # position of old group g inside its new group
        out[rows, slot * width : (slot + 1) * width] = w[rows]
    return [out]


SPEC = OpSpec(
    name="Regroup",
    math="Regroup(w; G, k)[m, (g % k)*C/G + c, ...] = w[m, c, ...] with g = m // (M/G), zero elsewhere",
    onnx_ops=(),
    kind=OpKind.INTERNAL,
    lowering=Lowering.FOLD,
    arity=(1, 1),
    params=(ParamSpec("group", ParamKind.INT, 1), ParamSpec("factor", ParamKind.INT, 1)),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(param_values={"group": (2,), "factor": (2,)}, weight_inputs=frozenset({0})),
)
