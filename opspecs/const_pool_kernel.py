"""ConstPoolKernel (internal): depthwise kernel of 1/(kh*kw), turning AveragePool into Conv."""

import numpy as np

from taso.opspecs._internal import constant_spec
from taso.opspecs._types import ParamKind, ParamSpec

SPEC = constant_spec(
    "ConstPoolKernel",
    "ConstPoolKernel(C, (kh, kw))[c, 0, i, j] = 1 / (kh * kw)",
    (ParamSpec("channels", ParamKind.INT, None), ParamSpec("kernel_shape", ParamKind.INTS, None)),
    lambda p: (int(p["channels"]), 1, *p["kernel_shape"]),  # type: ignore[call-overload, misc]
    lambda p: np.full(
        (int(p["channels"]), 1, *p["kernel_shape"]),  # type: ignore[call-overload, misc]
        1.0 / (p["kernel_shape"][0] * p["kernel_shape"][1]),  # type: ignore[index]
    ),
)
