"""SiLU / Swish: x * sigmoid(alpha * x); ONNX ``Swish`` (opset 24) or decomposed for older opsets."""

from taso.opspecs._arith import scalar_function
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._spec import EmitNode
from taso.opspecs._types import ParamKind, Params, ParamSpec


def _decompose(params: Params) -> tuple[EmitNode, ...]:
    """Sigmoid(alpha*x) * x for opsets without Swish."""
    alpha = float(params["alpha"])  # type: ignore[arg-type]
    if alpha == 1.0:
        return (EmitNode("Sigmoid", (0,), "s"), EmitNode("Mul", (0, "s"), "out"))
    return (
        EmitNode("Mul", (0, alpha), "ax"),
        EmitNode("Sigmoid", ("ax",), "s"),
        EmitNode("Mul", (0, "s"), "out"),
    )


SPEC = unary_spec(
    "SiLU",
    "SiLU(x; alpha) = x * sigmoid(alpha * x)",
    lambda x, p: x * scalar_function("sigmoid", x * p["alpha"]),  # type: ignore[operator]
    onnx_op="Swish",
    params=(ParamSpec("alpha", ParamKind.FLOAT, 1.0),),
    polynomial=False,
    min_opset=24,
    flops_per_element=5,
    decomposition=_decompose,
)
