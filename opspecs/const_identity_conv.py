"""ConstIdentityConv (internal): conv kernel whose convolution (SAME pads, stride 1) is identity."""

from __future__ import annotations

import numpy as np

from taso.opspecs._internal import constant_spec
from taso.opspecs._types import CheckResult, ParamKind, Params, ParamSpec, Shape

PARAMS = (
    ParamSpec("channels", ParamKind.INT, None),
    ParamSpec("kernel_shape", ParamKind.INTS, (1, 1)),
    ParamSpec("group", ParamKind.INT, 1),
)


def _shape(p: Params) -> Shape:
    c, g = int(p["channels"]), int(p["group"])  # type: ignore[call-overload]
    kh, kw = p["kernel_shape"]  # type: ignore[misc]
    return (c, c // g, kh, kw)


def _values(p: Params) -> np.ndarray:
    c, cg, kh, kw = (int(d) for d in _shape(p))
    w = np.zeros((c, cg, kh, kw), dtype=np.float64)
    for m in range(c):
        w[m, m % cg, kh // 2, kw // 2] = 1.0
    return w


def _check(p: Params) -> CheckResult:
    c, g = int(p["channels"]), int(p["group"])  # type: ignore[call-overload]
    if c % g:
        return CheckResult.failed(f"ConstIdentityConv: {c} channels not divisible by group {g}")
    if any(k % 2 == 0 for k in p["kernel_shape"]):  # type: ignore[attr-defined]
        return CheckResult.failed("ConstIdentityConv: kernel sizes must be odd")
    return CheckResult.passed()


SPEC = constant_spec(
    "ConstIdentityConv",
    "ConstIdentityConv(C, k, g)[m, m mod C/g, k//2, k//2] = 1, else 0",
    PARAMS,
    _shape,
    _values,
    _check,
)
