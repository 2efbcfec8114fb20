"""Rules of `conv_bias_merge_parallel`: two convs of one input summed, as one conv.

``conv(x, w, b; pads) + conv(x, w2, b2; pads - m) = conv(x, w + enlarge(w2, k), b + b2; pads)``
when w2's kernel sits centred in w's (margins m on each side), with the same strides and
groups and dilation 1. This is the structural re-parameterization of RepVGG, MobileOne,
RepGhost and RepViT blocks (a 3x3 and a 1x1 branch of one input, each a conv with its
batch norm folded into the bias, as torch.onnx exports them): a model exported without
its `reparameterize()` call runs both branches. The pads relation and the kernel size are
match-time constraints and a target expression (read from the bound weights), which the
axiom's configs cannot express as one parametric rule; the rule is an instance of the
validated axiom (`taso.opspecs.axioms.conv`), with its configs as witnesses.

Measured (interleaved, ORT 1.32 CPU, 2 threads): timm ``repvgg_a0`` as exported, 22 such
sums, merged by hand 1.12x; timm's own full reparameterization (the identity branch too)
1.17x.

``conv_bias_bn_identity_merge`` takes that identity branch: a block whose input and output
channels agree adds a BatchNormalization of its input, ``bn(x) = conv(x, iconv(C, k, g) * s,
beta - mean * s)`` with s = g / sqrt(var + eps), so at stride 1, group 1 or depthwise, and
centred pads it joins the merged conv's weight and bias (RepVGG; MobileOne's depthwise blocks
and RepGhost's fusion batch norm are depthwise). ``conv_bias_bn_identity_sub`` subtracts it,
FastViT's RepMixer, ``x + gamma * (mixer(x) - norm(x))`` with norm a batch norm of x.
Measured in stop 46 (benchmarks/results/reparam_corpus_s46.md): FastViT-T8 1.25x, RepGhostNet-050
1.16x, MobileOne-S0 3.66x as exported by timm in training form.

``conv_bias_merge_parallel_identity`` takes RepViT's RepVggDw, ``bn(conv(x) + conv1(x) + x)``,
in one step: the parallel merge alone gains nothing there (ORT fuses the sum into the conv),
so the search stopped before the identity; merged at once, the batch norm after it folds.
RepViT-M0.9 1.17x (benchmarks/results/repvit_s46.md).
"""

from __future__ import annotations

from taso.opspecs import Exactness
from taso.opspecs.axioms import AxiomConfig
from taso.opspecs.axioms.conv import (
    IDENTITY_MERGE_CONFIGS,
    MERGE_IDENTITY_CONFIGS,
    MERGE_PARALLEL_CONFIGS,
    merge_parallel_params,
)
from taso.substitutions.generate._witness import axiom_rule, witness_json
from taso.substitutions.rule import ParamExpr, ParamVar, Pattern, PatternInput, PatternNode, Rule

_SHARED = ("activation", "auto_pad", "dilations", "group", "strides")
"""Conv parameters both convs must share (bound to one variable each)."""


def _conv(node_id: str, weights: tuple[str, str], pads: str) -> PatternNode:
    params = tuple((k, ParamVar(k)) for k in _SHARED) + (("pads", ParamVar(pads)),)
    return PatternNode(node_id, "Conv", ("x", *weights), params)


def _margin(dim: int) -> str:
    return f"(shape('w')[{dim}] - shape('w2')[{dim}]) // 2"


CONSTRAINTS = (
    "rank('x') == 4", "rank('w') == 4", "rank('w2') == 4", "rank('b') == 1", "rank('b2') == 1",
    "is_const('w')", "is_const('b')", "is_const('w2')", "is_const('b2')",
    "activation == 'none'", "auto_pad == 'NOTSET'", "tuple(dilations) == (1, 1)",
    "tuple(shape('w')[:2]) == tuple(shape('w2')[:2])",
    "shape('w2')[2] <= shape('w')[2]", "shape('w2')[3] <= shape('w')[3]",
    "(shape('w')[2] - shape('w2')[2]) % 2 == 0", "(shape('w')[3] - shape('w2')[3]) % 2 == 0",
    f"tuple(pads2) == (pads[0] - {_margin(2)}, pads[1] - {_margin(3)}, pads[2] - {_margin(2)}, "
    f"pads[3] - {_margin(3)})",
)
"""w2 centred in w: the smaller conv's pads are the larger's less the margins, so both
convs read the same windows of x; no fused activation (relu(a) + relu(b) is not a sum of
convs)."""


