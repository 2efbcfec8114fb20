"""Inception-v3 (Szegedy et al. 2016), as torchvision defines it for inference (no aux head).

A five-conv stem with two max pools, then Inception A (x3), B, C (x4), D and
E (x2) modules built from BasicConv2d (conv without bias, BN eps 1e-3, ReLU),
including the factorized 1x7/7x1 and 1x3/3x1 convolutions, average-pool
branches with padding counted, a global average pool and a 1000-way Gemm.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Ints, Tensor, same_pads
from benchmarks.models._types import Size

VALID = (0, 0, 0, 0)


@dataclass(frozen=True)
class InceptionConfig:
    width_divisor: int
    image: int
    classes: int
    c_modules: tuple[int, ...]  # the c7 width of each Inception C module


CONFIGS = {
    Size.FULL: InceptionConfig(1, 299, 1000, (128, 160, 160, 192)),
    Size.SMALL: InceptionConfig(16, 75, 10, (128,)),
}


class _Inception:
    """Holds the builder and the width divisor so module code reads like torchvision's."""

    def __init__(self, g: GraphBuilder, divisor: int) -> None:
        self.g = g
        self.divisor = divisor

    def conv(
        self, x: Tensor, out: int, kernel: Ints, *, stride: int = 1, same: bool = True
    ) -> Tensor:
        pads = same_pads(kernel) if same else VALID
        y = self.g.conv(x, max(out // self.divisor, 2), kernel, stride=stride, pads=pads)
        return self.g.relu(self.g.batch_norm(y, eps=1e-3))

    def pool_branch(self, x: Tensor, out: int) -> Tensor:
        pooled = self.g.avg_pool(x, 3, 1, pads=(1, 1, 1, 1), count_include_pad=True)
        return self.conv(pooled, out, 1)

    def module_a(self, x: Tensor, pool_features: int) -> Tensor:
        b1 = self.conv(x, 64, 1)
        b5 = self.conv(self.conv(x, 48, 1), 64, 5)
        b3 = self.conv(self.conv(self.conv(x, 64, 1), 96, 3), 96, 3)
        return self.g.concat([b1, b5, b3, self.pool_branch(x, pool_features)])

    def module_b(self, x: Tensor) -> Tensor:
        b3 = self.conv(x, 384, 3, stride=2, same=False)
        dbl = self.conv(self.conv(self.conv(x, 64, 1), 96, 3), 96, 3, stride=2, same=False)
        return self.g.concat([b3, dbl, self.g.max_pool(x, 3, 2)])

    def module_c(self, x: Tensor, c7: int) -> Tensor:
        b1 = self.conv(x, 192, 1)
        b7 = self.conv(self.conv(self.conv(x, c7, 1), c7, (1, 7)), 192, (7, 1))
        dbl = self.conv(x, c7, 1)
        for kernel in ((7, 1), (1, 7), (7, 1)):
            dbl = self.conv(dbl, c7, kernel)
        dbl = self.conv(dbl, 192, (1, 7))
        return self.g.concat([b1, b7, dbl, self.pool_branch(x, 192)])

    def module_d(self, x: Tensor) -> Tensor:
        b3 = self.conv(self.conv(x, 192, 1), 320, 3, stride=2, same=False)
        b7 = self.conv(self.conv(self.conv(x, 192, 1), 192, (1, 7)), 192, (7, 1))
        b7 = self.conv(b7, 192, 3, stride=2, same=False)
        return self.g.concat([b3, b7, self.g.max_pool(x, 3, 2)])

    def module_e(self, x: Tensor) -> Tensor:
        b1 = self.conv(x, 320, 1)
        b3 = self.conv(x, 384, 1)
        b3 = self.g.concat([self.conv(b3, 384, (1, 3)), self.conv(b3, 384, (3, 1))])
        dbl = self.conv(self.conv(x, 448, 1), 384, 3)
        dbl = self.g.concat([self.conv(dbl, 384, (1, 3)), self.conv(dbl, 384, (3, 1))])
        return self.g.concat([b1, b3, dbl, self.pool_branch(x, 192)])

    def stem(self, x: Tensor) -> Tensor:
        y = self.conv(x, 32, 3, stride=2, same=False)
        y = self.conv(y, 32, 3, same=False)
        y = self.g.max_pool(self.conv(y, 64, 3), 3, 2)
        y = self.conv(y, 80, 1)
        return self.g.max_pool(self.conv(y, 192, 3, same=False), 3, 2)


def build_inception_v3(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("inception_v3")
    net = _Inception(g, cfg.width_divisor)
    x = g.input("input", (1, 3, cfg.image, cfg.image))
    y = net.stem(x)
    for pool_features in (32, 64, 64):
        y = net.module_a(y, pool_features)
    y = net.module_b(y)
    for c7 in cfg.c_modules:
        y = net.module_c(y, c7)
    y = net.module_d(y)
    y = net.module_e(net.module_e(y))
    logits = g.gemm(g.flatten(g.global_avg_pool(y)), cfg.classes)
    return g.build(
        [logits], doc="Inception-v3: torchvision layout without aux head, random weights"
    )
