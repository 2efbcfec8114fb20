"""Conv: 2-D convolution with strides, pads, dilations and groups (grouped, depthwise).

``activation`` is an internal parameter (TASO's fused conv activation): ``relu``
means Relu(Conv(...)) and is emitted to ONNX as Conv followed by Relu.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from taso.opspecs._arith import relu
from taso.opspecs._conv_params import AUTO_PAD, DILATIONS, PADS, STRIDES, explicit_pads
from taso.opspecs._spec import EmitNode, OpSpec
from taso.opspecs._types import (
    CheckResult,
    EnumHints,
    Lowering,
    OpKind,
    ParamKind,
    Params,
    ParamSource,
    ParamSpec,
    Shape,
    numel,
)
from taso.opspecs._window import conv2d, window_shape

PARAMS = (
    STRIDES,
    PADS,
    DILATIONS,
    ParamSpec("group", ParamKind.INT, 1),
    AUTO_PAD,
    ParamSpec("activation", ParamKind.STRING, "none", ParamSource.NONE, doc="none | relu"),
)


def _kernel(w: Shape) -> tuple[int, int]:
    return (int(w[2]), int(w[3]))


def _check(shapes: Sequence[Shape], p: Params) -> CheckResult:
    x, w = shapes[0], shapes[1]
    if len(x) != 4 or len(w) != 4:
        return CheckResult.failed("Conv: only 2-D convolution (rank-4 input and weight)")
    group = int(p["group"])  # type: ignore[call-overload]
    if not all(isinstance(d, int) for d in w):
        return CheckResult.failed("Conv: weight shape must be concrete")
    if isinstance(x[1], int) and x[1] != w[1] * group:
        return CheckResult.failed(f"Conv: channels {x[1]} != {w[1]} * group {group}")
    if int(w[0]) % group:
        return CheckResult.failed(f"Conv: {w[0]} output channels not divisible by group {group}")
    if len(shapes) == 3 and tuple(shapes[2]) != (w[0],):
        return CheckResult.failed(f"Conv: bias shape {shapes[2]} != ({w[0]},)")
    if p["activation"] not in ("none", "relu"):
        return CheckResult.failed(f"Conv: unknown activation {p['activation']!r}")
    return CheckResult.passed()


def _infer(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    x, w = shapes[0], shapes[1]
    pads = explicit_pads(x, _kernel(w), p)
    oh, ow = window_shape(x[2:], _kernel(w), p["strides"], p["dilations"], pads)  # type: ignore[arg-type]
    return ((x[0], w[0], oh, ow),)


def _semantics(inputs: Sequence[np.ndarray], p: Params) -> list[np.ndarray]:
    x, w = inputs[0], inputs[1]
    pads = explicit_pads(x.shape, _kernel(w.shape), p)
    y = conv2d(x, w, p["strides"], pads, p["dilations"], int(p["group"]))  # type: ignore[arg-type, call-overload]
    if len(inputs) == 3:
        y = y + inputs[2].reshape(1, -1, 1, 1)
    return [relu(y) if p["activation"] == "relu" else y]


def _flops(inputs: Sequence[Shape], outputs: Sequence[Shape], p: Params) -> int:
    w = inputs[1]
    return 2 * numel(outputs[0]) * int(w[1]) * int(w[2]) * int(w[3])


def _decompose(p: Params) -> tuple[EmitNode, ...]:
    """Conv with a fused Relu is emitted as Conv -> Relu (inputs 0, 1 and optional 2)."""
    attrs = {k: p[k] for k in ("strides", "pads", "dilations", "group", "auto_pad")}
    return (EmitNode("Conv", (0, 1, 2), "y", attrs), EmitNode("Relu", ("y",), "out"))


SPEC = OpSpec(
    name="Conv",
    math="y[n,m] = sum_c,i,j x_pad[n, c + g*C/G, s*h + d*i, s*w + d*j] * w[m,c,i,j] + b[m]",
    onnx_ops=("Conv",),
    kind=OpKind.ONNX,
    lowering=Lowering.NODE,
    arity=(2, 3),
    params=PARAMS,
    infer=_infer,
    semantics=_semantics,
    check_fn=_check,
    flops_fn=_flops,
    hints=EnumHints(
        param_values={
            "strides": ((1, 1), (2, 2)),
            "pads": ((0, 0, 0, 0), (1, 1, 1, 1)),
            "group": (1,),
            "activation": ("none", "relu"),
        },
        weight_inputs=frozenset({1, 2}),
    ),
    min_opset=1,
    decomposition=_decompose,
)
