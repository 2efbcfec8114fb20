"""Transformer encoders: BERT-base's layer stack and a converter-exported encoder.

BERT-base (Devlin et al. 2019): 12 post-LN layers, hidden 768, 12 heads,
FFN 3072 with GELU, sequence 128; attention scores divided by sqrt(64), an
additive mask, Softmax; LayerNormalization ops (eps 1e-12). Opset 17 has no
Gelu op, so GELU is the erf form (Div, Erf, Add, Mul, Mul) in both models.

The converter-style encoder is DistilBERT's stack (6 layers of the same
width) as older torch.onnx exports emit it: LayerNorm decomposed into
ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add, head reshapes computed at run time from
Shape/Gather/Unsqueeze/Concat, queries scaled before the score MatMul, and the
0/1 attention mask turned into an additive bias inside the graph.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size


class Style(enum.Enum):
    ARCHITECTURE = "architecture"  # fused LayerNormalization, constant reshape shapes
    EXPORTED = "exported"  # decomposed LayerNorm, shape arithmetic in the graph


@dataclass(frozen=True)
class EncoderConfig:
    layers: int
    hidden: int
    heads: int
    ffn: int
    sequence: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


BERT_BASE = {
    Size.FULL: EncoderConfig(layers=12, hidden=768, heads=12, ffn=3072, sequence=128),
    Size.SMALL: EncoderConfig(layers=2, hidden=32, heads=4, ffn=64, sequence=16),
}
DISTILBERT = {
    Size.FULL: EncoderConfig(layers=6, hidden=768, heads=12, ffn=3072, sequence=128),
    Size.SMALL: EncoderConfig(layers=2, hidden=32, heads=4, ffn=64, sequence=16),
}


class _Encoder:
    """Emits one encoder in the requested style."""

    def __init__(self, g: GraphBuilder, cfg: EncoderConfig, style: Style) -> None:
        self.g, self.cfg, self.style = g, cfg, style

    def norm(self, x: Tensor) -> Tensor:
        if self.style is Style.ARCHITECTURE:
            return self.g.layer_norm(x, eps=1e-12)
        return self.g.layer_norm_decomposed(x, eps=1e-12)

    def split_heads(self, x: Tensor) -> Tensor:
        """[1, S, H] -> [1, heads, S, head_dim]."""
        cfg, g = self.cfg, self.g
        shape = (x.shape[0], x.shape[1], cfg.heads, cfg.head_dim)
        if self.style is Style.ARCHITECTURE:
            split = g.reshape(x, shape)
        else:
            dims = [self.runtime_dim(x, axis) for axis in (0, 1)]
            tail = g.ints("heads", [cfg.heads, cfg.head_dim])
            target = g.node("Concat", [*dims, tail], (4,), axis=0)
            split = g.node("Reshape", [x, target], shape)
        return g.transpose(split, (0, 2, 1, 3))

    def merge_heads(self, x: Tensor) -> Tensor:
        """[1, heads, S, head_dim] -> [1, S, H]."""
        g = self.g
        merged = g.transpose(x, (0, 2, 1, 3))
        shape = (x.shape[0], x.shape[2], self.cfg.hidden)
        if self.style is Style.ARCHITECTURE:
            return g.reshape(merged, shape)
        dims = [self.runtime_dim(merged, axis) for axis in (0, 1)]
        target = g.node("Concat", [*dims, g.ints("hidden", [self.cfg.hidden])], (3,), axis=0)
        return g.node("Reshape", [merged, target], shape)

    def runtime_dim(self, x: Tensor, axis: int) -> Tensor:
        """Shape -> Gather -> Unsqueeze, as exporters compute a dimension for a Reshape."""
        g = self.g
        shape = g.node("Shape", [x], (len(x.shape),))
        scalar = g.node("Gather", [shape, g.constant("axis", np.array(axis, dtype=np.int64))], ())
        return g.node("Unsqueeze", [scalar, g.ints("unsqueeze_axes", [0])], (1,))

    def attention(self, x: Tensor, mask: Tensor) -> Tensor:
        g = self.g
        scale = g.scalar("sqrt_head_dim", float(np.sqrt(self.cfg.head_dim)))
        q = self.split_heads(g.linear(x, self.cfg.hidden))
        k = self.split_heads(g.linear(x, self.cfg.hidden))
        v = self.split_heads(g.linear(x, self.cfg.hidden))
        if self.style is Style.EXPORTED:
            q = g.binary("Div", q, scale)
        scores = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
        if self.style is Style.ARCHITECTURE:
            scores = g.binary("Div", scores, scale)
        probs = g.softmax(g.add(scores, mask), axis=-1)
        return g.linear(self.merge_heads(g.matmul(probs, v)), self.cfg.hidden)

    def layer(self, x: Tensor, mask: Tensor) -> Tensor:
        g = self.g
        x = self.norm(g.add(self.attention(x, mask), x))
        inner = g.gelu_erf(g.linear(x, self.cfg.ffn))
        return self.norm(g.add(g.linear(inner, self.cfg.hidden), x))

    def additive_mask(self, mask01: Tensor) -> Tensor:
        """[1, S] of ones/zeros -> [1, 1, 1, S] of 0/-10000, as HF models compute it."""
        g = self.g
        s = mask01.shape[1]
        expanded = g.node("Unsqueeze", [mask01, g.ints("mask_axes", [1, 2])], (1, 1, 1, s))
        inverted = g.binary("Sub", g.scalar("one", 1.0), expanded)
        return g.mul(inverted, g.scalar("mask_value", -10000.0))


def _build(name: str, cfg: EncoderConfig, style: Style, doc: str) -> onnx.ModelProto:
    g = GraphBuilder(name)
    x = g.input("hidden_states", (1, cfg.sequence, cfg.hidden))
    encoder = _Encoder(g, cfg, style)
    if style is Style.ARCHITECTURE:
        mask = g.input("attention_bias", (1, 1, 1, cfg.sequence))
    else:
        mask = encoder.additive_mask(g.input("attention_mask", (1, cfg.sequence)))
    for _ in range(cfg.layers):
        x = encoder.layer(x, mask)
    return g.build([x], doc=doc)


def build_bert_base(size: Size) -> onnx.ModelProto:
    doc = "BERT-base encoder layer stack (no embeddings/pooler), random weights"
    return _build("bert_base", BERT_BASE[size], Style.ARCHITECTURE, doc)


def build_transformer_exported(size: Size) -> onnx.ModelProto:
    doc = "DistilBERT-base encoder stack as torch.onnx exports it (decomposed LN/GELU)"
    return _build("transformer_exported", DISTILBERT[size], Style.EXPORTED, doc)
