"""Build a small converter-style CNN (the kind TF/Paddle converters emit) and save it.

Usage: python -m taso.examples.make_model example.onnx   (from the wheel or a checkout)

Conv -> BatchNorm as separate Mul/Add -> HardSwish decomposed as x*clip(x+3,0,6)/6, twice,
then global pooling and a Gemm classifier. Random weights from a fixed seed.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh


def build(channels: int = 32, size: int = 64, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(nh.from_array(array.astype(np.float32), name))
        return name

    def block(x: str, cin: int, cout: int, k: int, tag: str) -> str:
        w = const(f"{tag}_w", rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)))
        nodes.append(h.make_node("Conv", [x, w], [f"{tag}_conv"], pads=[k // 2] * 4))
        scale = const(f"{tag}_scale", rng.uniform(0.5, 1.5, (1, cout, 1, 1)))
        shift = const(f"{tag}_shift", rng.uniform(-0.2, 0.2, (1, cout, 1, 1)))
        nodes.append(h.make_node("Mul", [f"{tag}_conv", scale], [f"{tag}_bn_mul"]))
        nodes.append(h.make_node("Add", [f"{tag}_bn_mul", shift], [f"{tag}_bn"]))
        nodes.append(h.make_node("Add", [f"{tag}_bn", "three"], [f"{tag}_p3"]))
        nodes.append(h.make_node("Clip", [f"{tag}_p3", "zero", "six"], [f"{tag}_clip"]))
        nodes.append(h.make_node("Mul", [f"{tag}_bn", f"{tag}_clip"], [f"{tag}_m"]))
        nodes.append(h.make_node("Div", [f"{tag}_m", "six"], [f"{tag}_out"]))
        return f"{tag}_out"

    for name, value in (("three", 3.0), ("zero", 0.0), ("six", 6.0)):
        const(name, np.array(value))
    x = block("image", 3, channels, 3, "b1")
    x = block(x, channels, channels, 3, "b2")
    nodes.append(h.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(h.make_node("Flatten", ["pooled"], ["flat"]))
    fc = const("fc_w", rng.standard_normal((10, channels)) * 0.1)
    nodes.append(h.make_node("Gemm", ["flat", fc], ["logits"], transB=1))
    graph = h.make_graph(
        nodes, "example_cnn",
        [h.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
        [h.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], producer_name="taso-example")
    model.ir_version = 10
    return model


def main(argv: list[str] | None = None) -> int:
    """Write the example model to the path given (default: example.onnx)."""
    args = sys.argv[1:] if argv is None else argv
    target = args[0] if args else "example.onnx"
    onnx.save_model(build(), target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
