"""Axioms whose rules need a parameter computed at match time.

`conv_regroup` (``conv(x, w; g) = conv(x, regroup(w; g, k); g/k)``) cannot be read off
its configs as one parametric rule: ``k`` appears on the target side only, so matching
could not bind it, and the configs would give rules for their own groups and pads only.
Instead it gives one rule per target width (channels per group): a grouped conv whose
``c = shape(w)[1]`` input channels per group divide the width is regrouped with
``k = width // c``, computed at match time as the target expressions ``width // c`` and
``group // k``; strides, pads, dilations and the group count stay parameter variables.
Depthwise convs (``c = 1``) get rules of their own, so that a sweep over a model's
narrow groups is judged apart from one over its depthwise convs. Each rule is an
instance of the validated axiom (method "axiom", as every axiom-derived rule) and
carries witness configs that exercise it.

Why widths 8, 16 and 32: ORT keeps convs in its blocked NCHWc layout when their channels
per group fill its blocks, 16 floats with AVX-512 and 8 with AVX2; ResNeXt's 4- and
8-channel groups do not on AVX-512, its 4-channel groups do not on AVX2.
Measured on ResNeXt-50 (2 threads, ORT 1.31, AVX-512): widening its 4- and 8-channel
groups to 16 made the whole model 1.11x faster, to 32 1.08x; depthwise convs widened to
16 were 1.2-1.3x slower on MobileNetV3 and NasNet. On an AVX2 machine (ORT 1.32) widening
the 4-channel groups to 8 measured 1.03x. The search measures every candidate; these
rules only offer the choice.
"""

from __future__ import annotations

import json

from taso.opspecs import Exactness
from taso.opspecs.axioms import Axiom, all_axioms
from taso.opspecs.axioms.conv import SPLIT_ACTIVATIONS
from taso.substitutions.generate._affine_clip_families import (
    affine_rules,
    conv_bn_rules,
    conv_rules,
)
from taso.substitutions.generate._depthwise_families import (
    depthwise_affine_rules,
    depthwise_scale_rules,
)
from taso.substitutions.generate._gating_families import channel_gate_rules, reduce_mean_rules
from taso.substitutions.generate._reparam_families import (
    identity_merge_rules,
    identity_sub_rules,
    merge_identity_rules,
    merge_parallel_rules,
)
from taso.substitutions.generate._softmax_families import softmax_transpose_rules
from taso.substitutions.generate._transpose_families import (
    transpose_const_rules,
    transpose_layer_scale_rules,
    transpose_two_const_rules,
    unit_layer_scale_rules,
)
from taso.substitutions.generate._witness import guarded
from taso.substitutions.rule import (
    ParamExpr,
    ParamVar,
    Pattern,
    PatternInput,
    PatternNode,
    Proof,
    ProofStatus,
    Rule,
)

REGROUP_WIDTHS = (8, 16, 32)
"""Channels per group that regrouping widens grouped convs to: ORT's NCHWc block is 8
channels with AVX2 and 16 with AVX-512, and a grouped conv is blocked only when its
channels per group are a multiple of it (torchvision ResNeXt-50's first stage, 4 per group:
on an AVX2 machine, widened to 8 by hand 1.04x, to 16 1.02x)."""

DEPTHWISE_REGROUP_WIDTHS = (16, 32)
"""Channels per group that regrouping widens depthwise convs to (not 8: a depthwise conv is
already blocked where its channels are a multiple of the block, and to 8 multiplies its
work by 8)."""

_CONV_VARS = ("activation", "auto_pad", "dilations", "pads", "strides")


def _conv_params(group: object) -> tuple[tuple[str, object], ...]:
    return tuple(sorted([(k, ParamVar(k)) for k in _CONV_VARS] + [("group", group)]))


