"""Tanh: hyperbolic tangent elementwise."""

from taso.opspecs._arith import scalar_function
from taso.opspecs._elementwise import unary_spec

SPEC = unary_spec(
    "Tanh", "Tanh(x) = tanh(x)", lambda x, p: scalar_function("tanh", x),
    polynomial=False, flops_per_element=4,
)
