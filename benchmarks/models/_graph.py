"""A tiny ONNX graph builder for the benchmark models.

`GraphBuilder` names every tensor uniquely, tracks static shapes so that each
layer helper knows its output shape, draws weights from a generator seeded by
the model name, and emits an opset-17, IR-version-10 `ModelProto`. Layer
helpers cover what the benchmark families need: convolutions, batch norm (as
an op or as the per-channel Mul/Add that converters emit), pools, activations,
matmuls, reshapes and the few sequence ops. Building the same model twice gives
the same bytes.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 10
HE_GAIN = math.sqrt(2.0)

Ints = int | tuple[int, int]


@dataclass(frozen=True)
class Tensor:
    """A named tensor with its static shape."""

    name: str
    shape: tuple[int, ...]

    @property
    def channels(self) -> int:
        return self.shape[1]


def _pair(value: Ints) -> tuple[int, int]:
    return value if isinstance(value, tuple) else (value, value)


def _window_out(size: int, kernel: int, stride: int, pad: int, *, ceil: bool = False) -> int:
    span = size + pad - kernel
    steps = -(-span // stride) if ceil else span // stride
    return steps + 1


def same_pads(kernel: Ints, dilation: int = 1) -> tuple[int, int, int, int]:
    """Symmetric ONNX pads [top, left, bottom, right] keeping the size at stride 1."""
    kh, kw = _pair(kernel)
    ph, pw = dilation * (kh - 1) // 2, dilation * (kw - 1) // 2
    return (ph, pw, ph, pw)


class GraphBuilder:
    """Accumulates nodes and initializers; each helper returns the new `Tensor`."""

    def __init__(self, name: str, *, seed: int | None = None) -> None:
        self.name = name
        self._rng = np.random.default_rng(zlib.crc32(name.encode()) if seed is None else seed)
        self._counts: dict[str, int] = {}
        self._nodes: list[onnx.NodeProto] = []
        self._initializers: list[onnx.TensorProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []

    # ----------------------------------------------------------------- core

    def fresh(self, prefix: str) -> str:
        """A name not used before: `prefix`, then `prefix_1`, `prefix_2`, ..."""
        count = self._counts.get(prefix, 0)
        self._counts[prefix] = count + 1
        return prefix if count == 0 else f"{prefix}_{count}"

    def input(self, name: str, shape: Sequence[int]) -> Tensor:
        tensor = Tensor(self.fresh(name), tuple(shape))
        self._inputs.append(
            helper.make_tensor_value_info(tensor.name, TensorProto.FLOAT, tensor.shape)
        )
        return tensor

    def constant(self, prefix: str, array: np.ndarray) -> Tensor:
        """An initializer holding `array` as given (weights, shapes, scalars)."""
        name = self.fresh(prefix)
        self._initializers.append(
            numpy_helper.from_array(np.require(array, requirements="C"), name)
        )
        return Tensor(name, tuple(array.shape))

    def scalar(self, prefix: str, value: float) -> Tensor:
        return self.constant(prefix, np.array(value, dtype=np.float32))

    def ints(self, prefix: str, values: Sequence[int]) -> Tensor:
        return self.constant(prefix, np.array(values, dtype=np.int64))

    def normal(self, shape: Sequence[int], std: float, mean: float = 0.0) -> np.ndarray:
        values = self._rng.standard_normal(tuple(shape), dtype=np.float32)
        return (values * np.float32(std) + np.float32(mean)).astype(np.float32)

    def weight(self, prefix: str, shape: Sequence[int], *, std: float, mean: float = 0.0) -> Tensor:
        return self.constant(prefix, self.normal(shape, std, mean))

    def node(
        self,
        op_type: str,
        inputs: Sequence[Tensor | None],
        shape: Sequence[int],
        *,
        prefix: str | None = None,
        **attributes: object,
    ) -> Tensor:
        """Adds one node with a single (first) output of the given shape."""
        out = self.fresh(prefix or op_type.lower())
        names = ["" if tensor is None else tensor.name for tensor in inputs]
        node_name = self.fresh(f"{op_type}_node")
        self._nodes.append(helper.make_node(op_type, names, [out], name=node_name, **attributes))
        return Tensor(out, tuple(shape))

    def build(self, outputs: Sequence[Tensor], *, doc: str = "") -> onnx.ModelProto:
        graph = helper.make_graph(
            self._nodes,
            self.name,
            self._inputs,
            [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, t.shape) for t in outputs],
            initializer=self._initializers,
            doc_string=doc,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="taso-onnx-benchmarks",
            ir_version=IR_VERSION,
        )
        return model

    # ---------------------------------------------------------- elementwise

    def unary(self, op_type: str, x: Tensor, **attributes: object) -> Tensor:
        return self.node(op_type, [x], x.shape, **attributes)

    def binary(self, op_type: str, a: Tensor, b: Tensor) -> Tensor:
        shape = np.broadcast_shapes(a.shape, b.shape)
        return self.node(op_type, [a, b], shape)

    def relu(self, x: Tensor) -> Tensor:
        return self.unary("Relu", x)

    def sigmoid(self, x: Tensor) -> Tensor:
        return self.unary("Sigmoid", x)

    def tanh(self, x: Tensor) -> Tensor:
        return self.unary("Tanh", x)

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return self.binary("Add", a, b)

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        return self.binary("Mul", a, b)

    def add_n(self, tensors: Sequence[Tensor]) -> Tensor:
        total = tensors[0]
        for tensor in tensors[1:]:
            total = self.add(total, tensor)
        return total

    def hard_sigmoid_decomposed(self, x: Tensor) -> Tensor:
        """relu6(x + 3) / 6 as converters emit it: Add, Clip(0, 6), Div."""
        shifted = self.add(x, self.scalar("three", 3.0))
        clipped = self.node(
            "Clip", [shifted, self.scalar("zero", 0.0), self.scalar("six", 6.0)], x.shape
        )
        return self.binary("Div", clipped, self.scalar("six", 6.0))

    def hard_swish_decomposed(self, x: Tensor) -> Tensor:
        """x * relu6(x + 3) / 6 as Add, Clip, Div, Mul."""
        return self.mul(x, self.hard_sigmoid_decomposed(x))

    def gelu_erf(self, x: Tensor) -> Tensor:
        """0.5 * x * (1 + erf(x / sqrt 2)) as Div, Erf, Add, Mul, Mul."""
        scaled = self.binary("Div", x, self.scalar("sqrt2", math.sqrt(2.0)))
        erf = self.unary("Erf", scaled)
        one_plus = self.add(erf, self.scalar("one", 1.0))
        return self.mul(self.mul(x, one_plus), self.scalar("half", 0.5))

    # ---------------------------------------------------------- conv & norm

    def conv(
        self,
        x: Tensor,
        out_channels: int,
        kernel: Ints,
        *,
        stride: Ints = 1,
        pads: Sequence[int] | None = None,
        groups: int = 1,
        bias: bool = False,
        gain: float = HE_GAIN,
    ) -> Tensor:
        """Conv with He-style weights; `pads` defaults to 'same' for odd kernels."""
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        pads = tuple(pads) if pads is not None else same_pads((kh, kw))
        fan_in = (x.channels // groups) * kh * kw
        w = self.weight(
            "w", (out_channels, x.channels // groups, kh, kw), std=gain / math.sqrt(fan_in)
        )
        b = self.weight("b", (out_channels,), std=0.01) if bias else None
        _, _, h, wd = x.shape
        shape = (
            x.shape[0],
            out_channels,
            _window_out(h, kh, sh, pads[0] + pads[2]),
            _window_out(wd, kw, sw, pads[1] + pads[3]),
        )
        return self.node(
            "Conv",
            [x, w] if b is None else [x, w, b],
            shape,
            kernel_shape=[kh, kw],
            strides=[sh, sw],
            pads=list(pads),
            group=groups,
        )

    def _bn_arrays(self, channels: int, gamma: float) -> dict[str, np.ndarray]:
        return {
            "scale": self.normal((channels,), 0.05 * gamma, gamma),
            "bias": self.normal((channels,), 0.05),
            "mean": self.normal((channels,), 0.05),
            "var": 1.0 + np.abs(self.normal((channels,), 0.05)),
        }

    def batch_norm(self, x: Tensor, *, eps: float = 1e-5, gamma: float = 1.0) -> Tensor:
        """Inference BatchNormalization; `gamma` scales the random scale vector."""
        arrays = self._bn_arrays(x.channels, gamma)
        params = [self.constant(f"bn_{key}", value) for key, value in arrays.items()]
        return self.node("BatchNormalization", [x, *params], x.shape, epsilon=eps)

    def channel_affine(self, x: Tensor, *, gamma: float = 1.0) -> Tensor:
        """Batch norm folded the way TF/Paddle converters emit it: Mul then Add per channel."""
        channels = x.channels
        scale = self.normal((channels, 1, 1), 0.05 * gamma, gamma)
        shift = self.normal((channels, 1, 1), 0.05)
        return self.add(self.mul(x, self.constant("bn_mul", scale)), self.constant("bn_add", shift))

    def layer_norm(self, x: Tensor, *, eps: float = 1e-12) -> Tensor:
        width = x.shape[-1]
        scale = self.weight("ln_scale", (width,), std=0.05, mean=1.0)
        bias = self.weight("ln_bias", (width,), std=0.05)
        return self.node("LayerNormalization", [x, scale, bias], x.shape, axis=-1, epsilon=eps)

    def layer_norm_decomposed(self, x: Tensor, *, eps: float = 1e-5) -> Tensor:
        """(x - mean) / sqrt(var + eps) * g + b as ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add."""
        reduced = (*x.shape[:-1], 1)
        mean = self.node("ReduceMean", [x], reduced, axes=[-1], keepdims=1)
        centered = self.binary("Sub", x, mean)
        squared = self.binary("Pow", centered, self.scalar("two", 2.0))
        var = self.node("ReduceMean", [squared], reduced, axes=[-1], keepdims=1)
        std = self.unary("Sqrt", self.add(var, self.scalar("eps", eps)))
        normed = self.binary("Div", centered, std)
        scale = self.weight("ln_scale", (x.shape[-1],), std=0.05, mean=1.0)
        bias = self.weight("ln_bias", (x.shape[-1],), std=0.05)
        return self.add(self.mul(normed, scale), bias)

    # ---------------------------------------------------------------- pools

    def _pool(
        self,
        op_type: str,
        x: Tensor,
        kernel: Ints,
        stride: Ints,
        pads: Sequence[int],
        **attrs: object,
    ) -> Tensor:
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        ceil = bool(attrs.get("ceil_mode", 0))
        shape = (
            *x.shape[:2],
            _window_out(x.shape[2], kh, sh, pads[0] + pads[2], ceil=ceil),
            _window_out(x.shape[3], kw, sw, pads[1] + pads[3], ceil=ceil),
        )
        return self.node(
            op_type, [x], shape, kernel_shape=[kh, kw], strides=[sh, sw], pads=list(pads), **attrs
        )

    def max_pool(
        self,
        x: Tensor,
        kernel: Ints,
        stride: Ints,
        *,
        pads: Sequence[int] = (0, 0, 0, 0),
        ceil: bool = False,
    ) -> Tensor:
        return self._pool("MaxPool", x, kernel, stride, pads, ceil_mode=int(ceil))

    def avg_pool(
        self,
        x: Tensor,
        kernel: Ints,
        stride: Ints,
        *,
        pads: Sequence[int] = (0, 0, 0, 0),
        count_include_pad: bool = False,
    ) -> Tensor:
        return self._pool(
            "AveragePool", x, kernel, stride, pads, count_include_pad=int(count_include_pad)
        )

    def global_avg_pool(self, x: Tensor) -> Tensor:
        return self.node("GlobalAveragePool", [x], (*x.shape[:2], 1, 1))

    def pad(self, x: Tensor, pads: Sequence[int]) -> Tensor:
        """Zero padding of H and W by ONNX-ordered [top, left, bottom, right]."""
        top, left, bottom, right = pads
        all_pads = self.ints("pads", [0, 0, top, left, 0, 0, bottom, right])
        shape = (*x.shape[:2], x.shape[2] + top + bottom, x.shape[3] + left + right)
        return self.node("Pad", [x, all_pads], shape, mode="constant")

    # ------------------------------------------------------- shapes & dense

    def concat(self, tensors: Sequence[Tensor], *, axis: int = 1) -> Tensor:
        shape = list(tensors[0].shape)
        shape[axis] = sum(t.shape[axis] for t in tensors)
        return self.node("Concat", list(tensors), shape, axis=axis)

    def split(self, x: Tensor, sizes: Sequence[int], *, axis: int = 1) -> list[Tensor]:
        """One Split node with explicit sizes (a constant input, as opset 13+ exporters write it)."""
        outs = [self.fresh("split") for _ in sizes]
        node_name = self.fresh("Split_node")
        inputs = [x.name, self.ints("split", sizes).name]
        self._nodes.append(helper.make_node("Split", inputs, outs, name=node_name, axis=axis))
        shapes = [tuple(size if i == axis else d for i, d in enumerate(x.shape)) for size in sizes]
        return [Tensor(name, shape) for name, shape in zip(outs, shapes, strict=True)]

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        target = np.arange(math.prod(x.shape)).reshape(shape).shape
        return self.node("Reshape", [x, self.ints("shape", shape)], target)

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        return self.node("Transpose", [x], [x.shape[p] for p in perm], perm=list(perm))

    def flatten(self, x: Tensor) -> Tensor:
        return self.node("Flatten", [x], (x.shape[0], math.prod(x.shape[1:])), axis=1)

    def slice(self, x: Tensor, *, axis: int, start: int, end: int) -> Tensor:
        shape = list(x.shape)
        shape[axis] = len(range(*slice(start, end).indices(x.shape[axis])))
        args = [self.ints("starts", [start]), self.ints("ends", [end]), self.ints("axes", [axis])]
        return self.node("Slice", [x, *args], shape)

    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return self.node("MatMul", [a, b], (*batch, a.shape[-2], b.shape[-1]))

    def linear(
        self, x: Tensor, out_features: int, *, gain: float = 1.0, bias: bool = True
    ) -> Tensor:
        """x @ W (+ b) as MatMul and Add, the way exporters emit dense layers."""
        w = self.weight("w", (x.shape[-1], out_features), std=gain / math.sqrt(x.shape[-1]))
        y = self.matmul(x, w)
        return self.add(y, self.weight("b", (out_features,), std=0.01)) if bias else y

    def gemm(self, x: Tensor, out_features: int, *, gain: float = 1.0) -> Tensor:
        """A classifier head as a single Gemm (what torch.onnx emits for nn.Linear)."""
        w = self.weight("w", (out_features, x.shape[1]), std=gain / math.sqrt(x.shape[1]))
        b = self.weight("b", (out_features,), std=0.01)
        return self.node("Gemm", [x, w, b], (x.shape[0], out_features), transB=1)

    def softmax(self, x: Tensor, *, axis: int = -1) -> Tensor:
        return self.unary("Softmax", x, axis=axis)
