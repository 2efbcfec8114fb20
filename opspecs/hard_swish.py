"""HardSwish: x * HardSigmoid(x; 1/6, 1/2) = x * clip(x + 3, 0, 6) / 6.

ONNX has HardSwish from opset 14. Below it, a rewrite that yields HardSwish is written as
``x * HardSigmoid(x; alpha=1/6, beta=1/2)`` (HardSigmoid exists from opset 6), the form
paddle2onnx writes itself; alpha is the float32 nearest 1/6, as in ORT's HardSwish kernel,
so the decomposition is `ROUNDS_CONSTANTS`, not exact.
"""

from taso.opspecs._arith import clip
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._spec import EmitNode
from taso.opspecs._types import Exactness, Params


def _decompose(params: Params) -> tuple[EmitNode, ...]:
    return (EmitNode("HardSigmoid", (0,), "hs", {"alpha": 1.0 / 6.0, "beta": 0.5}),
            EmitNode("Mul", (0, "hs"), "out"))


SPEC = unary_spec(
    "HardSwish",
    "HardSwish(x) = x * min(max(x + 3, 0), 6) / 6",
    lambda x, p: x * clip(x + 3.0, 0.0, 6.0) / 6.0,
    min_opset=14,
    flops_per_element=4,
    decomposition=_decompose,
    decomposition_exactness=Exactness.ROUNDS_CONSTANTS,
)
