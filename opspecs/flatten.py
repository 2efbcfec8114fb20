"""Flatten: collapse dims before ``axis`` and from ``axis`` on into a 2-D matrix."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    Dim,
    EnumHints,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSpec,
    Shape,
    dim_mul,
)


def _product(dims: Sequence[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    x = shapes[0]
    axis = int(p["axis"])  # type: ignore[call-overload]
    axis = axis + len(x) if axis < 0 else axis
    if not 0 <= axis <= len(x):
        raise ValueError(f"Flatten: axis {axis} > rank {len(x)}")
    return ((_product(x[:axis]), _product(x[axis:])),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    rows, cols = _infer([x.shape], p)[0]
    return [x.reshape(int(rows), int(cols))]


SPEC = OpSpec(
    name="Flatten",
    math="Flatten(x; axis) = reshape(x, (prod(dims[:axis]), prod(dims[axis:])))",
    onnx_ops=("Flatten",),
    kind=OpKind.ONNX,
    element_moving=True,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=(ParamSpec("axis", ParamKind.INT, 1),),
    infer=_infer,
    semantics=_semantics,
    hints=EnumHints(enumerable=False),
    min_opset=11,
)
