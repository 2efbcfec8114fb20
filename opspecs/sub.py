"""Sub: broadcasting elementwise difference."""

from taso.opspecs._elementwise import binary_spec

SPEC = binary_spec("Sub", "Sub(a, b) = a - b  (NumPy broadcasting)", lambda a, b: a - b)
