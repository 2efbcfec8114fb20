"""SqueezeNet 1.1 (Iandola et al. 2016), as torchvision defines it.

A 3x3/2 stem conv, Fire modules (1x1 squeeze, then parallel 1x1 and 3x3
expands concatenated), ceil-mode max pools, and a 1x1-conv classifier followed
by global average pooling. Every conv has a bias and a ReLU; there is no
batch norm.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

POOL = "pool"

# (squeeze, expand) per Fire module; POOL marks a 3x3/2 ceil-mode max pool.
FIRES_1_1: tuple[tuple[int, int] | str, ...] = (
    POOL,
    (16, 64),
    (16, 64),
    POOL,
    (32, 128),
    (32, 128),
    POOL,
    (48, 192),
    (48, 192),
    (64, 256),
    (64, 256),
)


@dataclass(frozen=True)
class SqueezeNetConfig:
    stem: int
    width_divisor: int
    image: int
    classes: int


CONFIGS = {
    Size.FULL: SqueezeNetConfig(64, 1, 224, 1000),
    Size.SMALL: SqueezeNetConfig(16, 4, 32, 10),
}


def _fire(g: GraphBuilder, x: Tensor, squeeze: int, expand: int) -> Tensor:
    s = g.relu(g.conv(x, squeeze, 1, bias=True))
    e1 = g.relu(g.conv(s, expand, 1, bias=True))
    e3 = g.relu(g.conv(s, expand, 3, bias=True))
    return g.concat([e1, e3])


def build_squeezenet(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("squeezenet1_1")
    x = g.input("input", (1, 3, cfg.image, cfg.image))
    y = g.relu(g.conv(x, cfg.stem, 3, stride=2, pads=(0, 0, 0, 0), bias=True))
    for layer in FIRES_1_1:
        if layer == POOL:
            y = g.max_pool(y, 3, 2, ceil=True)
        else:
            squeeze, expand = layer
            y = _fire(g, y, squeeze // cfg.width_divisor, expand // cfg.width_divisor)
    y = g.relu(g.conv(y, cfg.classes, 1, bias=True))
    logits = g.flatten(g.global_avg_pool(y))
    return g.build([logits], doc="SqueezeNet 1.1: torchvision layout, random weights")
