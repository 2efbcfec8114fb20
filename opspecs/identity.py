"""Identity: returns its input."""

import dataclasses

from taso.opspecs._elementwise import unary_spec
from taso.opspecs._types import EnumHints

SPEC = dataclasses.replace(unary_spec(
    "Identity", "Identity(x) = x", lambda x, p: x.copy(), min_opset=1,
    flops_per_element=0, hints=EnumHints(enumerable=False),
), element_moving=True)
