"""Sqrt: square root elementwise (appears in BatchNormalization folding over constants)."""

from taso.opspecs._arith import scalar_function
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints

SPEC = unary_spec(
    "Sqrt", "Sqrt(x) = sqrt(x)", lambda x, p: scalar_function("sqrt", x),
    polynomial=False, flops_per_element=4, hints=EnumHints(enumerable=False),
)
