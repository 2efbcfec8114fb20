"""Softmax (opset 13 on): exp(x) normalized to sum to one along one axis.

Opsets 1-12 define Softmax over x coerced to 2-D (every axis from ``axis`` on flattened
into one), so ``min_opset`` is 13: a rule that writes a Softmax is refused in an older
model (`OpsetError`), and so is every rule that matches one, as each writes it back.

The NumPy semantics subtract the maximum along the axis first (the same value over the
reals, and no overflow); the symbolic semantics apply an uninterpreted ``exp`` to each
element and divide by the sum along the axis.
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
    normalize_axis,
    numel,
)
from taso.opspecs._z3 import as_real, is_symbolic, real_function


def _axis(shape: Shape, p: Params) -> int:
    return normalize_axis(int(p["axis"]), len(shape))  # type: ignore[call-overload]


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    rank = len(shapes[0])
    if not -rank <= int(p["axis"]) < rank:  # type: ignore[call-overload]
        return CheckResult.failed(f"Softmax: axis {p['axis']} out of range for rank {rank}")
    return CheckResult.passed()


def _exp(x: np.ndarray) -> np.ndarray:
    if is_symbolic(x):
        exp = real_function("exp")
        return np.frompyfunc(lambda v: exp(as_real(v)), 1, 1)(x).astype(object)
    return np.exp(x - x.max(axis=-1, keepdims=True))


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    axis = _axis(x.shape, p)
    e = np.moveaxis(_exp(np.moveaxis(x, axis, -1)), -1, axis)
    return [e / e.sum(axis=axis, keepdims=True)]


SPEC = OpSpec(
    name="Softmax",
    math="Softmax(x; axis)[i] = exp(x[i]) / sum over the axis of exp(x)",
    onnx_ops=("Softmax",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=(ParamSpec("axis", ParamKind.INT, -1),),
    infer=lambda shapes, p: (tuple(shapes[0]),),
    semantics=_semantics,
    check_fn=_check,
    flops_fn=lambda i, o, p: 4 * numel(i[0]),
    hints=EnumHints(enumerable=False),
    min_opset=13,
    polynomial=False,
)
