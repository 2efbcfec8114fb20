"""The PP-OCRv4 mobile recognizer and detector in paddle, for paddle2onnx.

Written after the published PaddleOCR definitions (configs/rec/PP-OCRv4 mobile rec and
configs/det/PP-OCRv4 mobile det student), in the form PaddleOCR's export_model writes
for inference: every LearnableRepLayer is reparameterized (`rep()`) into one conv with
bias before export, and only the inference branch of each head is kept.

    backbone  PPLCNetV3: a conv-BN stem (stride 2, no activation), then blocks of a
              depthwise LearnableRepLayer, an optional SE (reduce 4, relu, hardsigmoid)
              and a pointwise LearnableRepLayer. A LearnableRepLayer sums 4 conv-BN
              branches, a 1x1 conv-BN branch (kernel > 1) and a BN identity branch (same
              shape), scales it by a LearnableAffineBlock (scalar scale and bias, shape
              [1]) and, unless its stride is 2, applies hardswish and another affine block.
              Channels are rounded to multiples of 16.
    rec       scale 0.95, strides keep the width; average pool 3x2 at inference;
              SVTR neck (dims 120, hidden 120, depth 2, kernel 1x3, guide copy);
              CTC head: Linear 120 -> 6625 classes, softmax. 1x3x48x320 gives 1x40x6625.
    det       scale 0.75, four stages to 1x1 convs (12, 18, 42, 360 channels); RSEFPN
              (out 96, shortcut SE layers, nearest x2 upsampling); DBHead (k=50) keeps the
              shrink-map branch at inference: conv-BN-relu, two 2x2 stride-2 transposed
              convs, sigmoid. 1x3x640x640 gives 1x1x640x640.
"""

from __future__ import annotations

import enum

import numpy as np
import paddle
from paddle import nn
from paddle.nn import functional as F

from benchmarks.corpus._ppocr import NUM_CLASSES, SVTREncoder

REC_SCALE = 0.95
DET_SCALE = 0.75
BRANCHES = 4  # conv_kxk_num of the published configs

# One stage per tuple: (kernel, input channels, output channels, stride, SE) unscaled.
_Stage = tuple[tuple[int, int, int, int | tuple[int, int], bool], ...]
_REC_STAGES: tuple[_Stage, ...] = (
    ((3, 16, 32, 1, False),),
    ((3, 32, 64, 1, False), (3, 64, 64, 1, False)),
    ((3, 64, 128, (2, 1), False), (3, 128, 128, 1, False)),
    ((3, 128, 256, (1, 2), False), *[(5, 256, 256, 1, False)] * 4),
    ((5, 256, 512, (2, 1), True), (5, 512, 512, 1, True),
     (5, 512, 512, (2, 1), False), (5, 512, 512, 1, False)),
)
_DET_STAGES: tuple[_Stage, ...] = (
    ((3, 16, 32, 1, False),),
    ((3, 32, 64, 2, False), (3, 64, 64, 1, False)),
    ((3, 64, 128, 2, False), (3, 128, 128, 1, False)),
    ((3, 128, 256, 2, False), *[(5, 256, 256, 1, False)] * 4),
    ((5, 256, 512, 2, True), (5, 512, 512, 1, True), *[(5, 512, 512, 1, False)] * 2),
)
_DET_OUT = (16, 24, 56, 480)  # 1x1 conv widths after the last four stages, unscaled


def divisible(value: float, divisor: int = 16) -> int:
    """Round to the nearest multiple of `divisor`, never more than 10% down."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class Affine(nn.Layer):
    """LearnableAffineBlock: scale * x + bias with scalar (shape [1]) parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = self.create_parameter([1], default_initializer=nn.initializer.Constant(1.0))
        self.bias = self.create_parameter([1], default_initializer=nn.initializer.Constant(0.0))

    def forward(self, x):
        return self.scale * x + self.bias