def _witness_config(config: AxiomConfig, **extra: object) -> tuple[dict, dict]:
    """A config's shapes and its conv bindings (no activation, no auto pad, dilation and stride
    1, group 1 and no pads unless the config says otherwise), with `extra` bindings."""
    bindings = {"activation": "none", "auto_pad": "NOTSET", "dilations": [1, 1], "strides": [1, 1], "group": 1,
                "pads": [0, 0, 0, 0], **{k: list(v) if isinstance(v, tuple) else v for k, v in config.params.items()},
                **extra}
    return {k: list(v) for k, v in config.shapes.items()}, bindings


def _parallel_witness(configs: tuple[AxiomConfig, ...]) -> str:
    """Configs of two parallel convs, the smaller one's pads bound as `pads2`."""
    return witness_json(_witness_config(c, pads2=list(merge_parallel_params(c.shapes, c.params)["small_pads"]))  # type: ignore[call-overload]
                        for c in configs)


def merge_parallel_rules() -> list[Rule]:
    """add(conv(x, w, b), conv(x, w2, b2)) -> conv(x, w + enlarge(w2), b + b2)."""
    source = Pattern((_conv("n0", ("w", "b"), "pads"), _conv("n1", ("w2", "b2"), "pads2"),
                      PatternNode("n2", "Add", ("n0", "n1"))))
    kernel = ParamExpr("(shape('w')[2], shape('w')[3])")
    target = Pattern((
        PatternNode("e", "Enlarge", ("w2",), (("kernel_shape", kernel),)),
        PatternNode("ws", "Add", ("w", "e")),
        PatternNode("bs", "Add", ("b", "b2")),
        _conv("c", ("ws", "bs"), "pads"),
    ))
    inputs = tuple(PatternInput(n) for n in ("x", "w", "b", "w2", "b2"))
    return [axiom_rule("conv_bias_merge_parallel",
                       "conv(x, w, b; pads) + conv(x, w2, b2; pads - m) = conv(x, w + enlarge(w2, k), b + b2; pads)",
                       inputs, source, target, (("n2", "c"),), CONSTRAINTS, Exactness.REASSOCIATES,
                       _parallel_witness(MERGE_PARALLEL_CONFIGS))]


_BN_STATS = ("g", "beta", "mean", "var")
IDENTITY_CONSTRAINTS = (
    "rank('x') == 4", "rank('w') == 4", "rank('b') == 1",
    "shape('w') in ((shape('x')[1], shape('x')[1], shape('w')[2], shape('w')[3]),"
    " (shape('x')[1], 1, shape('w')[2], shape('w')[3]))",
    "shape('w')[1] * group == shape('x')[1]", "shape('b') == (shape('w')[0],)",
    "is_const('w')", "is_const('b')", *(f"is_const({n!r})" for n in _BN_STATS),
    *(f"shape({n!r}) == (shape('w')[0],)" for n in _BN_STATS),
    "activation == 'none'", "auto_pad == 'NOTSET'", "tuple(dilations) == (1, 1)", "tuple(strides) == (1, 1)",
    "shape('w')[2] % 2 == 1", "shape('w')[3] % 2 == 1",
    "tuple(pads) == (shape('w')[2] // 2, shape('w')[3] // 2, shape('w')[2] // 2, shape('w')[3] // 2)",
)
"""C to C channels, group 1 or depthwise (group C), at stride 1, and an odd kernel with
centred pads: the output pixel (i, j) of channel m is the window centred on input pixel
(i, j), where the identity kernel reads channel m of x. (Written so that the refuter's
sampler derives w, b and the statistics from x's channels.)"""


def _identity_witness() -> str:
    return witness_json((_witness_config(c, momentum=0.9) for c in IDENTITY_MERGE_CONFIGS), ("var",))


