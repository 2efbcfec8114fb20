"""A YOLOv8n detector (Ultralytics, 2023) shaped the way its ONNX export looks.

The layer table is YOLOv8n's (depth 0.33, width 0.25): a stride-2 Conv stem, four
stages of stride-2 Conv then C2f, SPPF, the PAN neck (nearest upsampling, Concat, C2f),
and the decoupled Detect head (two 3x3 Conv branches per level, 64 box and 80 class
channels), ending before the DFL decoding. Export-shaped: BatchNorm folded into each
Conv's bias, SiLU written as ``x * Sigmoid(x)``, and each C2f block splitting its first
Conv's output in two with ``Split`` (the part TASO-style un-merging targets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

# (stage output channels, C2f bottlenecks) for the backbone after the stem, at width 1.0
BACKBONE = ((128, 3), (256, 6), (512, 6), (1024, 3))
CLASSES = 80
BOX_CHANNELS = 64  # 4 sides x 16 DFL bins


@dataclass(frozen=True)
class YoloConfig:
    width: float  # channel multiplier
    depth: float  # bottleneck multiplier
    max_channels: int
    image: int


CONFIGS = {
    Size.FULL: YoloConfig(0.25, 1 / 3, 1024, 640),
    Size.SMALL: YoloConfig(0.125, 1 / 3, 1024, 64),
}


def _conv(g: GraphBuilder, x: Tensor, out: int, kernel: int = 1, stride: int = 1) -> Tensor:
    """Conv (BatchNorm folded into its bias) then SiLU as x * sigmoid(x)."""
    y = g.conv(x, out, kernel, stride=stride, bias=True)
    return g.mul(y, g.sigmoid(y))


def _c2f(g: GraphBuilder, x: Tensor, out: int, blocks: int, *, shortcut: bool) -> Tensor:
    hidden = out // 2
    parts = g.split(_conv(g, x, 2 * hidden), (hidden, hidden))
    for _ in range(blocks):
        y = _conv(g, _conv(g, parts[-1], hidden, 3), hidden, 3)
        parts.append(g.add(parts[-1], y) if shortcut else y)
    return _conv(g, g.concat(parts), out)


def _sppf(g: GraphBuilder, x: Tensor, out: int) -> Tensor:
    y = _conv(g, x, x.channels // 2)
    pools = [y]
    for _ in range(3):
        pools.append(g.max_pool(pools[-1], 5, 1, pads=(2, 2, 2, 2)))
    return _conv(g, g.concat(pools), out)


def _upsample(g: GraphBuilder, x: Tensor) -> Tensor:
    scales = g.constant("scales", np.array([1, 1, 2, 2], dtype=np.float32))
    n, c, h, w = x.shape
    return g.node("Resize", [x, None, scales], (n, c, 2 * h, 2 * w), mode="nearest")


def _detect(g: GraphBuilder, x: Tensor, box_hidden: int, cls_hidden: int) -> Tensor:
    box = g.conv(_conv(g, _conv(g, x, box_hidden, 3), box_hidden, 3), BOX_CHANNELS, 1, bias=True)
    cls = g.conv(_conv(g, _conv(g, x, cls_hidden, 3), cls_hidden, 3), CLASSES, 1, bias=True)
    return g.concat([box, cls])


def build_yolov8(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]

    def ch(c: int) -> int:
        return max(8, int(min(c, cfg.max_channels) * cfg.width))

    def n(blocks: int) -> int:
        return max(1, round(blocks * cfg.depth))

    g = GraphBuilder("yolov8n_exported")
    x = _conv(g, g.input("images", (1, 3, cfg.image, cfg.image)), ch(64), 3, 2)
    stages = []
    for out, blocks in BACKBONE:
        x = _c2f(g, _conv(g, x, ch(out), 3, 2), ch(out), n(blocks), shortcut=True)
        stages.append(x)
    p5 = _sppf(g, stages[3], ch(1024))
    p4 = _c2f(g, g.concat([_upsample(g, p5), stages[2]]), ch(512), n(3), shortcut=False)
    p3 = _c2f(g, g.concat([_upsample(g, p4), stages[1]]), ch(256), n(3), shortcut=False)
    n4 = _c2f(g, g.concat([_conv(g, p3, ch(256), 3, 2), p4]), ch(512), n(3), shortcut=False)
    n5 = _c2f(g, g.concat([_conv(g, n4, ch(512), 3, 2), p5]), ch(1024), n(3), shortcut=False)
    box_hidden = max(16, ch(256) // 4, BOX_CHANNELS)
    cls_hidden = max(ch(256), min(CLASSES, 100))
    heads = [_detect(g, level, box_hidden, cls_hidden) for level in (p3, n4, n5)]
    return g.build(heads, doc="YOLOv8n detector, export-shaped (folded BN, x*sigmoid(x) SiLU, C2f Split), random weights")