def _witness(width: int, channels: tuple[int, ...], *, bias: bool = False) -> list[dict]:
    """Small configs: several filters per group, strided depthwise-like, dilated with a
    fused Relu; one per input-channels-per-group value in `channels` (cycling the kinds)."""

    def config(kind: int, per_group: int) -> dict:
        factor = width // per_group
        groups, filters, kernel, size, extra = (
            (2 * factor, 2, 3, 5, {"pads": [1, 1, 1, 1]}),
            (factor, 1, 3, 6, {"strides": [2, 2], "pads": [1, 0, 1, 0]}),
            (3 * factor, 1, 2, 5, {"dilations": [2, 2], "activation": "relu"}),
        )[kind % 3]
        shapes = {"x": [1, groups * per_group, size, size], "w": [groups * filters, per_group, kernel, kernel],
                  **({"b": [groups * filters]} if bias else {})}
        bound = {"activation": "none", "auto_pad": "NOTSET", "dilations": [1, 1], "pads": [0, 0, 0, 0],
                 "strides": [1, 1], "group": groups, **extra}
        return {"shapes": shapes, "bindings": bound, "positive": [], "values": {}}

    return [config(kind, c) for kind, c in enumerate(channels)] + (
        [config(kind, channels[0]) for kind in range(1, 3)] if len(channels) == 1 else [])


def regroup_rule(width: int, *, depthwise: bool, bias: bool = False) -> Rule:
    """Grouped convs whose channels per group divide `width` -> groups of `width` channels
    (with a bias input when `bias`: each output channel keeps its bias)."""
    factor = f"({width} // shape('w')[1])"
    operands = ("x", "w", "b") if bias else ("x", "w")
    source = Pattern((PatternNode("n0", "Conv", operands, _conv_params(ParamVar("group"))),))
    target = Pattern((
        PatternNode("n0", "Regroup", ("w",), (("factor", ParamExpr(factor)), ("group", ParamVar("group")))),
        PatternNode("n1", "Conv", ("x", "n0", *operands[2:]), _conv_params(ParamExpr(f"group // {factor}"))),
    ))
    kind = "shape('w')[1] == 1" if depthwise else f"1 < shape('w')[1] < {width}"
    constraints = ("rank('x') == 4", "rank('w') == 4", "is_const('w')", kind,
                   f"{width} % shape('w')[1] == 0", f"group % {factor} == 0",
                   *(("rank('b') == 1",) if bias else ()))
    channels = (1,) if depthwise else tuple(c for c in (2, 4, 8, 16) if c < width)
    axiom = "conv_regroup_bias" if bias else "conv_regroup"
    provenance = (("axiom", axiom), ("method", "axiom"),
                  ("witness", json.dumps(_witness(width, channels, bias=bias), sort_keys=True)))
    name = f"ax-{axiom}{'_depthwise' if depthwise else ''}-to{width}"
    operand_text = ", b" if bias else ""
    return Rule(name, f"conv(x, w{operand_text}; g) = conv(x, regroup(w; g, k){operand_text}; g/k), "
                f"k = {width} / channels per group{' (depthwise)' if depthwise else ''}",
                tuple(PatternInput(n) for n in operands), source, target, (("n0", "n1"),),
                constraints, Exactness.EXACT,
                Proof(ProofStatus.PROVED, "axiom", "", 0.0, (axiom,), 0),
                tuple(sorted(provenance))).validate()


def regroup_rules(*, bias: bool = False) -> list[Rule]:
    """Narrow groups widened to every width in `REGROUP_WIDTHS`, depthwise convs to every
    width in `DEPTHWISE_REGROUP_WIDTHS`."""
    return [guarded(regroup_rule(width, depthwise=d, bias=bias))
            for d in (False, True) for width in (DEPTHWISE_REGROUP_WIDTHS if d else REGROUP_WIDTHS)]


