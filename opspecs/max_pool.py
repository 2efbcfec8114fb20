"""MaxPool: 2-D max pooling (TASO's pool2d_max); padded positions are ignored."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._conv_params import AUTO_PAD, DILATIONS, PADS, STRIDES, explicit_pads
from taso.opspecs._pool import check_pool, infer_pool, kernel_of, pool_flops
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
from taso.opspecs._window import max_pool

PARAMS = (
    ParamSpec("kernel_shape", ParamKind.INTS, None),
    STRIDES,
    PADS,
    DILATIONS,
    AUTO_PAD,
    ParamSpec("ceil_mode", ParamKind.INT, 0),
    ParamSpec("storage_order", ParamKind.INT, 0),
)


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if p["storage_order"]:
        return CheckResult.failed("MaxPool: storage_order=1 not supported")
    return check_pool(shapes, p)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    pads = explicit_pads(x.shape, kernel_of(p), p)
    return [max_pool(x, kernel_of(p), p["strides"], pads, p["dilations"])]  # type: ignore[arg-type]


SPEC = OpSpec(
    name="MaxPool",
    math="MaxPool(x; k, s, pad)[n,c,h,w] = max of x[n, c, s*h-pad : s*h-pad+k, ...] (in bounds)",
    onnx_ops=("MaxPool",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=infer_pool,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=pool_flops,
    hints=EnumHints(
        param_values={
            "kernel_shape": ((3, 3),),
            "strides": ((1, 1), (2, 2)),
            "pads": ((1, 1, 1, 1),),
        }
    ),
    min_opset=12,
)
