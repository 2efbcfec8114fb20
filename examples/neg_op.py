"""Neg, an operator of your own: its spec and the axioms that give it meaning.

Written like the built-in spec modules (taso/opspecs/*.py) and axiom modules
(taso/opspecs/axioms/*.py). Made visible to taso and taso-gen by naming this module in
TASO_EXTRA_SPECS (with its folder on PYTHONPATH); see examples/add_an_operator.py.
"""

from __future__ import annotations

from taso.opspecs import unary_spec
from taso.opspecs.axioms import Axiom, cfg

SPEC = unary_spec("Neg", "Neg(x) = -x", lambda x, p: -x, min_opset=6)
"""ONNX mapping (op type Neg), shape inference (same shape), NumPy semantics (the oracle)
and the Z3 encoding (an uninterpreted function, defined by the axioms below)."""

_UNARY = (cfg({"x": (2, 3)}), cfg({"x": (1, 3, 2, 2)}), cfg({"x": (5,)}))

AXIOMS = (
    Axiom("neg_neg", "Neg(Neg(x)) = x", ("x",),
          lambda a, v, p: a("Neg", a("Neg", v["x"])),
          lambda a, v, p: v["x"], _UNARY),
    Axiom("neg_as_mul", "Neg(x) = x * (-1)", ("x",),
          lambda a, v, p: a("Neg", v["x"]),
          lambda a, v, p: a("Mul", v["x"], a("ConstFill", shape=(), value=-1.0)), _UNARY),
)
"""Checked numerically against SPEC's NumPy semantics and symbolically by `taso-gen check-axioms`."""