def _pad_witness(bias: bool) -> list[dict]:
    """Spatial zero pads, symmetric and not, into plain, strided, grouped and dilated convs."""
    out = []
    for x, w, padding, extra in (
        ([1, 2, 3, 3], [2, 2, 3, 3], [0, 0, 1, 1, 0, 0, 1, 1], {}),
        ([1, 2, 5, 4], [3, 2, 3, 3], [0, 0, 0, 1, 0, 0, 1, 1], {"strides": [2, 2]}),
        ([1, 4, 4, 4], [4, 1, 3, 3], [0, 0, 2, 0, 0, 0, 1, 2], {"group": 4, "dilations": [1, 2]}),
    ):
        shapes = {"x": x, "w": w, **({"b": [w[0]]} if bias else {})}
        bound = {"activation": "none", "auto_pad": "NOTSET", "dilations": [1, 1], "pads": [0, 0, 0, 0],
                 "strides": [1, 1], "group": 1, "padding": padding, **extra}
        out.append({"shapes": shapes, "bindings": bound, "positive": [], "values": {}})
    return out


def pad_into_conv_rule(*, bias: bool) -> Rule:
    """conv(pad(x, zero spatial pads), w[, b]; pads 0) = conv(x, w[, b]; pads = the spatial pads):
    the explicit Pad tf2onnx writes before a strided or SAME conv, as the conv's own padding."""
    operands = ("w", "b") if bias else ("w",)
    conv_vars = tuple(sorted([(k, ParamVar(k)) for k in _CONV_VARS] + [("group", ParamVar("group"))]))
    spatial = "(padding[2], padding[3], padding[6], padding[7])"
    target_params = tuple(sorted([(k, ParamVar(k)) for k in _CONV_VARS if k != "pads"]
                                 + [("group", ParamVar("group")), ("pads", ParamExpr(spatial))]))
    source = Pattern((PatternNode("n0", "Pad", ("x",), (("pads", ParamVar("padding")),)),
                      PatternNode("n1", "Conv", ("n0", *operands), conv_vars)))
    target = Pattern((PatternNode("n1", "Conv", ("x", *operands), target_params),))
    constraints = ("rank('x') == 4", "len(padding) == 8", "padding[0] == padding[1] == padding[4] == padding[5] == 0",
                   "tuple(pads) == (0, 0, 0, 0)", "auto_pad == 'NOTSET'")
    provenance = (("axiom", "conv_pad_into_pads"), ("method", "axiom"),
                  ("witness", json.dumps(_pad_witness(bias), sort_keys=True)))
    return Rule(f"ax-conv_pad_into_pads{'_bias' if bias else ''}",
                f"conv(pad(x, zero spatial pads q), w{', b' if bias else ''}; pads 0) = conv(x, w{', b' if bias else ''}; pads q)",
                tuple(PatternInput(n) for n in ("x", *operands)), source, target, (("n1", "n1"),),
                constraints, Exactness.EXACT,
                Proof(ProofStatus.PROVED, "axiom", "", 0.0, ("conv_pad_into_pads",), 0),
                tuple(sorted(provenance))).validate()


def pad_into_conv_rules() -> list[Rule]:
    return [guarded(pad_into_conv_rule(bias=b)) for b in (False, True)]


def _activation_nodes(kind: str, value: str, prefix: str) -> tuple[list[PatternNode], str]:
    """Pattern nodes of `activation(value)` (see `taso.opspecs.axioms.conv.activation`)."""
    if kind == "relu":
        return [PatternNode(f"{prefix}r", "Relu", (value,), ())], f"{prefix}r"
    if kind == "silu":
        return [PatternNode(f"{prefix}s", "Sigmoid", (value,), ()),
                PatternNode(f"{prefix}m", "Mul", (value, f"{prefix}s"), ())], f"{prefix}m"
    return [], value


