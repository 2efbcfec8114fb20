"""A CRNN text recognizer (Shi et al. 2016) shaped the way OCR converters emit it.

The layer table is CRNN's: seven 3x3/2x2 convs (64 to 512 channels) with
2x2 and (2, 1)-strided max pools that collapse a 32-pixel-high line to height
one, then two bidirectional LSTMs (hidden 256) each followed by a dense
layer, ending in a per-timestep softmax over 37 symbols. Converter-shaped, as
PaddleOCR models exported through paddle2onnx look: every conv is bias-free
and followed by a per-channel Mul then Add, the activations are HardSwish
decomposed into Add/Clip/Div/Mul, the input is a 3x32x320 line image, and the
sequence head is Reshape/Transpose around ONNX LSTM ops and MatMul/Add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

POOL_2X2 = "pool2x2"
POOL_2X1 = "pool2x1"

# (out channels, kernel, pads) per conv, with the pools between them.
BACKBONE: tuple[tuple[int, int, int] | str, ...] = (
    (64, 3, 1),
    POOL_2X2,
    (128, 3, 1),
    POOL_2X2,
    (256, 3, 1),
    (256, 3, 1),
    POOL_2X1,
    (512, 3, 1),
    (512, 3, 1),
    POOL_2X1,
    (512, 2, 0),
)


@dataclass(frozen=True)
class CrnnConfig:
    width_divisor: int
    image_width: int
    hidden: int
    classes: int


CONFIGS = {
    Size.FULL: CrnnConfig(1, 320, 256, 37),
    Size.SMALL: CrnnConfig(16, 32, 16, 11),
}


def _backbone(g: GraphBuilder, x: Tensor, divisor: int) -> Tensor:
    for layer in BACKBONE:
        if layer == POOL_2X2:
            x = g.max_pool(x, 2, 2)
        elif layer == POOL_2X1:
            x = g.max_pool(x, 2, (2, 1), pads=(0, 1, 0, 1))
        else:
            out, kernel, pad = layer
            y = g.conv(x, out // divisor, kernel, pads=(pad,) * 4)
            x = g.hard_swish_decomposed(g.channel_affine(y))
    return x


def _bidirectional_lstm(g: GraphBuilder, x: Tensor, hidden: int) -> Tensor:
    """[T, 1, C] -> [T, 1, 2 * hidden] through one ONNX LSTM op (gates iofc, two bias sets)."""
    steps, batch, features = x.shape
    std = 1.0 / math.sqrt(hidden)
    w = g.weight("lstm_w", (2, 4 * hidden, features), std=std)
    r = g.weight("lstm_r", (2, 4 * hidden, hidden), std=std)
    b = g.weight("lstm_b", (2, 8 * hidden), std=std)
    y = g.node(
        "LSTM",
        [x, w, r, b],
        (steps, 2, batch, hidden),
        direction="bidirectional",
        hidden_size=hidden,
    )
    return g.reshape(g.transpose(y, (0, 2, 1, 3)), (steps, batch, 2 * hidden))


def build_crnn(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("crnn_converted")
    image = g.input("input", (1, 3, 32, cfg.image_width))
    features = _backbone(g, image, cfg.width_divisor)
    _, channels, _, width = features.shape
    sequence = g.transpose(g.reshape(features, (1, channels, width)), (2, 0, 1))
    y = g.linear(_bidirectional_lstm(g, sequence, cfg.hidden), cfg.hidden)
    logits = g.linear(_bidirectional_lstm(g, y, cfg.hidden), cfg.classes)
    probs = g.softmax(logits, axis=-1)
    return g.build([probs], doc="CRNN text recognizer, converter-shaped, random weights")