class ConvBN(nn.Layer):
    """Conv2D (no bias) then BatchNorm, no activation."""

    def __init__(self, cin: int, cout: int, kernel: int, stride=1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2D(cin, cout, kernel, stride=stride, padding=(kernel - 1) // 2,
                              groups=groups, bias_attr=False)
        self.bn = nn.BatchNorm2D(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


def _fold_bn(bn: nn.BatchNorm2D, kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernel and bias of `kernel` followed by `bn` (inference statistics)."""
    gamma, beta = bn.weight.numpy(), bn.bias.numpy()
    std = np.sqrt(bn._variance.numpy() + bn._epsilon)
    return kernel * (gamma / std).reshape(-1, 1, 1, 1), beta - bn._mean.numpy() * gamma / std


class RepLayer(nn.Layer):
    """LearnableRepLayer; `rep()` folds its branches into `fused` (a conv with bias)."""

    def __init__(self, cin: int, cout: int, kernel: int, stride=1, groups: int = 1) -> None:
        super().__init__()
        self.shape = (cin, cout, kernel, stride, groups)
        self.identity = nn.BatchNorm2D(cin) if cin == cout and stride == 1 else None
        self.kxk = nn.LayerList([ConvBN(cin, cout, kernel, stride, groups) for _ in range(BRANCHES)])
        self.one = ConvBN(cin, cout, 1, stride, groups) if kernel > 1 else None
        self.affine = Affine()
        self.act = nn.Hardswish() if stride != 2 else None  # the published `stride != 2`
        self.act_affine = Affine() if stride != 2 else None
        self.fused: nn.Conv2D | None = None

    def _branches(self, x):
        out = sum(branch(x) for branch in self.kxk)
        if self.one is not None:
            out = out + self.one(x)
        return out + self.identity(x) if self.identity is not None else out

    def forward(self, x):
        out = self.affine(self.fused(x) if self.fused is not None else self._branches(x))
        return self.act_affine(self.act(out)) if self.act is not None else out

    def _folded(self) -> tuple[np.ndarray, np.ndarray]:
        cin, cout, kernel, _, groups = self.shape
        pad = kernel // 2
        weight, bias = np.zeros((cout, cin // groups, kernel, kernel), "float32"), np.zeros(cout, "float32")
        for branch in self.kxk:
            w, b = _fold_bn(branch.bn, branch.conv.weight.numpy())
            weight, bias = weight + w, bias + b
        if self.one is not None:
            w, b = _fold_bn(self.one.bn, self.one.conv.weight.numpy())
            weight, bias = weight + np.pad(w, ((0, 0), (0, 0), (pad, pad), (pad, pad))), bias + b
        if self.identity is not None:
            eye = np.zeros_like(weight)
            eye[np.arange(cout), np.arange(cout) % (cin // groups), pad, pad] = 1.0
            w, b = _fold_bn(self.identity, eye)
            weight, bias = weight + w, bias + b
        return weight, bias

    @paddle.no_grad()
    def rep(self) -> None:
        """Replace the branches by one conv with bias, as the published `rep()` does."""
        if self.fused is not None:
            return
        cin, cout, kernel, stride, groups = self.shape
        weight, bias = self._folded()
        self.fused = nn.Conv2D(cin, cout, kernel, stride=stride, padding=(kernel - 1) // 2,
                               groups=groups)
        self.fused.weight.set_value(weight.astype("float32"))
        self.fused.bias.set_value(bias.astype("float32"))
        self.kxk, self.one, self.identity = nn.LayerList(), None, None


class SqueezeExcite(nn.Layer):
    """x * hardsigmoid(conv(relu(conv(avgpool(x))))), reduction 4, paddle's default slope."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.reduce = nn.Conv2D(channels, channels // 4, 1)
        self.expand = nn.Conv2D(channels // 4, channels, 1)

    def forward(self, x):
        return paddle.multiply(x, F.hardsigmoid(self.expand(F.relu(self.reduce(self.pool(x))))))


class Block(nn.Layer):
    """Depthwise RepLayer, optional SE, pointwise RepLayer."""

    def __init__(self, kernel: int, cin: int, cout: int, stride, se: bool) -> None:
        super().__init__()
        self.depthwise = RepLayer(cin, cin, kernel, stride, groups=cin)
        self.se = SqueezeExcite(cin) if se else None
        self.pointwise = RepLayer(cin, cout, 1)

    def forward(self, x):
        x = self.depthwise(x)
        return self.pointwise(self.se(x) if self.se is not None else x)


class PPLCNetV3(nn.Layer):
    """The backbone; `forward` returns the last four stage outputs (det) or the pooled map."""

    def __init__(self, scale: float, stages: tuple[_Stage, ...]) -> None:
        super().__init__()
        self.stem = ConvBN(3, divisible(16 * scale), 3, stride=2)
        self.stages = nn.LayerList([
            nn.Sequential(*[Block(k, divisible(cin * scale), divisible(cout * scale), s, se)
                            for k, cin, cout, s, se in stage])
            for stage in stages
        ])
        self.stage_channels = [divisible(stage[-1][2] * scale) for stage in stages]

    def features(self, x) -> list:
        x = self.stem(x)
        outputs = []
        for stage in self.stages:
            x = stage(x)
            outputs.append(x)
        return outputs[1:]

    def forward(self, x):
        return F.avg_pool2d(self.features(x)[-1], [3, 2])


class PPOCRv4Rec(nn.Layer):
    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.backbone = PPLCNetV3(REC_SCALE, _REC_STAGES)
        self.neck = SVTREncoder(self.backbone.stage_channels[-1], dims=120, kernel=(1, 3))
        self.head = nn.Linear(self.neck.out_channels, num_classes)

    def forward(self, x):
        # use_guide: the neck reads a copy of the backbone output (an `assign` in paddle)
        features = self.neck(self.backbone(x).clone())
        sequence = features.squeeze(2).transpose([0, 2, 1])  # (N, W, C)
        return F.softmax(self.head(sequence), axis=2)


class SqueezeExciteDB(nn.Layer):
    """The detector neck's SE: conv-relu-conv, hardsigmoid slope 0.2 offset 0.5."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.reduce = nn.Conv2D(channels, channels // 4, 1)
        self.expand = nn.Conv2D(channels // 4, channels, 1)

    def forward(self, x):
        scale = self.expand(F.relu(self.reduce(self.pool(x))))
        return x * F.hardsigmoid(scale, slope=0.2, offset=0.5)


class RSELayer(nn.Layer):
    """Conv (no bias), then x + SE(x) (shortcut)."""

    def __init__(self, cin: int, cout: int, kernel: int) -> None:
        super().__init__()
        self.conv = nn.Conv2D(cin, cout, kernel, padding=kernel // 2, bias_attr=False)
        self.se = SqueezeExciteDB(cout)

    def forward(self, x):
        x = self.conv(x)
        return x + self.se(x)


class Upsample(enum.Enum):
    """How the detector neck asks for its nearest x2/x4/x8 upsampling.

    SCALE is the published form (`scale_factor`). paddle2onnx 2.1 with paddle 3.3 refuses
    any interpolation given a scale ("the 0th elementwise MUST be ir::FloatAttribute",
    PaddlePaddle/Paddle#77757), so SIZE asks for the same static output size instead.
    """

    SCALE = "scale"
    SIZE = "size"


def _up(x, factor: int, how: Upsample):
    if how is Upsample.SIZE:
        size = [x.shape[2] * factor, x.shape[3] * factor]
        return F.upsample(x, size=size, mode="nearest", align_mode=1)
    return F.upsample(x, scale_factor=factor, mode="nearest", align_mode=1)


class RSEFPN(nn.Layer):
    def __init__(self, channels: list[int], out: int = 96, how: Upsample = Upsample.SCALE) -> None:
        super().__init__()
        self.how = how
        self.lateral = nn.LayerList([RSELayer(c, out, 1) for c in channels])
        self.smooth = nn.LayerList([RSELayer(out, out // 4, 3) for _ in channels])

    def forward(self, features):
        # indexing, not zip: paddle's dygraph-to-static rewrite refuses zip(strict=...)
        in2, in3, in4, in5 = [self.lateral[i](features[i]) for i in range(4)]
        out4 = in4 + _up(in5, 2, self.how)
        out3 = in3 + _up(out4, 2, self.how)
        out2 = in2 + _up(out3, 2, self.how)
        levels = [out2, out3, out4, in5]
        p2, p3, p4, p5 = [self.smooth[i](levels[i]) for i in range(4)]
        up = [_up(p5, 8, self.how), _up(p4, 4, self.how), _up(p3, 2, self.how)]
        return paddle.concat([*up, p2], axis=1)


class DBShrinkHead(nn.Layer):
    """DBHead's binarize branch, all DBHead runs at inference."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        inner = channels // 4
        self.conv = nn.Conv2D(channels, inner, 3, padding=1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(inner)
        self.up1 = nn.Conv2DTranspose(inner, inner, 2, stride=2)
        self.bn2 = nn.BatchNorm2D(inner)
        self.up2 = nn.Conv2DTranspose(inner, 1, 2, stride=2)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv(x)))
        x = F.relu(self.bn2(self.up1(x)))
        return F.sigmoid(self.up2(x))


class PPOCRv4Det(nn.Layer):
    def __init__(self, how: Upsample = Upsample.SCALE) -> None:
        super().__init__()
        self.backbone = PPLCNetV3(DET_SCALE, _DET_STAGES)
        widths = [int(c * DET_SCALE) for c in _DET_OUT]
        self.reduce = nn.LayerList([
            nn.Conv2D(cin, cout, 1)
            for cin, cout in zip(self.backbone.stage_channels[1:], widths, strict=True)
        ])
        self.neck = RSEFPN(widths, how=how)
        self.head = DBShrinkHead(96)

    def forward(self, x):
        features = self.backbone.features(x)
        features = [self.reduce[i](features[i]) for i in range(4)]
        return self.head(self.neck(features))
