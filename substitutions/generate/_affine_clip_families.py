"""Rules of the affine-as-clip axioms (`taso.opspecs.axioms.activation`): a positive scalar
affine after a Relu is a Clip whose lower bound is the shift,

    relu(y) * s + t = clip(y * s + t; min t)     (s, t scalar constants, 0 < s <= f32 max),

since max(y, 0) * s + t = max(y * s + t, t) for s > 0. The Clip's bound is the value of the
constant t, computed at match time (``value('t')``), so the rules are written here rather than
read off the axioms' configs (where t is a tensor variable).

* ``relu_affine_as_clip``: the affine alone (bit-exact: rounding is monotone, so
  fl(max(y, 0) * s) + t and max(fl(y * s) + t, t) agree).
* ``conv_relu_affine_as_clip``: a Conv with a bias before the Relu takes the affine in one
  step, ``conv(x, w * s, b * s + t)``, so no Mul or Add is left between the conv and the Clip.
* ``conv_bn_relu_affine_as_clip``: a bias-free Conv then BatchNormalization (paddle2onnx's
  ConvBNLayer) folds BN and affine into the conv in one step.

The sign of s is a match-time constraint: an uninterpreted formula cannot carry it, so the
prover's bank leaves these axioms out (`VALUE_DEPENDENT`), and each rule is an instance of
its axiom, validated with s positive (`validate_axiom`; false for s <= 0). Folded constants
round: the conv forms reassociate.

Why: PP-HGNetV2 (paddle2onnx, opset 10) ends 30 blocks with Conv -> BN -> Relu -> Mul(s) ->
Add(t). ORT fuses the Clip into the conv and keeps its blocked layout, where the scalar
Mul/Add after the Relu were reorders and passes of their own: 1.14-1.16x over the previous
taso output by hand (interleaved, 2 threads).
"""

from __future__ import annotations

from taso.opspecs import Exactness
from taso.substitutions.generate._converter_forms import F32_MAX
from taso.substitutions.generate._witness import axiom_rule, witness_json
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Rule,
)

AFFINE = ("is_const('s')", "shape('s') == ()", f"0 < value('s') <= {F32_MAX!r}",
          "is_const('t')", "shape('t') == ()", f"-{F32_MAX!r} <= value('t') <= {F32_MAX!r}")
"""s a finite positive scalar constant, t a finite scalar constant (a NaN fails both)."""
CONV = ("rank('x') == 4", "rank('w') == 4", "is_const('w')")
_CONV_VARS = ("auto_pad", "dilations", "group", "pads", "strides")
"""Passed through; a fused activation (internal) must be none: it is left at its default."""
_BOUND = (("min", ParamExpr("value('t')")),)
_CONV_BINDINGS = {"auto_pad": "NOTSET", "dilations": [1, 1], "group": 1, "pads": [0, 0, 0, 0], "strides": [1, 1]}


def _conv_params() -> tuple[tuple[str, ParamVar], ...]:
    return tuple((k, ParamVar(k)) for k in _CONV_VARS)


def _affine_source(first: str, head: tuple[PatternNode, ...]) -> Pattern:
    """`head` (ending in node `first`), then relu, * s, + t: nodes r, m, a."""
    return Pattern((*head, PatternNode("r", "Relu", (first,)), PatternNode("m", "Mul", ("r", "s")),
                    PatternNode("a", "Add", ("m", "t"))))


def _rule(name: str, math: str, inputs: tuple[str, ...], source: Pattern, target: Pattern,
          constraints: tuple[str, ...], exactness: Exactness, witness: str) -> Rule:
    return axiom_rule(name, math, tuple(PatternInput(n) for n in inputs), source, target, (("a", "c"),),
                      (*constraints, *AFFINE), exactness, witness)


def affine_rules() -> list[Rule]:
    """relu(y) * s + t -> clip(y * s + t; min t)."""
    target = Pattern((PatternNode("m", "Mul", ("y", "s")), PatternNode("a", "Add", ("m", "t")),
                      PatternNode("c", "Clip", ("a",), _BOUND)))
    witness = witness_json([({"y": [1, 3, 2, 2], "s": [], "t": []}, {}), ({"y": [2, 5], "s": [], "t": []}, {}),
                        ({"y": [7], "s": [], "t": []}, {})], ("s",))
    return [_rule("relu_affine_as_clip", "relu(y) * s + t = clip(y * s + t; min t)  (s > 0, t scalars)",
                  ("y", "s", "t"), _affine_source("y", ()), target, (), Exactness.EXACT, witness)]