def _identity_rule(op: str) -> Rule:
    """op(conv(x, w, b), bn(x)) -> conv(x, w op iconv(C, k, group) * s, b op (beta - mean * s))."""
    bn_params = (("epsilon", ParamVar("epsilon")), ("momentum", ParamVar("momentum")))
    source = Pattern((_conv("n0", ("w", "b"), "pads"),
                      PatternNode("bn", "BatchNormalization", ("x", *_BN_STATS), bn_params),
                      PatternNode("n2", op, ("n0", "bn"))))
    identity_params = (("channels", ParamExpr("shape('w')[0]")),
                       ("kernel_shape", ParamExpr("(shape('w')[2], shape('w')[3])")), ("group", ParamVar("group")))
    target = Pattern((
        PatternNode("eps", "ConstFill", (), (("shape", ()), ("value", ParamVar("epsilon")))),
        PatternNode("ve", "Add", ("var", "eps")), PatternNode("sd", "Sqrt", ("ve",)),
        PatternNode("k", "Div", ("g", "sd")),
        PatternNode("k4", "Reshape", ("k",), (("shape", (-1, 1, 1, 1)),)),
        PatternNode("ic", "ConstIdentityConv", (), identity_params),
        # k4 first: the refuter's NumPy semantics give a product the first float operand's
        # dtype, and the scale computed from inputs is float64 where the constant kernel is not
        PatternNode("wi", "Mul", ("k4", "ic")), PatternNode("ws", op, ("w", "wi")),
        PatternNode("mk", "Mul", ("mean", "k")), PatternNode("sh", "Sub", ("beta", "mk")),
        PatternNode("bs", op, ("b", "sh")),
        _conv("c", ("ws", "bs"), "pads"),
    ))
    inputs = tuple(PatternInput(n) for n in ("x", "w", "b", *_BN_STATS))
    sign = "+" if op == "Add" else "-"
    return axiom_rule("conv_bias_bn_identity_merge" if op == "Add" else "conv_bias_bn_identity_sub",
                      f"conv(x, w, b; pads) {sign} bn(x; g, beta, mean, var) = conv(x, w {sign} iconv(C, k, g) * s, "
                      f"b {sign} (beta - mean * s); pads), s = g / sqrt(var + eps)",
                      inputs, source, target, (("n2", "c"),), IDENTITY_CONSTRAINTS, Exactness.REASSOCIATES,
                      _identity_witness())


def identity_merge_rules() -> list[Rule]:
    """add(conv(x, w, b), bn(x)) as one conv: RepVGG's identity branch, a BatchNormalization
    of the block's input added to the convs' sum (after `merge_parallel_rules` has made the
    convs one); depthwise in MobileOne's depthwise blocks and RepGhost's fusion batch norm."""
    return [_identity_rule("Add")]


def identity_sub_rules() -> list[Rule]:
    """sub(conv(x, w, b), bn(x)) as one conv: FastViT's RepMixer, ``x + gamma * (mixer(x) -
    norm(x))``, whose norm is a BatchNormalization of x and whose mixer a depthwise conv."""
    return [_identity_rule("Sub")]


MERGE_IDENTITY_CONSTRAINTS = (
    *CONSTRAINTS,
    "shape('w') in ((shape('x')[1], shape('x')[1], shape('w')[2], shape('w')[3]),"
    " (shape('x')[1], 1, shape('w')[2], shape('w')[3]))",
    "shape('w')[1] * group == shape('x')[1]", "tuple(strides) == (1, 1)",
    "shape('w')[2] % 2 == 1", "shape('w')[3] % 2 == 1",
    "tuple(pads) == (shape('w')[2] // 2, shape('w')[3] // 2, shape('w')[2] // 2, shape('w')[3] // 2)",
)
"""The parallel merge's constraints and the identity's: C to C channels, group 1 or depthwise,
stride 1, the larger kernel odd with centred pads (so the smaller is centred too)."""


def merge_identity_rules() -> list[Rule]:
    """add(add(conv(x, w, b), conv(x, w2, b2)), x) -> conv(x, w + enlarge(w2) + iconv(C, k, group), b + b2).

    RepViT's RepVggDw, ``bn(conv(x) + conv1(x) + x)``: merging the two convs alone leaves
    ORT about as fast (it fuses the sum into the conv), so the search never reached the
    identity; merged in one step the batch norm after them folds into the one conv."""
    source = Pattern((_conv("n0", ("w", "b"), "pads"), _conv("n1", ("w2", "b2"), "pads2"),
                      PatternNode("n2", "Add", ("n0", "n1")), PatternNode("n3", "Add", ("n2", "x"))))
    kernel = ParamExpr("(shape('w')[2], shape('w')[3])")
    identity_params = (("channels", ParamExpr("shape('w')[0]")), ("kernel_shape", kernel), ("group", ParamVar("group")))
    target = Pattern((
        PatternNode("e", "Enlarge", ("w2",), (("kernel_shape", kernel),)),
        PatternNode("ws", "Add", ("w", "e")),
        PatternNode("ic", "ConstIdentityConv", (), identity_params),
        PatternNode("wi", "Add", ("ws", "ic")),
        PatternNode("bs", "Add", ("b", "b2")),
        _conv("c", ("wi", "bs"), "pads"),
    ))
    inputs = tuple(PatternInput(n) for n in ("x", "w", "b", "w2", "b2"))
    return [axiom_rule("conv_bias_merge_parallel_identity",
                       "conv(x, w, b; pads) + conv(x, w2, b2; pads - m) + x = conv(x, w + enlarge(w2, k) + iconv(C, k, g), "
                       "b + b2; pads)",
                       inputs, source, target, (("n3", "c"),), MERGE_IDENTITY_CONSTRAINTS, Exactness.REASSOCIATES,
                       _parallel_witness(MERGE_IDENTITY_CONFIGS))]
