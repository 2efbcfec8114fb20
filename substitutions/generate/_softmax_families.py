"""Rules of `softmax_transpose` (`taso.opspecs.axioms.softmax`): one rule each way for every
permutation and axis, the Softmax's new axis computed at match time.

Read off the axiom's configs, the rules would hold only for the configs' own permutations
and axes (the axis on the other side is derived from both). Here both stay parameter
variables and the mapped axis is a target expression:

* forward, ``softmax(transpose(x, p); a) -> transpose(softmax(x; p[a]), p)``;
* reverse, ``transpose(softmax(x; b), p) -> softmax(transpose(x, p); a)`` with ``p[a] = b``.

A Transpose with the default (reversed) permutation binds no tuple and is left alone.
"""

from __future__ import annotations

import json

from taso.opspecs import Exactness
from taso.opspecs.axioms import find_axiom
from taso.opspecs.axioms.softmax import TRANSPOSED, mapped_axis
from taso.substitutions.generate._witness import axiom_rule
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Rule,
)

NAME = "softmax_transpose"
PERM = (("perm", ParamVar("perm")),)
CONSTRAINTS = ("len(perm) == rank('x')", "-rank('x') <= axis < rank('x')")
FORWARD_AXIS = ParamExpr("perm[axis % len(perm)]")
REVERSE_AXIS = ParamExpr("min(i for i in range(len(perm)) if perm[i] == axis % len(perm))")


def _witness(*, reverse: bool) -> str:
    """The axiom's configs; the reverse rule's Softmax axis is the axiom's inner one."""
    out = []
    for config in TRANSPOSED:
        params = dict(config.params)
        axis = mapped_axis(config.shapes, params)["inner"] if reverse else params["axis"]
        out.append({"shapes": {k: list(v) for k, v in config.shapes.items()},
                    "bindings": {"perm": list(params["perm"]), "axis": axis},
                    "positive": [], "values": {}})
    return json.dumps(out, sort_keys=True)


def _rule(suffix: str, math: str, source: Pattern, target: Pattern, *, reverse: bool) -> Rule:
    return axiom_rule(NAME, math, (PatternInput("x"),), source, target, (("n1", "n1"),), CONSTRAINTS,
                      Exactness.EXACT, _witness(reverse=reverse), rule_id=f"ax-{NAME}{suffix}")


def softmax_transpose_rules() -> list[Rule]:
    """Both directions of the axiom, for any permutation and axis."""
    math = find_axiom(NAME).math
    forward = _rule(
        "", math,
        Pattern((PatternNode("n0", "Transpose", ("x",), PERM),
                 PatternNode("n1", "Softmax", ("n0",), (("axis", ParamVar("axis")),)))),
        Pattern((PatternNode("n0", "Softmax", ("x",), (("axis", FORWARD_AXIS),)),
                 PatternNode("n1", "Transpose", ("n0",), PERM))),
        reverse=False)
    reverse = _rule(
        "-rev", "transpose(softmax(x; p[a]), p) = softmax(transpose(x, p); a)",
        Pattern((PatternNode("n0", "Softmax", ("x",), (("axis", ParamVar("axis")),)),
                 PatternNode("n1", "Transpose", ("n0",), PERM))),
        Pattern((PatternNode("n0", "Transpose", ("x",), PERM),
                 PatternNode("n1", "Softmax", ("n0",), (("axis", REVERSE_AXIS),)))),
        reverse=True)
    return [forward, reverse]