def split_output_rule(kind: str, *, bias: bool) -> Rule:
    """A Conv (group 1) whose activated output is split in two along its channels, as two Convs."""
    name = "conv_bias_split_output" if bias else "conv_split_output"
    weights = ("w", "b") if bias else ("w",)
    params = tuple(sorted([(k, ParamVar(k)) for k in _CONV_VARS] + [("group", 1)]))
    split = (("axis", 1), ("split", ParamVar("split")))
    chain, last = _activation_nodes(kind, "n0", "a")
    source = Pattern((PatternNode("n0", "Conv", ("x", *weights), params), *chain, PatternNode("n9", "Split", (last,), split)))
    target: list[PatternNode] = [PatternNode(f"s{w}", "Split", (w,), (("axis", 0), ("split", ParamVar("split"))))
                                 for w in weights]
    outputs = []
    for i in range(2):
        target.append(PatternNode(f"c{i}", "Conv", ("x", *(f"s{w}:{i}" for w in weights)), params))
        nodes, out = _activation_nodes(kind, f"c{i}", f"a{i}")
        target += nodes
        outputs.append((f"n9:{i}", out))
    constraints = ("rank('x') == 4", "rank('w') == 4", *(f"is_const({w!r})" for w in weights), "len(split) == 2")
    axiom = next(a for a in all_axioms() if a.name == name)
    witness = _config_witness(axiom)  # every config's shapes and parameters, with this rule's activation
    provenance = (("axiom", name), ("method", "axiom"), ("witness", json.dumps(witness, sort_keys=True)))
    return Rule(f"ax-{name}-{kind}", f"{axiom.math}, act = {kind}",
                tuple(PatternInput(n) for n in ("x", *weights)), Pattern(tuple(source.nodes)), Pattern(tuple(target)),
                tuple(outputs), constraints, Exactness.EXACT,
                Proof(ProofStatus.PROVED, "axiom", "", 0.0, (name,), 0), tuple(sorted(provenance))).validate()


def _config_witness(axiom: Axiom) -> list[dict]:
    """The axiom's configs as rule witness configs (parameters bound, defaults written out)."""
    out = []
    for config in axiom.configs:
        bindings = {"activation": "none", "auto_pad": "NOTSET", "dilations": [1, 1], "pads": [0, 0, 0, 0],
                    "strides": [1, 1]}
        bindings.update({k: list(v) if isinstance(v, tuple) else v for k, v in config.params.items() if k != "act"})
        out.append({"shapes": {k: list(v) for k, v in config.shapes.items()}, "bindings": bindings,
                    "positive": [], "values": {}})
    return out


def split_output_rules(*, bias: bool) -> list[Rule]:
    return [guarded(split_output_rule(kind, bias=bias)) for kind in SPLIT_ACTIVATIONS]


FAMILIES = {
    "conv_regroup": regroup_rules,
    "conv_regroup_bias": lambda: regroup_rules(bias=True),
    "conv_pad_into_pads": pad_into_conv_rules,
    "conv_split_output": lambda: split_output_rules(bias=False),
    "conv_bias_split_output": lambda: split_output_rules(bias=True),
    "reduce_mean_spatial_as_gap": reduce_mean_rules,
    "mul_channel_gate_upsampled": channel_gate_rules,
    "relu_affine_as_clip": affine_rules,
    "conv_relu_affine_as_clip": conv_rules,
    "conv_bn_relu_affine_as_clip": conv_bn_rules,
    "softmax_transpose": softmax_transpose_rules,
    "conv_bias_merge_parallel": merge_parallel_rules,
    "conv_bias_bn_identity_merge": identity_merge_rules,
    "conv_bias_bn_identity_sub": identity_sub_rules,
    "conv_bias_merge_parallel_identity": merge_identity_rules,
    "affine_as_depthwise_conv": depthwise_affine_rules,
    "scale_as_depthwise_conv": depthwise_scale_rules,
    "transpose_matmul_bias_mul_columns": transpose_layer_scale_rules,
    "matmul_bias_mul_unit_columns": unit_layer_scale_rules,
    **{f"transpose_{op.lower()}_const{'_scalar' if scalar else ''}":
       (lambda op=op, scalar=scalar: transpose_const_rules(op, scalar=scalar))
       for op in ("Add", "Mul") for scalar in (False, True)},
    **{f"transpose_{first.lower()}_{second.lower()}_const":
       (lambda first=first, second=second: transpose_two_const_rules(first, second))
       for first in ("Add", "Mul") for second in ("Add", "Mul")},
}
"""Axiom name -> the builder of its rules (instead of reading rules off its configs)."""
