"""Gelu: Gaussian error linear unit, exact (erf) or tanh approximation (ONNX opset 20)."""

import math

import numpy as np

from taso.opspecs._arith import scalar_function
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints, ParamKind, Params, ParamSpec

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu(x: np.ndarray, params: Params) -> np.ndarray:
    if params["approximate"] == "tanh":
        inner = (x + x * x * x * 0.044715) * SQRT_2_OVER_PI
        return x * 0.5 * (scalar_function("tanh", inner) + 1.0)
    return x * (scalar_function("erf", x / SQRT2) + 1.0) * 0.5


SPEC = unary_spec(
    "Gelu",
    "Gelu(x) = x/2 * (1 + erf(x/sqrt 2))  (or the tanh approximation)",
    _gelu,
    params=(ParamSpec("approximate", ParamKind.STRING, "none"),),
    polynomial=False,
    min_opset=20,
    flops_per_element=8,
    hints=EnumHints(param_values={"approximate": ("none", "tanh")}),
)
