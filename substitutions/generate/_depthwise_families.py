"""Rules of `affine_as_depthwise_conv` and `scale_as_depthwise_conv`: a constant scale (and
shift) of a 4-d tensor as a 1x1 depthwise conv.

``x * s + t = conv(x, ones(C, 1, 1, 1) * s, ones(C) * t; group C)`` for s and t one value or
one per channel of x. The conv computes the same values; what changes is how ORT runs it.
ORT keeps a CPU model in its blocked NCHWc layout only through convs, pools and a few
elementwise ops of two blocked tensors: a Mul or Add by a constant is run in plain NCHW,
with a reorder out of the blocked layout before it and one back after, four passes over
the tensor where the depthwise conv makes one. After a conv (directly, or through other
constant scales and shifts) ORT folds the constant into the conv's weights instead, so the
rules leave those alone (`after_linear`); the constant scales they take are the ones no
conv can absorb, PP-OCR's LearnableAffineBlock after an activation above all.

Measured by hand on top of taso's own output (interleaved, ORT 1.32 CPU, 2 threads):
PP-OCRv4 rec 1.11x (both paddle2onnx generations), det 1.08x, det (paddle2onnx 1.x) 1.03x.
The channel count is read from x at match time, which the axiom's configs cannot express
as one parametric rule: each rule is an instance of its validated axiom
(`taso.opspecs.axioms.conv`), with the axiom's configs as witnesses.
"""

from __future__ import annotations

from taso.opspecs import Exactness
from taso.opspecs.axioms.conv import AFFINE_CONFIGS
from taso.substitutions.generate._witness import axiom_rule, witness_json
from taso.substitutions.rule import ParamExpr, Pattern, PatternInput, PatternNode, Rule

_CHANNELS = "shape('x')[1]"


def _per_channel_or_one(name: str) -> str:
    return f"tuple(shape({name!r})) in ((), (1, {_CHANNELS}, 1, 1), ({_CHANNELS}, 1, 1))"


def constraints(*, shift: bool) -> tuple[str, ...]:
    """x is a 4-d tensor not fed by a conv ORT would fold the constants into, and the
    result does not feed only unpadded convs, which take the constants into their own weights
    (`cv-conv_affine_input`, free where this costs a pass); the scale (and the shift)
    constant, one value or one per channel."""
    names = ("s", "t") if shift else ("s",)
    out = "a" if shift else "m"
    return ("rank('x') == 4", "not is_const('x')", "not after_linear('x')",
            f"not feeds_unpadded_conv({out!r})",
            *(f"is_const({n!r})" for n in names), *(_per_channel_or_one(n) for n in names))


def _witness(*, shift: bool) -> str:
    configs = []
    for config in AFFINE_CONFIGS:
        shapes = {k: list(v) for k, v in config.shapes.items() if shift or k != "t"}
        configs.append((shapes, {}))
    return witness_json(configs)


def _target(*, shift: bool) -> Pattern:
    channels = ParamExpr(_CHANNELS)
    nodes = [
        PatternNode("o4", "ConstOnes", (), (("shape", ParamExpr(f"({_CHANNELS}, 1, 1, 1)")),)),
        PatternNode("s4", "Reshape", ("s",), (("shape", (-1, 1, 1, 1)),)),
        PatternNode("w", "Mul", ("o4", "s4")),
    ]
    if shift:
        nodes += [PatternNode("o1", "ConstOnes", (), (("shape", ParamExpr(f"({_CHANNELS},)")),)),
                  PatternNode("t1", "Reshape", ("t",), (("shape", (-1,)),)),
                  PatternNode("b", "Mul", ("o1", "t1"))]
    nodes.append(PatternNode("c", "Conv", ("x", "w", "b") if shift else ("x", "w"), (("group", channels),)))
    return Pattern(tuple(nodes))


def depthwise_affine_rules() -> list[Rule]:
    """x * s + t -> conv(x, ones * s, ones * t; group C)."""
    source = Pattern((PatternNode("m", "Mul", ("x", "s")), PatternNode("a", "Add", ("m", "t"))))
    return [axiom_rule("affine_as_depthwise_conv",
                       "x * s + t = conv(x, ones(C, 1, 1, 1) * s, ones(C) * t; group C)",
                       tuple(PatternInput(n) for n in ("x", "s", "t")), source, _target(shift=True),
                       (("a", "c"),), constraints(shift=True), Exactness.REASSOCIATES, _witness(shift=True))]


def depthwise_scale_rules() -> list[Rule]:
    """x * s -> conv(x, ones * s; group C)."""
    source = Pattern((PatternNode("m", "Mul", ("x", "s")),))
    return [axiom_rule("scale_as_depthwise_conv", "x * s = conv(x, ones(C, 1, 1, 1) * s; group C)",
                       tuple(PatternInput(n) for n in ("x", "s")), source, _target(shift=False),
                       (("m", "c"),), constraints(shift=False), Exactness.REASSOCIATES, _witness(shift=False))]
