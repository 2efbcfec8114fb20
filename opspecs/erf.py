"""Erf: Gauss error function elementwise (appears in decomposed Gelu)."""

from taso.opspecs._arith import scalar_function
from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints

SPEC = unary_spec(
    "Erf", "Erf(x) = erf(x)", lambda x, p: scalar_function("erf", x), min_opset=9,
    polynomial=False, flops_per_element=8, hints=EnumHints(enumerable=False),
)
