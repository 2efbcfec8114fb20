"""Gemm: alpha * op(A) @ op(B) + beta * C with optional transposes; C broadcasts."""

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
    broadcast_shapes,
    numel,
)

PARAMS = (
    ParamSpec("alpha", ParamKind.FLOAT, 1.0),
    ParamSpec("beta", ParamKind.FLOAT, 1.0),
    ParamSpec("transA", ParamKind.INT, 0),
    ParamSpec("transB", ParamKind.INT, 0),
)


def _operands(shapes: Sequence[Shape], p: Params) -> tuple[Shape, Shape]:
    a, b = tuple(shapes[0]), tuple(shapes[1])
    return (a[::-1] if p["transA"] else a, b[::-1] if p["transB"] else b)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if len(shapes[0]) != 2 or len(shapes[1]) != 2:
        return CheckResult.failed("Gemm: A and B must be 2-D")
    a, b = _operands(shapes, p)
    if isinstance(a[1], int) and isinstance(b[0], int) and a[1] != b[0]:
        return CheckResult.failed(f"Gemm: inner dims {a[1]} != {b[0]}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    a, b = _operands(shapes, p)
    out = (a[0], b[1])
    if len(shapes) == 3 and broadcast_shapes(out, shapes[2]) != out:
        raise ValueError(f"Gemm: C {shapes[2]} does not broadcast to {out}")
    return (out,)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    a = inputs[0].T if p["transA"] else inputs[0]
    b = inputs[1].T if p["transB"] else inputs[1]
    y = np.matmul(a, b) * p["alpha"] if p["alpha"] != 1.0 else np.matmul(a, b)
    if len(inputs) == 3:
        c = inputs[2] * p["beta"] if p["beta"] != 1.0 else inputs[2]
        y = y + c
    return [y]


def _flops(inputs: Sequence[Shape], outputs: Sequence[Shape], p: Params) -> int:
    a, _ = _operands(inputs, p)
    return 2 * numel(outputs[0]) * int(a[1])


SPEC = OpSpec(
    name="Gemm",
    math="Gemm(A, B, C) = alpha * op(A) @ op(B) + beta * C,  op = transpose if trans",
    onnx_ops=("Gemm",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(2, 3),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=_flops,
    min_opset=11,
    hints=EnumHints(
        param_values={"transA": (0,), "transB": (0, 1)}, weight_inputs=frozenset({1, 2})
    ),
)
