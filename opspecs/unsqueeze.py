"""Unsqueeze: insert size-1 axes at the listed output positions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    CheckResult,
    Dim,
    EnumHints,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSource,
    ParamSpec,
    Shape,
    normalize_axis,
)

PARAMS = (ParamSpec("axes", ParamKind.INTS, None, ParamSource.CONST_INPUT, input_index=1),)


def _axes(x: Shape, p: Params) -> tuple[int, ...]:
    rank = len(x) + len(p["axes"])  # type: ignore[arg-type]
    return tuple(sorted(normalize_axis(a, rank) for a in p["axes"]))  # type: ignore[attr-defined]


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if not p["axes"]:
        return CheckResult.failed("Unsqueeze: axes required")
    axes = _axes(shapes[0], p)
    if len(set(axes)) != len(axes):
        return CheckResult.failed(f"Unsqueeze: repeated axes {axes}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    rest = iter(shapes[0])
    axes = set(_axes(shapes[0], p))
    out: list[Dim] = [1 if i in axes else next(rest) for i in range(len(shapes[0]) + len(axes))]
    return (tuple(out),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    return [np.expand_dims(inputs[0], _axes(inputs[0].shape, p))]


SPEC = OpSpec(
    name="Unsqueeze",
    math="Unsqueeze(x; axes) = x with size-1 axes inserted at output positions `axes`",
    onnx_ops=("Unsqueeze",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    hints=EnumHints(enumerable=False),
)
