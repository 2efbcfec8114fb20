"""Relu: max(x, 0) elementwise."""

from taso.opspecs._arith import relu
from taso.opspecs._elementwise import unary_spec

SPEC = unary_spec("Relu", "Relu(x) = max(x, 0)", lambda x, p: relu(x), min_opset=6)
