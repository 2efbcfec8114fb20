"""MatMul: 2-D and batched matrix product with NumPy broadcasting of batch dims."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._spec import OpSpec
from taso.opspecs._types import (
    CheckResult,
    EnumHints,
    Lowering,
    OpKind,
    Params,
    Shape,
    ShapeError,
    broadcast_shapes,
    numel,
)


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if not a or not b:
        raise ShapeError("MatMul of a scalar")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if isinstance(a2[-1], int) and isinstance(b2[-2], int) and a2[-1] != b2[-2]:
        raise ShapeError(f"MatMul: inner dims {a2[-1]} != {b2[-2]}")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return (out,)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    return CheckResult.passed()


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    return [np.matmul(inputs[0], inputs[1])]


def _flops(inputs: Sequence[Shape], outputs: Sequence[Shape], p: Params) -> int:
    return 2 * numel(outputs[0]) * int(inputs[0][-1])


SPEC = OpSpec(
    name="MatMul",
    math="MatMul(a, b)[..., i, k] = sum_j a[..., i, j] * b[..., j, k]",
    onnx_ops=("MatMul",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(2, 2),
    params=(),
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=_flops,
    hints=EnumHints(weight_inputs=frozenset({1})),
    min_opset=1,
)
