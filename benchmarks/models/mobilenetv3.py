"""MobileNetV3-Large (Howard et al. 2019) shaped the way TF/Paddle converters emit it.

The layer table is torchvision's `mobilenet_v3_large`. What makes it
converter-shaped: every batch norm is a per-channel Mul then Add after a
bias-free conv; HardSwish and HardSigmoid are decomposed into Add, Clip(0, 6),
Div (and Mul); squeeze-and-excite pools with ReduceMean; the classifier's
dense layers are MatMul then Add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

RESIDUAL_GAMMA = 0.2  # scale of the projection's folded BN, keeps activations bounded


@dataclass(frozen=True)
class Bneck:
    """One inverted-residual block: kernel, expanded width, output width, SE, hard-swish, stride."""

    kernel: int
    expanded: int
    out: int
    se: bool
    hard_swish: bool
    stride: int


LARGE = (
    Bneck(3, 16, 16, False, False, 1),
    Bneck(3, 64, 24, False, False, 2),
    Bneck(3, 72, 24, False, False, 1),
    Bneck(5, 72, 40, True, False, 2),
    Bneck(5, 120, 40, True, False, 1),
    Bneck(5, 120, 40, True, False, 1),
    Bneck(3, 240, 80, False, True, 2),
    Bneck(3, 200, 80, False, True, 1),
    Bneck(3, 184, 80, False, True, 1),
    Bneck(3, 184, 80, False, True, 1),
    Bneck(3, 480, 112, True, True, 1),
    Bneck(3, 672, 112, True, True, 1),
    Bneck(5, 672, 160, True, True, 2),
    Bneck(5, 960, 160, True, True, 1),
    Bneck(5, 960, 160, True, True, 1),
)


@dataclass(frozen=True)
class MobileNetConfig:
    width_divisor: int
    image: int
    last_channel: int
    classes: int


CONFIGS = {
    Size.FULL: MobileNetConfig(1, 224, 1280, 1000),
    Size.SMALL: MobileNetConfig(4, 32, 64, 10),
}


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's `_make_divisible`: round to a multiple of `divisor`, losing at most 10%."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class _Net:
    def __init__(self, g: GraphBuilder, divisor: int) -> None:
        self.g, self.divisor = g, divisor

    def width(self, channels: int) -> int:
        return channels if self.divisor == 1 else make_divisible(channels / self.divisor, 4)

    def act(self, hard_swish: bool) -> Callable[[Tensor], Tensor]:
        return self.g.hard_swish_decomposed if hard_swish else self.g.relu

    def conv_bn(
        self,
        x: Tensor,
        out: int,
        kernel: int,
        *,
        stride: int = 1,
        groups: int = 1,
        gamma: float = 1.0,
    ) -> Tensor:
        return self.g.channel_affine(
            self.g.conv(x, out, kernel, stride=stride, groups=groups), gamma=gamma
        )

    def squeeze_excite(self, x: Tensor) -> Tensor:
        g = self.g
        pooled = g.node("ReduceMean", [x], (*x.shape[:2], 1, 1), axes=[2, 3], keepdims=1)
        squeezed = g.relu(g.conv(pooled, make_divisible(x.channels // 4), 1, bias=True))
        gate = g.hard_sigmoid_decomposed(g.conv(squeezed, x.channels, 1, bias=True, gain=1.0))
        return g.mul(x, gate)

    def block(self, x: Tensor, spec: Bneck) -> Tensor:
        act = self.act(spec.hard_swish)
        expanded, out = self.width(spec.expanded), self.width(spec.out)
        y = x if expanded == x.channels else act(self.conv_bn(x, expanded, 1))
        y = act(self.conv_bn(y, expanded, spec.kernel, stride=spec.stride, groups=expanded))
        if spec.se:
            y = self.squeeze_excite(y)
        residual = spec.stride == 1 and x.channels == out
        y = self.conv_bn(y, out, 1, gamma=RESIDUAL_GAMMA if residual else 1.0)
        return self.g.add(y, x) if residual else y


def build_mobilenetv3(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("mobilenetv3_large_converted")
    net = _Net(g, cfg.width_divisor)
    image = g.input("input", (1, 3, cfg.image, cfg.image))
    x = g.hard_swish_decomposed(net.conv_bn(image, net.width(16), 3, stride=2))
    for spec in LARGE:
        x = net.block(x, spec)
    x = g.hard_swish_decomposed(net.conv_bn(x, 6 * x.channels, 1))
    pooled = g.flatten(g.node("ReduceMean", [x], (*x.shape[:2], 1, 1), axes=[2, 3], keepdims=1))
    hidden = g.hard_swish_decomposed(g.linear(pooled, cfg.last_channel))
    logits = g.linear(hidden, cfg.classes)
    return g.build(
        [logits], doc="MobileNetV3-Large, converter-shaped (folded BN, decomposed hard-swish)"
    )
