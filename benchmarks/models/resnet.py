"""ResNet-50 and ResNeXt-50 (32x4d), as torchvision defines them (He et al. 2016; Xie et al. 2017).

Bottleneck blocks with the stride on the 3x3 conv (ResNet v1.5), a 7x7/2 stem
conv with 3x3/2 max pool, BatchNormalization after every conv, a global
average pool and a 1000-way Gemm. ResNeXt replaces the 3x3 conv with a
32-group conv of twice the width.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

RESIDUAL_GAMMA = 0.2  # scale of the last BN in each branch, keeps activations bounded


@dataclass(frozen=True)
class ResNetConfig:
    blocks: tuple[int, ...]
    base_planes: int
    groups: int
    width_per_group: int
    image: int
    classes: int


RESNET50 = {
    Size.FULL: ResNetConfig((3, 4, 6, 3), 64, 1, 64, 224, 1000),
    Size.SMALL: ResNetConfig((1, 1, 1, 1), 8, 1, 64, 32, 10),
}
RESNEXT50_32X4D = {
    Size.FULL: ResNetConfig((3, 4, 6, 3), 64, 32, 4, 224, 1000),
    Size.SMALL: ResNetConfig((1, 1, 1, 1), 8, 4, 16, 32, 10),
}


def _conv_bn(
    g: GraphBuilder,
    x: Tensor,
    out: int,
    kernel: int,
    *,
    stride: int = 1,
    groups: int = 1,
    relu: bool = True,
    gamma: float = 1.0,
) -> Tensor:
    y = g.batch_norm(g.conv(x, out, kernel, stride=stride, groups=groups), gamma=gamma)
    return g.relu(y) if relu else y


def _bottleneck(g: GraphBuilder, x: Tensor, planes: int, stride: int, cfg: ResNetConfig) -> Tensor:
    width = planes * cfg.width_per_group * cfg.groups // 64
    out = planes * 4
    y = _conv_bn(g, x, width, 1)
    y = _conv_bn(g, y, width, 3, stride=stride, groups=cfg.groups)
    y = _conv_bn(g, y, out, 1, relu=False, gamma=RESIDUAL_GAMMA)
    shortcut = x
    if stride != 1 or x.channels != out:
        shortcut = _conv_bn(g, x, out, 1, stride=stride, relu=False)
    return g.relu(g.add(y, shortcut))


def _build(name: str, cfg: ResNetConfig) -> onnx.ModelProto:
    g = GraphBuilder(name)
    x = g.input("input", (1, 3, cfg.image, cfg.image))
    y = _conv_bn(g, x, cfg.base_planes, 7, stride=2)
    y = g.max_pool(y, 3, 2, pads=(1, 1, 1, 1))
    for stage, count in enumerate(cfg.blocks):
        planes = cfg.base_planes * 2**stage
        for index in range(count):
            y = _bottleneck(g, y, planes, 2 if index == 0 and stage > 0 else 1, cfg)
    logits = g.gemm(g.flatten(g.global_avg_pool(y)), cfg.classes)
    return g.build([logits], doc=f"{name}: torchvision layout, random weights")


def build_resnet50(size: Size) -> onnx.ModelProto:
    return _build("resnet50", RESNET50[size])


def build_resnext50(size: Size) -> onnx.ModelProto:
    return _build("resnext50_32x4d", RESNEXT50_32X4D[size])
