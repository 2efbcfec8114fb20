"""GlobalAveragePool: mean over all spatial positions, keeping them as size-1 dims."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import CheckResult, EnumHints, Lowering, OpKind, Params, Shape, numel


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if len(shapes[0]) < 3:
        return CheckResult.failed("GlobalAveragePool: rank >= 3 required")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    x = shapes[0]
    return ((x[0], x[1], *([1] * (len(x) - 2))),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    axes = tuple(range(2, x.ndim))
    count = int(np.prod(x.shape[2:]))
    return [x.sum(axis=axes, keepdims=True) * (1.0 / count)]


SPEC = OpSpec(
    name="GlobalAveragePool",
    math="GlobalAveragePool(x)[n,c,1,1] = mean_{h,w} x[n,c,h,w]",
    onnx_ops=("GlobalAveragePool",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=(),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=lambda i, o, p: numel(i[0]),
    hints=EnumHints(enumerable=False),
    min_opset=1,
)
