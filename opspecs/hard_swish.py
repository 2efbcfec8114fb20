"""HardSwish: x * HardSigmoid(x; 1/6, 1/2) = x * clip(x + 3, 0, 6) / 6."""

from taso.opspecs._arith import clip
from taso.opspecs._elementwise import unary_spec

SPEC = unary_spec(
    "HardSwish",
    "HardSwish(x) = x * min(max(x + 3, 0), 6) / 6",
    lambda x, p: x * clip(x + 3.0, 0.0, 6.0) / 6.0,
    min_opset=14,
    flops_per_element=4,
)