def _conv_configs(extra: dict[str, list[int]] | None = None) -> list[tuple[dict, dict]]:
    """Plain, strided and padded, grouped; `extra` shapes per output channel (M,)."""
    out = []
    for x, w, bound in (([1, 2, 3, 3], [3, 2, 1, 1], {}),
                        ([1, 2, 5, 5], [2, 2, 3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
                        ([1, 4, 4, 4], [4, 1, 3, 3], {"group": 4, "pads": [1, 0, 1, 2], "dilations": [1, 2]})):
        per_channel = {k: [w[0]] for k in (extra or {})}
        out.append(({"x": x, "w": w, **per_channel, "s": [], "t": []}, {**_CONV_BINDINGS, **bound}))
    return out


def conv_rules() -> list[Rule]:
    """relu(conv(x, w, b)) * s + t -> clip(conv(x, w * s, b * s + t); min t)."""
    head = (PatternNode("n", "Conv", ("x", "w", "b"), _conv_params()),)
    target = Pattern((PatternNode("ws", "Mul", ("w", "s")), PatternNode("bs", "Mul", ("b", "s")),
                      PatternNode("bt", "Add", ("bs", "t")),
                      PatternNode("n", "Conv", ("x", "ws", "bt"), _conv_params()),
                      PatternNode("c", "Clip", ("n",), _BOUND)))
    constraints = (*CONV, "is_const('b')", "rank('b') == 1")
    witness = witness_json(_conv_configs({"b": []}), ("s",))
    return [_rule("conv_relu_affine_as_clip",
                  "relu(conv(x, w, b)) * s + t = clip(conv(x, w * s, b * s + t); min t)  (s > 0, t scalars)",
                  ("x", "w", "b", "s", "t"), _affine_source("n", head), target, constraints,
                  Exactness.REASSOCIATES, witness)]


def conv_bn_rules() -> list[Rule]:
    """relu(bn(conv(x, w))) * s + t -> clip(conv(x, w * k * s, (beta - mean * k) * s + t); min t),
    k = g / sqrt(var + eps)."""
    stats = ("g", "beta", "mean", "var")
    bn_params = (("epsilon", ParamVar("epsilon")), ("momentum", ParamVar("momentum")))
    head = (PatternNode("n", "Conv", ("x", "w"), _conv_params()),
            PatternNode("bn", "BatchNormalization", ("n", *stats), bn_params))
    target = Pattern((
        PatternNode("eps", "ConstFill", (), (("shape", ()), ("value", ParamVar("epsilon")))),
        PatternNode("ve", "Add", ("var", "eps")), PatternNode("sd", "Sqrt", ("ve",)),
        PatternNode("k", "Div", ("g", "sd")), PatternNode("ks", "Mul", ("k", "s")),
        PatternNode("k4", "Reshape", ("ks",), (("shape", (-1, 1, 1, 1)),)),
        PatternNode("wk", "Mul", ("w", "k4")),
        PatternNode("mk", "Mul", ("mean", "k")), PatternNode("sh", "Sub", ("beta", "mk")),
        PatternNode("ss", "Mul", ("sh", "s")), PatternNode("bt", "Add", ("ss", "t")),
        PatternNode("n", "Conv", ("x", "wk", "bt"), _conv_params()),
        PatternNode("c", "Clip", ("n",), _BOUND)))
    constraints = (*CONV, *(f"is_const({n!r})" for n in stats), *(f"shape({n!r}) == (shape('w')[0],)" for n in stats))
    configs = [(shapes, {**bound, "epsilon": eps, "momentum": 0.9})
               for (shapes, bound), eps in zip(_conv_configs(dict.fromkeys(stats, [])), (1e-5, 1e-3, 0.0), strict=True)]
    witness = witness_json(configs, ("s", "var"))
    return [_rule("conv_bn_relu_affine_as_clip",
                  "relu(bn(conv(x, w); g, beta, mean, var)) * s + t = clip(conv(x, w * k * s, "
                  "(beta - mean * k) * s + t); min t), k = g / sqrt(var + eps)  (s > 0, t scalars)",
                  ("x", "w", *stats, "s", "t"), _affine_source("bn", head), target, constraints,
                  Exactness.REASSOCIATES, witness)]
