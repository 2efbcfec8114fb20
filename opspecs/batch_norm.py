"""BatchNormalization in inference form: per-channel affine map from running statistics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._arith import scalar_function
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
    numel,
)

PARAMS = (
    ParamSpec("epsilon", ParamKind.FLOAT, 1e-5),
    ParamSpec("momentum", ParamKind.FLOAT, 0.9),
    ParamSpec("training_mode", ParamKind.INT, 0),
)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if p["training_mode"]:
        return CheckResult.failed("BatchNormalization: only inference form (training_mode=0)")
    x = shapes[0]
    if len(x) < 2:
        return CheckResult.failed("BatchNormalization: rank >= 2 required")
    for s in shapes[1:]:
        if tuple(s) != (x[1],):
            return CheckResult.failed(f"BatchNormalization: statistic shape {s} != ({x[1]},)")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return (tuple(shapes[0]),)


def channel_view(v: np.ndarray, rank: int) -> np.ndarray:
    """A (C,) vector shaped (C, 1, ..., 1) to broadcast against (N, C, ...)."""
    return v.reshape((-1,) + (1,) * (rank - 2))


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x, scale, bias, mean, var = inputs
    k = channel_view(scale / scalar_function("sqrt", var + p["epsilon"]), x.ndim)
    return [(x - channel_view(mean, x.ndim)) * k + channel_view(bias, x.ndim)]


SPEC = OpSpec(
    name="BatchNormalization",
    math="BN(x, s, b, m, v; eps)[n,c] = (x[n,c] - m[c]) * s[c] / sqrt(v[c] + eps) + b[c]",
    onnx_ops=("BatchNormalization",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(5, 5),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=lambda i, o, p: 2 * numel(o[0]),
    hints=EnumHints(weight_inputs=frozenset({1, 2, 3, 4}), enumerable=False),
    min_opset=9,
    polynomial=False,
)
