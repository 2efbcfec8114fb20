"""AveragePool: 2-D mean pooling (TASO's pool2d_avg)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._conv_params import AUTO_PAD, PADS, STRIDES, explicit_pads
from taso.opspecs._pool import check_pool, infer_pool, kernel_of, pool_flops
from taso.opspecs._spec import OpSpec
from taso.opspecs._types import EnumHints, Lowering, OpKind, ParamKind, Params, ParamSpec
from taso.opspecs._window import avg_pool

PARAMS = (
    ParamSpec("kernel_shape", ParamKind.INTS, None),
    STRIDES,
    PADS,
    AUTO_PAD,
    ParamSpec("count_include_pad", ParamKind.INT, 0),
    ParamSpec("ceil_mode", ParamKind.INT, 0),
)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x = inputs[0]
    pads = explicit_pads(x.shape, kernel_of(p), p)
    include = bool(p["count_include_pad"])
    return [avg_pool(x, kernel_of(p), p["strides"], pads, count_include_pad=include)]  # type: ignore[arg-type]


SPEC = OpSpec(
    name="AveragePool",
    math="AveragePool(x; k, s, pad)[n,c,h,w] = mean of x_pad[n, c, s*h : s*h+k, s*w : s*w+k]",
    onnx_ops=("AveragePool",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(1, 1),
    params=PARAMS,
    infer=infer_pool,
    semantics=_semantics,
    check_fn=check_pool,
    flops_fn=pool_flops,
    hints=EnumHints(
        param_values={
            "kernel_shape": ((3, 3),),
            "strides": ((1, 1), (2, 2)),
            "pads": ((1, 1, 1, 1),),
            "count_include_pad": (1,),
        }
    ),
    min_opset=10,
)
