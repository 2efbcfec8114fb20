"""NASRNN: the recurrent cell found by neural architecture search (Zoph & Le 2017), unrolled.

The cell follows TensorFlow's `NASCell`: eight gate pre-activations, each the
sum (or, for one gate, the product) of a projection of the input and of the
previous hidden state; two further layers of Sigmoid/ReLU/Tanh combinations;
the previous cell state injected into the second layer. As in TASO's
benchmark, each gate has its own MatMul (hidden 512, 5 steps, batch 1), so
merging the eight projections is left to the optimizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx

from benchmarks.models._graph import GraphBuilder, Tensor
from benchmarks.models._types import Size

GATES = 8


@dataclass(frozen=True)
class NasRnnConfig:
    hidden: int
    steps: int


CONFIGS = {
    Size.FULL: NasRnnConfig(hidden=512, steps=5),
    Size.SMALL: NasRnnConfig(hidden=16, steps=2),
}


def _project(g: GraphBuilder, x: Tensor, weight: Tensor) -> Tensor:
    return g.matmul(x, weight)


def _cell(
    g: GraphBuilder, x: Tensor, h: Tensor, c: Tensor, weights: list[tuple[Tensor, Tensor]]
) -> tuple[Tensor, Tensor]:
    """One NASCell step: returns (new hidden, new cell)."""
    xs = [_project(g, x, wx) for wx, _ in weights]
    hs = [_project(g, h, wh) for _, wh in weights]
    pre = [g.add(xi, hi) for xi, hi in zip(xs, hs, strict=True)]
    pre[3] = g.mul(xs[3], hs[3])  # NASCell's one multiplicative gate
    acts = (g.sigmoid, g.relu, g.sigmoid, g.relu, g.tanh, g.sigmoid, g.tanh, g.sigmoid)
    l1 = [act(t) for act, t in zip(acts, pre, strict=True)]
    l2_0 = g.tanh(g.mul(l1[0], l1[1]))
    l2_1 = g.tanh(g.add(l1[2], l1[3]))
    l2_2 = g.tanh(g.mul(l1[4], l1[5]))
    l2_3 = g.sigmoid(g.add(l1[6], l1[7]))
    l2_0 = g.tanh(g.add(l2_0, c))
    new_c = g.mul(l2_0, l2_1)
    new_h = g.tanh(g.mul(new_c, g.tanh(g.add(l2_2, l2_3))))
    return new_h, new_c


def build_nasrnn(size: Size) -> onnx.ModelProto:
    cfg = CONFIGS[size]
    g = GraphBuilder("nasrnn")
    std = 1.0 / math.sqrt(cfg.hidden)
    xs = [g.input(f"x_{t}", (1, cfg.hidden)) for t in range(cfg.steps)]
    h = g.input("h_0", (1, cfg.hidden))
    c = g.input("c_0", (1, cfg.hidden))
    weights = [
        (
            g.weight("w_input", (cfg.hidden, cfg.hidden), std=std),
            g.weight("w_hidden", (cfg.hidden, cfg.hidden), std=std),
        )
        for _ in range(GATES)
    ]
    for x in xs:
        h, c = _cell(g, x, h, c, weights)
    return g.build([h, c], doc="NASRNN (TF NASCell), unrolled, random weights")
