"""Shared pieces of the 2-D pooling specs (AveragePool, MaxPool)."""

from __future__ import annotations

from collections.abc import Sequence

from taso.opspecs._conv_params import explicit_pads
from taso.opspecs._types import CheckResult, Params, Shape, numel
from taso.opspecs._window import window_shape


def kernel_of(p: Params) -> tuple[int, int]:
    k = p["kernel_shape"]
    return (int(k[0]), int(k[1]))  # type: ignore[index]


def check_pool(shapes: Sequence[Shape], p: Params) -> CheckResult:
    if len(shapes[0]) != 4:
        return CheckResult.failed("pooling: only 2-D (rank-4 input)")
    if p["kernel_shape"] is None or len(p["kernel_shape"]) != 2:  # type: ignore[arg-type]
        return CheckResult.failed("pooling: kernel_shape with 2 entries required")
    if p["ceil_mode"]:
        return CheckResult.failed("pooling: ceil_mode=1 not supported")
    return CheckResult.passed()


def infer_pool(shapes: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    x = shapes[0]
    pads = explicit_pads(x, kernel_of(p), p)
    dil = p.get("dilations", (1, 1))
    oh, ow = window_shape(x[2:], kernel_of(p), p["strides"], dil, pads)  # type: ignore[arg-type]
    return ((x[0], x[1], oh, ow),)


def pool_flops(inputs: Sequence[Shape], outputs: Sequence[Shape], p: Params) -> int:
    kh, kw = kernel_of(p)
    return numel(outputs[0]) * kh * kw
