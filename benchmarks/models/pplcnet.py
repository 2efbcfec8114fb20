"""PP-LCNet x1.0 (Cui et al. 2021), shaped the way paddle2onnx exports it at opset 11.

PP-LCNet is PaddleClas's CPU backbone, and the backbone of PaddleOCR's mobile text
detectors and recognizers: a 3x3 stride-2 stem, then depthwise-separable blocks (a
depthwise conv and a pointwise conv, each with BatchNorm and HardSwish), squeeze-and-
excite in the last two, global pooling, a 1x1 conv to 1280 channels with HardSwish and a
1000-way dense layer. Export-shaped as paddle2onnx writes it below opset 14 (the opsets
PaddleOCR's deployment docs use): every BatchNorm is a BatchNormalization node, every
HardSwish the mapper's ``Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)``, the SE gate Paddle's
``hard_sigmoid`` as a HardSigmoid node (slope 1/6, offset 1/2), adaptive pooling
GlobalAveragePool, the dense layer MatMul then Add.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

# (kernel, in channels, out channels, stride, squeeze-excite) per depthwise-separable block
BLOCKS: tuple[tuple[int, int, int, int, bool], ...] = (
    (3, 16, 32, 1, False),
    (3, 32, 64, 2, False),
    (3, 64, 64, 1, False),
    (3, 64, 128, 2, False),
    (3, 128, 128, 1, False),
    (3, 128, 256, 2, False),
    (5, 256, 256, 1, False),
    (5, 256, 256, 1, False),
    (5, 256, 256, 1, False),
    (5, 256, 256, 1, False),
    (5, 256, 256, 1, False),
    (5, 256, 512, 2, True),
    (5, 512, 512, 1, True),
)
STEM = 16
EXPAND = 1280
SE_REDUCTION = 4
HARD_SIGMOID_SLOPE = 1.0 / 6.0  # Paddle's nn.Hardsigmoid default


@dataclass(frozen=True)
class LcnetConfig:
    width_divisor: int
    image: int
    classes: int


CONFIGS = {
    Size.FULL: LcnetConfig(1, 224, 1000),
    Size.SMALL: LcnetConfig(4, 32, 10),
}


def hard_swish_paddle(g: GraphBuilder, x: Tensor) -> Tensor:
    """paddle2onnx's HardSwish below opset 14: Add, Clip(0, 6), Mul with x, then Div by 6."""
    shifted = g.add(x, g.scalar("offset", 3.0))
    clipped = g.node("Clip", [shifted, g.scalar("zero", 0.0), g.scalar("threshold", 6.0)], x.shape)
    return g.binary("Div", g.mul(x, clipped), g.scalar("scale", 6.0))


def _conv_bn_hswish(g: GraphBuilder, x: Tensor, out: int, kernel: int, *, stride: int = 1, groups: int = 1) -> Tensor:
    return hard_swish_paddle(g, g.batch_norm(g.conv(x, out, kernel, stride=stride, groups=groups)))


def _squeeze_excite(g: GraphBuilder, x: Tensor) -> Tensor:
    squeezed = g.relu(g.conv(g.global_avg_pool(x), x.channels // SE_REDUCTION, 1, bias=True))
    gate = g.unary("HardSigmoid", g.conv(squeezed, x.channels, 1, bias=True, gain=1.0),
                   alpha=HARD_SIGMOID_SLOPE, beta=0.5)
    return g.mul(x, gate)


def build_pplcnet(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("pplcnet_x1_0_converted")
    x = _conv_bn_hswish(g, g.input("x", (1, 3, cfg.image, cfg.image)), STEM // cfg.width_divisor, 3, stride=2)
    for kernel, _, out, stride, se in BLOCKS:
        x = _conv_bn_hswish(g, x, x.channels, kernel, stride=stride, groups=x.channels)
        if se:
            x = _squeeze_excite(g, x)
        x = _conv_bn_hswish(g, x, out // cfg.width_divisor, 1)
    pooled = g.global_avg_pool(x)
    expanded = hard_swish_paddle(g, g.conv(pooled, EXPAND // cfg.width_divisor, 1))
    logits = g.linear(g.flatten(expanded), cfg.classes)
    return g.build([logits], doc="PP-LCNet x1.0, paddle2onnx-shaped (opset 11), random weights")
