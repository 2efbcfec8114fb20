"""Axioms of the elementwise ops: (assoc/comm/distrib of Add and Mul, scalar-mul movement,
Sub/Div rewritten with Add/Mul, identities with constants)."""

from __future__ import annotations

from taso.opspecs._types import Exactness
from taso.opspecs.axioms._core import Axiom, cfg

S2 = {"x": (2, 3), "y": (2, 3), "z": (2, 3)}
S_BCAST = {"x": (2, 3, 4), "y": (3, 1), "z": (4,)}
S_CHAN = {"x": (1, 3, 2, 2), "y": (1, 3, 2, 2), "z": (3, 1, 1)}
S_BIAS = {"x": (2, 4, 3), "y": (3,), "z": (2, 4, 3)}  # a residual: (h @ W + b) + r
S_SCALAR = {"x": (2, 3), "y": (3, 4), "s": (), "t": ()}
S_SCALAR3 = {"x": (2, 2, 3), "y": (2, 3, 2), "s": (), "t": ()}
S_SCALAR1 = {"x": (1, 4), "y": (4, 1), "s": (), "t": ()}


def _xyz(*extra: dict) -> tuple:
    return (cfg(S2), cfg(S_BCAST), cfg(S_CHAN), *(cfg(e) for e in extra))


def _scalar() -> tuple:
    return (cfg(S_SCALAR), cfg(S_SCALAR3), cfg(S_SCALAR1))


AXIOMS = (
    Axiom("add_comm", "x + y = y + x", ("x", "y"),
          lambda a, v, p: a("Add", v["x"], v["y"]),
          lambda a, v, p: a("Add", v["y"], v["x"]), _xyz()),
    Axiom("add_assoc", "(x + y) + z = x + (y + z)", ("x", "y", "z"),
          lambda a, v, p: a("Add", a("Add", v["x"], v["y"]), v["z"]),
          lambda a, v, p: a("Add", v["x"], a("Add", v["y"], v["z"])), _xyz(),
          exactness=Exactness.REASSOCIATES),
    # its rules move a constant y past a computed z (`RULE_CONSTRAINTS`): a residual's bias
    # added last, where ORT's CPU SkipLayerNormalization fusion (slower than Add +
    # LayerNormalization) does not match, whichever way the converter ordered the operands
    Axiom("add_right_comm", "(x + y) + z = (x + z) + y", ("x", "y", "z"),
          lambda a, v, p: a("Add", a("Add", v["x"], v["y"]), v["z"]),
          lambda a, v, p: a("Add", a("Add", v["x"], v["z"]), v["y"]), _xyz(S_BIAS),
          exactness=Exactness.REASSOCIATES),
    Axiom("mul_comm", "x * y = y * x", ("x", "y"),
          lambda a, v, p: a("Mul", v["x"], v["y"]),
          lambda a, v, p: a("Mul", v["y"], v["x"]), _xyz()),
    Axiom("mul_assoc", "(x * y) * z = x * (y * z)", ("x", "y", "z"),
          lambda a, v, p: a("Mul", a("Mul", v["x"], v["y"]), v["z"]),
          lambda a, v, p: a("Mul", v["x"], a("Mul", v["y"], v["z"])), _xyz(),
          exactness=Exactness.REASSOCIATES),
    Axiom("mul_add_distrib", "(x + y) * z = x*z + y*z", ("x", "y", "z"),
          lambda a, v, p: a("Mul", a("Add", v["x"], v["y"]), v["z"]),
          lambda a, v, p: a("Add", a("Mul", v["x"], v["z"]), a("Mul", v["y"], v["z"])), _xyz(),
          exactness=Exactness.REASSOCIATES),
    Axiom("sub_as_add", "x - y = x + y * (-1)", ("x", "y"),
          lambda a, v, p: a("Sub", v["x"], v["y"]),
          lambda a, v, p: a("Add", v["x"], a("Mul", v["y"], a("ConstFill", shape=(), value=-1.0))),
          _xyz()),
    Axiom("div_as_mul", "x / y = x * (1 / y)", ("x", "y"),
          lambda a, v, p: a("Div", v["x"], v["y"]),
          lambda a, v, p: a("Mul", v["x"], a("Div", a("ConstFill", shape=(), value=1.0), v["y"])),
          _xyz(), positive=frozenset({"y"}), exactness=Exactness.REASSOCIATES),
    Axiom("mul_const_ones", "x * ones = x  (ones no larger than x)", ("x",),
          lambda a, v, p: a("Mul", v["x"], a("ConstOnes", shape=p["ones"])),
          lambda a, v, p: v["x"],
          (cfg({"x": (2, 3)}, ones=(2, 3)), cfg({"x": (1, 3, 2, 2)}, ones=(3, 1, 1)),
           cfg({"x": (4,)}, ones=())),
          condition=lambda s, p: len(p["ones"]) <= len(s["x"])),  # type: ignore[arg-type]
    Axiom("scalar_mul_is_mul", "ScalarMul(x, s) = x * s", ("x", "s"),
          lambda a, v, p: a("ScalarMul", v["x"], v["s"]),
          lambda a, v, p: a("Mul", v["x"], v["s"]), _scalar()),
    Axiom("scalar_mul_assoc", "smul(smul(x, s), t) = smul(x, s * t)", ("x", "s", "t"),
          lambda a, v, p: a("ScalarMul", a("ScalarMul", v["x"], v["s"]), v["t"]),
          lambda a, v, p: a("ScalarMul", v["x"], a("Mul", v["s"], v["t"])), _scalar(),
          exactness=Exactness.REASSOCIATES),
    Axiom("scalar_mul_add", "smul(x + y, s) = smul(x, s) + smul(y, s)", ("x", "y", "s"),
          lambda a, v, p: a("ScalarMul", a("Add", v["x"], v["y"]), v["s"]),
          lambda a, v, p: a("Add", a("ScalarMul", v["x"], v["s"]), a("ScalarMul", v["y"], v["s"])),
          (cfg({"x": (2, 3), "y": (2, 3), "s": ()}), cfg({"x": (2, 3), "y": (3,), "s": ()}),
           cfg({"x": (1, 2, 2, 2), "y": (1, 2, 2, 2), "s": ()}))),
    Axiom("scalar_mul_matmul", "smul(x @ y, s) = x @ smul(y, s)", ("x", "y", "s"),
          lambda a, v, p: a("ScalarMul", a("MatMul", v["x"], v["y"]), v["s"]),
          lambda a, v, p: a("MatMul", v["x"], a("ScalarMul", v["y"], v["s"])), _scalar(),
          exactness=Exactness.REASSOCIATES),
    Axiom("identity_elim", "Identity(x) = x", ("x",),
          lambda a, v, p: a("Identity", v["x"]),
          lambda a, v, p: v["x"], (cfg({"x": (2,)}), cfg({"x": (2, 3)}), cfg({"x": (1, 2, 2, 2)}))),
)
