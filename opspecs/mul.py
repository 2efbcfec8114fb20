"""Mul: broadcasting elementwise product (TASO's ewmul; per-channel scaling with constants)."""

from taso.opspecs._elementwise import binary_spec

SPEC = binary_spec("Mul", "Mul(a, b) = a * b  (NumPy broadcasting)", lambda a, b: a * b, commutative=True)
