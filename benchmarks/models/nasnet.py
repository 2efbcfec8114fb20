"""NASNet-A Mobile (Zoph et al. 2018), following the Keras reference implementation.

A 3x3/2 valid stem conv, two stem reduction cells, then three stacks of
normal cells separated by reduction cells (4 @ 1056 for Mobile). Cells use
the searched NASNet-A operations: separable convolutions (depthwise conv,
pointwise conv) stacked twice with ReLU/BN, 3x3 average and max pools, and
identity branches; an adjust block (factorized reduction or 1x1 conv) makes
the previous cell's output fit. Keras' ZeroPadding2D before strided ops is a
Pad node (for pools) or folded into the conv pads (zeros either way).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from benchmarks.models._graph import HE_GAIN, GraphBuilder, Tensor, same_pads
from benchmarks.models._types import Size

BN_EPS = 1e-3
BRANCH_GAMMA = 0.5  # scale of each separable branch's last BN: sums of branches stay bounded
HEAD_GAIN = 0.15  # uncalibrated BNs let cell outputs grow to std ~10; keeps the softmax unsaturated
END = 2**62  # a Slice end past any dimension


@dataclass(frozen=True)
class NasNetConfig:
    penultimate_filters: int
    blocks: int
    stem_filters: int
    image: int
    classes: int


CONFIGS = {
    Size.FULL: NasNetConfig(1056, 4, 32, 224, 1000),
    Size.SMALL: NasNetConfig(192, 1, 8, 64, 10),
}


def _correct_pad(size: int, kernel: int) -> tuple[int, int, int, int]:
    """Keras' imagenet_utils.correct_pad as ONNX pads [top, left, bottom, right]."""
    adjust = 1 - size % 2
    return (kernel // 2 - adjust, kernel // 2 - adjust, kernel // 2, kernel // 2)


def _separable(g: GraphBuilder, x: Tensor, filters: int, kernel: int, stride: int) -> Tensor:
    """Keras SeparableConv2D: depthwise k x k (carrying the stride), then pointwise 1x1."""
    pads = _correct_pad(x.shape[2], kernel) if stride == 2 else same_pads(kernel)
    depthwise = g.conv(x, x.channels, kernel, stride=stride, pads=pads, groups=x.channels, gain=1.0)
    return g.conv(depthwise, filters, 1, gain=HE_GAIN)


def _sep_block(
    g: GraphBuilder, x: Tensor, filters: int, kernel: int = 3, stride: int = 1
) -> Tensor:
    y = g.batch_norm(_separable(g, g.relu(x), filters, kernel, stride), eps=BN_EPS)
    out = _separable(g, g.relu(y), filters, kernel, 1)
    return g.batch_norm(out, eps=BN_EPS, gamma=BRANCH_GAMMA)


def _squeeze(g: GraphBuilder, x: Tensor, filters: int) -> Tensor:
    return g.batch_norm(g.conv(g.relu(x), filters, 1), eps=BN_EPS)


def _factorized_reduction(g: GraphBuilder, p: Tensor, filters: int) -> Tensor:
    p = g.relu(p)
    p1 = g.conv(g.avg_pool(p, 1, 2), filters // 2, 1)
    shifted = g.pad(p, (0, 0, 1, 1))
    shifted = g.slice(g.slice(shifted, axis=2, start=1, end=END), axis=3, start=1, end=END)
    p2 = g.conv(g.avg_pool(shifted, 1, 2), filters // 2, 1)
    return g.batch_norm(g.concat([p1, p2]), eps=BN_EPS)


def _adjust(g: GraphBuilder, p: Tensor | None, ip: Tensor, filters: int) -> Tensor:
    if p is None:
        return ip
    if p.shape[3] != ip.shape[3]:
        return _factorized_reduction(g, p, filters)
    if p.channels != filters:
        return _squeeze(g, p, filters)
    return p


def _avg3(g: GraphBuilder, x: Tensor) -> Tensor:
    return g.avg_pool(x, 3, 1, pads=(1, 1, 1, 1))


def _normal_cell(
    g: GraphBuilder, ip: Tensor, p: Tensor | None, filters: int
) -> tuple[Tensor, Tensor]:
    p = _adjust(g, p, ip, filters)
    h = _squeeze(g, ip, filters)
    x1 = g.add(_sep_block(g, h, filters, 5), _sep_block(g, p, filters))
    x2 = g.add(_sep_block(g, p, filters, 5), _sep_block(g, p, filters, 3))
    x3 = g.add(_avg3(g, h), p)
    x4 = g.add(_avg3(g, p), _avg3(g, p))
    x5 = g.add(_sep_block(g, h, filters), h)
    return g.concat([p, x1, x2, x3, x4, x5]), ip


def _reduction_cell(
    g: GraphBuilder, ip: Tensor, p: Tensor | None, filters: int
) -> tuple[Tensor, Tensor]:
    p = _adjust(g, p, ip, filters)
    h = _squeeze(g, ip, filters)
    h3 = g.pad(h, _correct_pad(h.shape[2], 3))
    x1 = g.add(_sep_block(g, h, filters, 5, 2), _sep_block(g, p, filters, 7, 2))
    x2 = g.add(g.max_pool(h3, 3, 2), _sep_block(g, p, filters, 7, 2))
    x3 = g.add(g.avg_pool(h3, 3, 2), _sep_block(g, p, filters, 5, 2))
    x4 = g.add(x2, _avg3(g, x1))
    x5 = g.add(_sep_block(g, x1, filters, 3), g.max_pool(h3, 3, 2))
    return g.concat([x2, x3, x4, x5]), ip


def build_nasnet_a(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("nasnet_a_mobile")
    filters = cfg.penultimate_filters // 24
    image = g.input("input", (1, 3, cfg.image, cfg.image))
    x = g.batch_norm(g.conv(image, cfg.stem_filters, 3, stride=2, pads=(0, 0, 0, 0)), eps=BN_EPS)
    x, p = _reduction_cell(g, x, None, filters // 4)
    x, p = _reduction_cell(g, x, p, filters // 2)
    for stack in range(3):
        if stack > 0:
            x, p = _reduction_cell(g, x, p, filters * 2**stack)
        for _ in range(cfg.blocks):
            x, p = _normal_cell(g, x, p, filters * 2**stack)
    pooled = g.flatten(g.global_avg_pool(g.relu(x)))
    probs = g.softmax(g.gemm(pooled, cfg.classes, gain=HEAD_GAIN))
    return g.build([probs], doc="NASNet-A Mobile 4@1056: Keras layout, random weights")
