"""A device-free cost model: a per-node FLOPs/bytes roofline (`AnalyticalBackend`).

Shapes come from onnx shape inference on the profile's concrete input shapes. Each node
costs `max(flops / peak, bytes / bandwidth) + overhead`; the model costs the sum.
Assumptions (constructor arguments, documented defaults):

* `peak_gflops = 170`: fp32 peak of a few AVX2/AVX-512 cores with FMA;
* `bandwidth_gbs = 20`: sustained DRAM bandwidth available to those cores;
* `overhead_us = 2`: per-kernel dispatch cost in ORT;
* `simd_block = 16`, `narrow_group_efficiency = 0.15`: a grouped conv (not depthwise)
  whose channels per group, in or out, are not multiples of ORT's NCHWc block (16 floats
  with AVX-512) runs per group on the generic path at 0.15 of peak. Measured with ORT 1.31
  on 2 threads, 3x3 convs, 128-1024 channels: 4 or 8 channels per group ran at 10-41
  GFLOP/s, 16 at 57-124, 32 and more at 93-223;
* bytes = every input (weights included) read once + every output written once;
* FLOPs: Conv `2*N*M*prod(out_spatial)*C/g*prod(kernel)`, MatMul/Gemm `2*M*N*K` (per batch),
  pooling `out * prod(kernel)`, elementwise `out * c` (c = 1, or 4 for transcendental ops);
  other ops move bytes only; pure view ops (Reshape, Identity, ...) are free.

It does not model ORT's caches or threading, nor its fusions (but see
`AnalyticalCostModel`, which knows the Conv folds): use it to rank, not to predict.
`run` executes with onnx's pure-NumPy reference evaluator (slow, no device needed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import onnx
import onnx.reference

from taso.backends._session import ModelSource, call_ort, load_structure
from taso.backends.profiles import Shape, ShapeProfile, real_inputs, resolve_shapes

_SMALL_INITIALIZER = 64  # elements; kept in the shape-only model so Reshape etc. infer
_FREE = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Constant"})
_ELEMENTWISE = {
    **dict.fromkeys(["Add", "Sub", "Mul", "Div", "Relu", "Max", "Min", "Neg", "Abs", "Clip"], 1),
    **dict.fromkeys(["LeakyRelu", "PRelu", "Where", "Sum", "Mean", "BatchNormalization"], 2),
    **dict.fromkeys(["Sigmoid", "Tanh", "Exp", "Log", "Erf", "Sqrt", "Pow", "Gelu"], 4),
}


@dataclass(frozen=True)
class _NodeShapes:
    """Shapes and element sizes known after inference, by value name."""

    shapes: Mapping[str, Shape]
    itemsizes: Mapping[str, int]

    def numel(self, name: str) -> int:
        shape = self.shapes.get(name)
        return math.prod(shape) if shape is not None else 0

    def nbytes(self, name: str) -> int:
        return self.numel(name) * self.itemsizes.get(name, 4)


@dataclass(frozen=True)
class AnalyticalBackend:
    """Roofline cost model; see the module docstring for the assumptions."""

    peak_gflops: float = 170.0
    bandwidth_gbs: float = 20.0
    overhead_us: float = 2.0
    simd_block: int = 16
    narrow_group_efficiency: float = 0.15

    name: ClassVar[str] = "analytical"

    @property
    def device(self) -> str:
        return f"roofline {self.peak_gflops:g} GFLOP/s {self.bandwidth_gbs:g} GB/s"

    def run(self, model: ModelSource, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        source = model if isinstance(model, onnx.ModelProto) else str(model)
        evaluator = call_ort(
            "loading the model in the reference evaluator",
            lambda: onnx.reference.ReferenceEvaluator(source),
        )
        values = call_ort(
            "running the reference evaluator", lambda: evaluator.run(None, dict(inputs))
        )
        return dict(zip(evaluator.output_names, values, strict=True))

    def cost_of(
        self,
        model: ModelSource,
        *,
        profile: ShapeProfile | None = None,
        signature: str | None = None,
    ) -> float:
        """Roofline estimate in milliseconds (`signature` is ignored: nothing to cache)."""
        structure = load_structure(model)
        shapes = infer_shapes(structure, resolve_shapes(structure, profile))
        return sum(self.node_cost_ms(node, shapes) for node in structure.graph.node)

    def node_cost_ms(self, node: onnx.NodeProto, shapes: _NodeShapes) -> float:
        if node.op_type in _FREE and not node.domain:
            return 0.0
        flops = node_flops(node, shapes)
        moved = sum(shapes.nbytes(name) for name in (*node.input, *node.output) if name)
        compute_s = flops / (self.peak_gflops * 1e9 * self._efficiency(node, shapes))
        memory_s = moved / (self.bandwidth_gbs * 1e9)
        return (max(compute_s, memory_s) + self.overhead_us * 1e-6) * 1e3

    def _efficiency(self, node: onnx.NodeProto, shapes: _NodeShapes) -> float:
        """Share of peak a node's FLOPs run at: `narrow_group_efficiency` for grouped
        convs whose groups do not fill the NCHWc block, else 1."""
        if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            return 1.0
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        weight = shapes.shapes.get(node.input[1])
        if group == 1 or not weight or len(weight) < 2:
            return 1.0
        per_group_in, per_group_out = weight[1], weight[0] // group
        if per_group_in == 1 and per_group_out == 1:
            return 1.0  # depthwise: its own kernel, memory-bound
        if per_group_in % self.simd_block == 0 and per_group_out % self.simd_block == 0:
            return 1.0
        return self.narrow_group_efficiency


def node_flops(node: onnx.NodeProto, shapes: _NodeShapes) -> float:
    """Floating-point operations of one node (0 when unknown)."""
    if node.domain not in ("", "ai.onnx"):
        return 0.0
    counter = _FLOP_COUNTERS.get(node.op_type)
    if counter is not None:
        return counter(node, shapes)
    return float(shapes.numel(node.output[0]) * _ELEMENTWISE.get(node.op_type, 0))


def _conv_flops(node: onnx.NodeProto, shapes: _NodeShapes) -> float:
    weight = shapes.shapes.get(node.input[1])
    return 2.0 * shapes.numel(node.output[0]) * math.prod(weight[1:]) if weight else 0.0


def _matmul_flops(node: onnx.NodeProto, shapes: _NodeShapes) -> float:
    left = shapes.shapes.get(node.input[0])
    if not left:
        return 0.0
    transposed = any(a.name == "transA" and a.i for a in node.attribute)
    inner = left[0] if transposed and len(left) == 2 else left[-1]
    return 2.0 * shapes.numel(node.output[0]) * inner


def _pool_flops(node: onnx.NodeProto, shapes: _NodeShapes) -> float:
    kernel = next((tuple(a.ints) for a in node.attribute if a.name == "kernel_shape"), ())
    return float(shapes.numel(node.output[0]) * math.prod(kernel))


def _global_pool_flops(node: onnx.NodeProto, shapes: _NodeShapes) -> float:
    return float(shapes.numel(node.input[0]))


_FLOP_COUNTERS: dict[str, Callable[[onnx.NodeProto, _NodeShapes], float]] = {
    "Conv": _conv_flops,
    "ConvTranspose": _conv_flops,
    "MatMul": _matmul_flops,
    "Gemm": _matmul_flops,
    "AveragePool": _pool_flops,
    "MaxPool": _pool_flops,
    "GlobalAveragePool": _global_pool_flops,
    "GlobalMaxPool": _global_pool_flops,
}


def infer_shapes(model: onnx.ModelProto, input_shapes: Mapping[str, Shape]) -> _NodeShapes:
    """Run onnx shape inference on a weight-free copy with concrete input shapes."""
    light = _shape_only_model(model, input_shapes)
    inferred = call_ort("shape inference", lambda: onnx.shape_inference.infer_shapes(light, data_prop=True))
    shapes: dict[str, Shape] = {}
    itemsizes: dict[str, int] = {}
    graph = inferred.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
            if all(d >= 0 for d in dims):
                shapes[value.name] = dims
                itemsizes[value.name] = _itemsize(tensor.elem_type)
    for init in graph.initializer:  # small weights stay initializers: no value info of their own
        shapes.setdefault(init.name, tuple(init.dims))
        itemsizes.setdefault(init.name, _itemsize(init.data_type))
    return _NodeShapes(shapes, itemsizes)


def _shape_only_model(model: onnx.ModelProto, input_shapes: Mapping[str, Shape]) -> onnx.ModelProto:
    """The graph with fixed input shapes; large initializers become typed inputs."""
    graph = onnx.GraphProto(name=model.graph.name)
    graph.node.extend(model.graph.node)
    for value in model.graph.output:  # drop declared (possibly symbolic) output shapes
        elem_type = value.type.tensor_type.elem_type
        graph.output.append(onnx.helper.make_tensor_value_info(value.name, elem_type, None))
    for value in real_inputs(model.graph):
        elem_type = value.type.tensor_type.elem_type
        graph.input.append(
            onnx.helper.make_tensor_value_info(value.name, elem_type, input_shapes[value.name])
        )
    for tensor in model.graph.initializer:
        if math.prod(tensor.dims) <= _SMALL_INITIALIZER and tensor.data_location != tensor.EXTERNAL:
            graph.initializer.append(tensor)
        else:
            info = onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            graph.input.append(info)
    light = onnx.helper.make_model(graph, opset_imports=model.opset_import)
    light.ir_version = model.ir_version
    light.functions.extend(model.functions)
    return light


def _itemsize(elem_type: int) -> int:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return 4
