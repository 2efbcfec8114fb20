"""Add: broadcasting elementwise sum (TASO's ewadd)."""

from taso.opspecs._elementwise import binary_spec

SPEC = binary_spec("Add", "Add(a, b) = a + b  (NumPy broadcasting)", lambda a, b: a + b, commutative=True)
