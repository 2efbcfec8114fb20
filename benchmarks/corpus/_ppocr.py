"""The PP-OCRv3 text recognizer in paddle, for paddle2onnx (no pip package ships it).

Written after the published PaddleOCR definition (configs/rec/PP-OCRv3, model as exported
for inference, CTC branch only):

    backbone  MobileNetV1Enhance, scale 0.5, last_conv_stride (1, 2), average last pool:
              3x3 conv-BN-hardswish stem, 13 depthwise-separable blocks (3x3 then 5x5
              depthwise), SE (reduce 4, relu, hardsigmoid) in the last two
    neck      SVTR encoder: conv 3x3 C->C/8, conv 1x1 -> 120, 2 global-attention blocks
              (8 heads, MLP ratio 2, swish, LayerNorm), LayerNorm, conv 1x1 -> C,
              concat with the backbone output, conv 3x3 -> C/8, conv 1x1 -> 64
    head      squeeze H, transpose to (N, W, C), Linear 64 -> 6625 classes, softmax

Input 1x3x48x320 gives 1x40x6625.
"""

from __future__ import annotations

import paddle
from paddle import nn
from paddle.nn import functional as F

SCALE = 0.5
NUM_CLASSES = 6625  # 6623 characters of the Chinese dictionary + blank + space


class ConvBN(nn.Layer):
    """Conv2D (no bias) -> BatchNorm -> activation."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int], stride=1,
                 groups: int = 1, act: type[nn.Layer] | None = nn.Hardswish) -> None:
        super().__init__()
        sizes = (kernel, kernel) if isinstance(kernel, int) else kernel
        self.conv = nn.Conv2D(cin, cout, kernel, stride=stride, groups=groups, bias_attr=False,
                              padding=[size // 2 for size in sizes])
        self.bn = nn.BatchNorm2D(cout)
        self.act = act() if act is not None else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SqueezeExcite(nn.Layer):
    """x * hardsigmoid(conv(relu(conv(avgpool(x))))), channel reduction 4."""

    def __init__(self, channels: int, reduction: int = 4) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.reduce = nn.Conv2D(channels, channels // reduction, 1)
        self.expand = nn.Conv2D(channels // reduction, channels, 1)

    def forward(self, x):
        scale = F.hardsigmoid(self.expand(F.relu(self.reduce(self.pool(x)))))
        return x * scale


class DepthwiseSeparable(nn.Layer):
    """Depthwise ConvBN (optionally SE) then pointwise ConvBN."""

    def __init__(self, cin: int, cout: int, stride, kernel: int = 3, se: bool = False) -> None:
        super().__init__()
        self.depthwise = ConvBN(cin, cin, kernel, stride=stride, groups=cin)
        self.se = SqueezeExcite(cin) if se else nn.Identity()
        self.pointwise = ConvBN(cin, cout, 1)

    def forward(self, x):
        return self.pointwise(self.se(self.depthwise(x)))


# (input channels, output channels, stride, depthwise kernel, SE) before scaling.
_BLOCKS = (
    (32, 64, 1, 3, False),
    (64, 128, 1, 3, False),
    (128, 128, 1, 3, False),
    (128, 256, (2, 1), 3, False),
    (256, 256, 1, 3, False),
    (256, 512, (2, 1), 3, False),
    *[(512, 512, 1, 5, False)] * 5,
    (512, 1024, (2, 1), 5, True),
    (1024, 1024, (1, 2), 5, True),  # last_conv_stride of PP-OCRv3
)


class MobileNetV1Enhance(nn.Layer):
    def __init__(self, scale: float = SCALE) -> None:
        super().__init__()
        self.stem = ConvBN(3, int(32 * scale), 3, stride=2)
        self.blocks = nn.Sequential(*[
            DepthwiseSeparable(int(cin * scale), int(cout * scale), stride, kernel, se)
            for cin, cout, stride, kernel, se in _BLOCKS
        ])
        self.pool = nn.AvgPool2D(kernel_size=2, stride=2)
        self.out_channels = int(1024 * scale)

    def forward(self, x):
        return self.pool(self.blocks(self.stem(x)))


class GlobalAttention(nn.Layer):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        qkv = self.qkv(x).reshape([0, -1, 3, self.heads, self.head_dim]).transpose([2, 0, 3, 1, 4])
        q, k, v = qkv[0] * self.head_dim**-0.5, qkv[1], qkv[2]
        attention = F.softmax(q.matmul(k.transpose([0, 1, 3, 2])), axis=-1)
        out = attention.matmul(v).transpose([0, 2, 1, 3]).reshape([0, -1, self.heads * self.head_dim])
        return self.proj(out)


class SVTRBlock(nn.Layer):
    """Transformer block, norm before each branch: x + attn(LN(x)), then x + mlp(LN(x))."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, epsilon=1e-5), nn.LayerNorm(dim, epsilon=1e-5)
        self.mixer = GlobalAttention(dim, heads)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.Swish(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class SVTREncoder(nn.Layer):
    def __init__(self, cin: int, dims: int = 64, depth: int = 2, hidden: int = 120,
                 heads: int = 8, mlp_ratio: float = 2.0, kernel: int | tuple[int, int] = 3) -> None:
        super().__init__()
        self.conv1 = ConvBN(cin, cin // 8, kernel, act=nn.Swish)
        self.conv2 = ConvBN(cin // 8, hidden, 1, act=nn.Swish)
        self.blocks = nn.LayerList([SVTRBlock(hidden, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(hidden, epsilon=1e-6)
        self.conv3 = ConvBN(hidden, cin, 1, act=nn.Swish)
        self.conv4 = ConvBN(2 * cin, cin // 8, kernel, act=nn.Swish)
        self.conv1x1 = ConvBN(cin // 8, dims, 1, act=nn.Swish)
        self.out_channels = dims

    def forward(self, x):
        guide = x
        z = self.conv2(self.conv1(x))
        _, channels, height, width = z.shape
        z = z.flatten(2).transpose([0, 2, 1])
        for block in self.blocks:
            z = block(z)
        z = self.norm(z).reshape([0, height, width, channels]).transpose([0, 3, 1, 2])
        z = paddle.concat([guide, self.conv3(z)], axis=1)
        return self.conv1x1(self.conv4(z))


class PPOCRv3Rec(nn.Layer):
    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.backbone = MobileNetV1Enhance()
        self.neck = SVTREncoder(self.backbone.out_channels)
        self.head = nn.Linear(self.neck.out_channels, num_classes)

    def forward(self, x):
        features = self.neck(self.backbone(x))
        sequence = features.squeeze(2).transpose([0, 2, 1])  # (N, W, C)
        return F.softmax(self.head(sequence), axis=2)
