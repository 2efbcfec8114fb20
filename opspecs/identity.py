"""Identity: returns its input."""

from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints

SPEC = unary_spec(
    "Identity", "Identity(x) = x", lambda x, p: x.copy(), min_opset=1,
    flops_per_element=0, hints=EnumHints(enumerable=False),
)
