"""Sigmoid: logistic function elementwise."""

from taso.opspecs._arith import scalar_function
from taso.opspecs._elementwise import unary_spec

SPEC = unary_spec(
    "Sigmoid",
    "Sigmoid(x) = 1 / (1 + exp(-x))",
    lambda x, p: scalar_function("sigmoid", x),
    polynomial=False,
    flops_per_element=4,
)
