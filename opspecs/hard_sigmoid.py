"""HardSigmoid: piecewise-linear sigmoid; converters often emit it as Mul, Add, Clip."""

from taso.opspecs._arith import clip
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints, ParamKind, ParamSpec

PARAMS = (
    ParamSpec("alpha", ParamKind.FLOAT, 0.2),
    ParamSpec("beta", ParamKind.FLOAT, 0.5),
)

SPEC = unary_spec(
    "HardSigmoid",
    "HardSigmoid(x; a, b) = max(0, min(1, a*x + b))",
    lambda x, p: clip(x * p["alpha"] + p["beta"], 0.0, 1.0),  # type: ignore[operator]
    params=PARAMS,
    min_opset=6,
    flops_per_element=3,
    hints=EnumHints(param_values={"alpha": (0.2, 1 / 6), "beta": (0.5,)}),
)
