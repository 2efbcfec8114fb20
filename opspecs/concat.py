"""Concat: join any number of tensors along ``axis``."""

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
    dim_add,
    normalize_axis,
)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return CheckResult.failed("Concat: inputs differ in rank")
    axis = normalize_axis(int(p["axis"]), rank)  # type: ignore[call-overload]
    for i in range(rank):
        dims = {s[i] for s in shapes}
        if i != axis and len(dims) > 1:
            return CheckResult.failed(f"Concat: dim {i} differs: {sorted(map(str, dims))}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    axis = normalize_axis(int(p["axis"]), len(shapes[0]))  # type: ignore[call-overload]
    total = shapes[0][axis]
    for s in shapes[1:]:
        total = dim_add(total, s[axis])
    out = list(shapes[0])
    out[axis] = total
    return (tuple(out),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    return [np.concatenate(list(inputs), axis=int(p["axis"]))]  # type: ignore[call-overload]


SPEC = OpSpec(
    name="Concat",
    math="Concat(x1..xn; axis) = [x1 | x2 | ... | xn] along axis",
    onnx_ops=("Concat",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, None),
    params=(ParamSpec("axis", ParamKind.INT, None),),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    min_opset=4,
    hints=EnumHints(param_values={"axis": (0, 1)}),
)
