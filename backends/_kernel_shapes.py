"""Static shapes of every value in a graph ONNX Runtime optimized (its kernel graph).

ORT's optimized graph holds its own ops beside the standard ones: the blocked-layout
ops of `com.microsoft.nchwc` (ReorderInput/ReorderOutput and NCHWc Conv, pools and
Upsample) and the fused kernels of `com.microsoft` (FusedConv, FusedGemm, FusedMatMul,
QuickGelu, Gelu, SkipLayerNormalization, ...). onnx's shape inference knows none of
them, so the shapes come, in this order, from:

1. ORT itself (`ShapeSource.ORT`, the default): a session with optimizations off over a
   weight-free copy of the graph (weights become graph inputs of their shapes, small
   constants stay) in which every value is a graph output; ORT's own shape inference,
   which knows its ops, types those outputs without running anything (milliseconds);
2. rules, where ORT refuses the copy or leaves a shape open (`ShapeSource.RULES` alone):
   standard ops go through `onnx.shape_inference.infer_node_outputs`, one node at a time
   (small initializers are passed as data, so Reshape/Slice/Pad read their constants);
   ORT's ops have a rule each in `_RULES` (an NCHWc tensor is [N, C rounded up to the
   block, H, W]: the channel count of the reordered weights, which are stored padded);
3. anything else raises `KernelShapeError` (also a rule that fails on an attribute form
   it does not know), and the caller learns the shapes by running the graph under ORT's
   profiler instead.

tests/test_kernel_shapes_ort.py checks both sources against the shapes ORT's profiler
reports, kernel by kernel, for every op type of the benchmark corpus.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import onnx

from taso.backends._session import GraphOptimization, SessionConfig, create_session
from taso.errors import BackendError

Shape = tuple[int, ...]

NCHWC = "com.microsoft.nchwc"
MICROSOFT = "com.microsoft"
_SMALL_DATA = 64  # initializers up to this many elements are passed to onnx as data


class KernelShapeError(Exception):
    """A value's static shape cannot be inferred (the message says which and why)."""


@dataclass(frozen=True)
class TypedShape:
    elem_type: int
    shape: Shape


def elem_type_of(name: str) -> int:
    """onnx's element type for ORT's name of it ("float", "int64", "tensor(float16)";
    0, onnx's UNDEFINED, for a name onnx does not know)."""
    bare = name.removeprefix("tensor(").removesuffix(")")
    try:
        return onnx.TensorProto.DataType.Value(bare.upper())
    except ValueError:
        return onnx.TensorProto.UNDEFINED


class ShapeSource(enum.Enum):
    """Where `infer_kernel_shapes` takes the shapes of computed values from."""

    ORT = "ort"  # ORT's own shape inference; the rules where it leaves a shape open
    RULES = "rules"  # onnx's inference and `_RULES` only (the fallback, tested on its own)


def infer_kernel_shapes(
    model: onnx.ModelProto, block: int, *, source: ShapeSource = ShapeSource.ORT
) -> dict[str, TypedShape]:
    """Every value's dtype and static shape; `block` is the NCHWc channel block (8 or 16)."""
    known, data = _given(model)
    if source is ShapeSource.ORT:
        found = _ort_shapes(model, known, data)
        if found is not None:
            return found
    opsets = {o.domain: o.version for o in model.opset_import}
    for node in _topological(model.graph.node, set(known)):
        outputs = _infer_node(node, known, data, opsets, block)
        for name, typed in zip(node.output, outputs, strict=False):
            if name:
                known[name] = typed
    return known


def _given(model: onnx.ModelProto) -> tuple[dict[str, TypedShape], dict[str, onnx.TensorProto]]:
    """The initializers' and graph inputs' shapes, and the initializers small enough to
    pass as data."""
    known: dict[str, TypedShape] = {}
    data: dict[str, onnx.TensorProto] = {}
    for init in model.graph.initializer:
        known[init.name] = TypedShape(init.data_type, tuple(init.dims))
        if math.prod(init.dims) <= _SMALL_DATA and init.data_location != onnx.TensorProto.EXTERNAL:
            data[init.name] = init
    for value in model.graph.input:
        if value.name not in known:
            known[value.name] = _declared(value)
    return known, data


def _ort_shapes(
    model: onnx.ModelProto, given: Mapping[str, TypedShape], data: Mapping[str, onnx.TensorProto]
) -> dict[str, TypedShape] | None:
    """Every value's shape as ORT's own inference types it (None if ORT refuses the
    weight-free copy or leaves any shape open)."""
    config = SessionConfig(threads=1, optimization=GraphOptimization.DISABLE)
    try:
        session = create_session(_weightless(model, given, data), config)
    except BackendError:
        return None
    shapes = dict(given)
    for value in session.get_outputs():
        dims = tuple(value.shape)
        if not value.type.startswith("tensor(") or not all(isinstance(d, int) and d >= 0 for d in dims):
            return None
        shapes[value.name] = TypedShape(elem_type_of(value.type), dims)
    return shapes


def _weightless(
    model: onnx.ModelProto, given: Mapping[str, TypedShape], data: Mapping[str, onnx.TensorProto]
) -> onnx.ModelProto:
    """`model` with its weights as graph inputs (only `data` kept) and every value an output."""
    inputs = [
        onnx.helper.make_tensor_value_info(name, typed.elem_type, list(typed.shape))
        for name, typed in given.items()
        if name not in data
    ]
    values = dict.fromkeys(name for node in model.graph.node for name in node.output if name)
    outputs = [onnx.ValueInfoProto(name=name) for name in values]
    graph = onnx.helper.make_graph(model.graph.node, model.graph.name, inputs, outputs, list(data.values()))
    probe = onnx.helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions)
    probe.ir_version = model.ir_version
    return probe


def _declared(value: onnx.ValueInfoProto) -> TypedShape:
    tensor = value.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
    if any(d < 0 for d in dims) or not tensor.HasField("shape"):
        raise KernelShapeError(f"graph input {value.name!r} has no static shape")
    return TypedShape(tensor.elem_type, dims)


def _topological(nodes: Sequence[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Nodes in an order where every input is produced first (ORT writes them in order;
    this only guards against an order it did not keep)."""
    produced = {name for node in nodes for name in node.output}
    waiting, order, ready = list(nodes), [], set(available)
    while waiting:
        runnable = [n for n in waiting if all(not i or i in ready or i not in produced for i in n.input)]
        if not runnable:
            raise KernelShapeError("the kernel graph has a cycle")
        for node in runnable:
            order.append(node)
            ready.update(node.output)
        waiting = [n for n in waiting if n not in runnable]
    return order


def _infer_node(
    node: onnx.NodeProto,
    known: Mapping[str, TypedShape],
    data: Mapping[str, onnx.TensorProto],
    opsets: Mapping[str, int],
    block: int,
) -> list[TypedShape]:
    inputs = [known.get(name) if name else None for name in node.input]
    missing = [name for name, typed in zip(node.input, inputs, strict=True) if name and typed is None]
    if missing:
        raise KernelShapeError(f"{node.op_type} {node.name!r} reads {missing[0]!r} of unknown shape")
    if node.domain in ("", "ai.onnx"):
        return _standard(node, known, data, opsets)
    rule = _RULES.get((node.domain, node.op_type))
    if rule is None:
        raise KernelShapeError(f"no shape rule for {node.domain}:{node.op_type}")
    try:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        return rule(inputs, attrs, block)
    except KernelShapeError:
        raise
    except Exception as error:  # a rule meeting an attribute form it does not know
        raise KernelShapeError(f"{node.domain}:{node.op_type} {node.name!r}: {error!r}") from error


def _standard(
    node: onnx.NodeProto,
    known: Mapping[str, TypedShape],
    data: Mapping[str, onnx.TensorProto],
    opsets: Mapping[str, int],
) -> list[TypedShape]:
    version = opsets.get("", opsets.get("ai.onnx", 17))
    try:
        schema = onnx.defs.get_schema(node.op_type, version, "")
        types = {
            name: onnx.helper.make_tensor_type_proto(known[name].elem_type, list(known[name].shape))
            for name in node.input if name
        }
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, node, types, {n: data[n] for n in node.input if n in data}
        )
    except Exception as error:  # onnx raises several types for unsupported cases
        raise KernelShapeError(f"{node.op_type} {node.name!r}: {error}") from error
    out = []
    for name in node.output:
        if not name:
            out.append(TypedShape(0, ()))
            continue
        tensor = inferred[name].tensor_type if name in inferred else None
        if tensor is None or not tensor.HasField("shape"):
            raise KernelShapeError(f"{node.op_type} {node.name!r}: no shape inferred for {name!r}")
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
        if any(d < 0 for d in dims):
            raise KernelShapeError(f"{node.op_type} {node.name!r}: {name!r} has a dynamic shape")
        out.append(TypedShape(tensor.elem_type, dims))
    return out


# ----- ORT's own ops -------------------------------------------------------------------

Inputs = Sequence[TypedShape | None]
Attrs = Mapping[str, object]
Rule = Callable[[Inputs, Attrs, int], list[TypedShape]]


def _first(inputs: Inputs) -> TypedShape:
    first = inputs[0]
    assert first is not None  # _infer_node checked every named input
    return first


def _window(size: int, kernel: int, stride: int, begin: int, end: int, dilation: int, *, ceil: bool) -> int:
    span = (kernel - 1) * dilation + 1
    rounding = math.ceil if ceil else math.floor
    return int(rounding((size + begin + end - span) / stride)) + 1


def _spatial(sizes: Shape, kernel: Sequence[int], attrs: Attrs) -> Shape:
    rank = len(sizes)
    strides = list(attrs.get("strides") or [1] * rank)
    dilations = list(attrs.get("dilations") or [1] * rank)
    pads = list(attrs.get("pads") or [0] * (2 * rank))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return tuple(math.ceil(s / st) for s, st in zip(sizes, strides, strict=True))
    if auto_pad == "VALID":
        pads = [0] * (2 * rank)
    ceil = bool(attrs.get("ceil_mode", 0))
    return tuple(
        _window(sizes[k], kernel[k], strides[k], pads[k], pads[k + rank], dilations[k], ceil=ceil)
        for k in range(rank)
    )


def _conv(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    x, w = _first(inputs), inputs[1]
    assert w is not None
    kernel = list(attrs.get("kernel_shape") or w.shape[2:])
    return [TypedShape(x.elem_type, (x.shape[0], w.shape[0], *_spatial(x.shape[2:], kernel, attrs)))]


def _pool(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    x = _first(inputs)
    kernel = list(attrs["kernel_shape"])  # type: ignore[call-overload]
    return [TypedShape(x.elem_type, (*x.shape[:2], *_spatial(x.shape[2:], kernel, attrs)))]


def _global_pool(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    x = _first(inputs)
    return [TypedShape(x.elem_type, (*x.shape[:2], *[1] * (len(x.shape) - 2)))]


def _reorder_input(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    x = _first(inputs)
    if attrs.get("channels_last", 0):
        n, *spatial, c = x.shape
    else:
        n, c, *spatial = x.shape
    return [TypedShape(x.elem_type, (n, -(-c // block) * block, *spatial))]


def _reorder_output(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    x = _first(inputs)
    channels = int(attrs["channels"])  # type: ignore[call-overload]
    n, _, *spatial = x.shape
    if attrs.get("channels_last", 0):
        return [TypedShape(x.elem_type, (n, *spatial, channels))]
    return [TypedShape(x.elem_type, (n, channels, *spatial))]


def _upsample(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    """y = x scaled by integer factors, one per axis, N and C included (ORT writes its
    NCHWc Upsample so, for Resize by scales or sizes and Upsample alike: [1, 1, 2, 2])."""
    x = _first(inputs)
    scales = [int(s) for s in attrs["scales"]]  # type: ignore[attr-defined]
    if len(scales) != len(x.shape):
        raise KernelShapeError(f"NCHWc Upsample with {len(scales)} scales for a rank-{len(x.shape)} input")
    return [TypedShape(x.elem_type, tuple(d * s for d, s in zip(x.shape, scales, strict=True)))]


def _elementwise(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    return [_first(inputs)]


def _gemm(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    a, b = _first(inputs), inputs[1]
    assert b is not None
    rows = a.shape[1] if attrs.get("transA", 0) else a.shape[0]
    cols = b.shape[0] if attrs.get("transB", 0) else b.shape[1]
    return [TypedShape(a.elem_type, (rows, cols))]


def _fused_matmul(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    a, b = _first(inputs), inputs[1]
    assert b is not None
    if attrs.get("transBatchA", 0) or attrs.get("transBatchB", 0):
        raise KernelShapeError("FusedMatMul with batch transposes")
    a_dims, b_dims = list(a.shape), list(b.shape)
    if attrs.get("transA", 0):
        a_dims[-2:] = a_dims[-1], a_dims[-2]
    if attrs.get("transB", 0):
        b_dims[-2:] = b_dims[-1], b_dims[-2]
    batch = _broadcast(tuple(a_dims[:-2]), tuple(b_dims[:-2]))
    return [TypedShape(a.elem_type, (*batch, a_dims[-2], b_dims[-1]))]


def _broadcast(a: Shape, b: Shape) -> Shape:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def _skip_layer_norm(inputs: Inputs, attrs: Attrs, block: int) -> list[TypedShape]:
    x = _first(inputs)
    stats = TypedShape(onnx.TensorProto.FLOAT, (*x.shape[:-1], 1))
    return [x, stats, stats, x]


_RULES: dict[tuple[str, str], Rule] = {
    (NCHWC, "Conv"): _conv,
    (NCHWC, "MaxPool"): _pool,
    (NCHWC, "AveragePool"): _pool,
    (NCHWC, "GlobalAveragePool"): _global_pool,
    (NCHWC, "GlobalMaxPool"): _global_pool,
    (NCHWC, "ReorderInput"): _reorder_input,
    (NCHWC, "ReorderOutput"): _reorder_output,
    (NCHWC, "Upsample"): _upsample,
    (MICROSOFT, "FusedConv"): _conv,
    (MICROSOFT, "FusedGemm"): _gemm,
    (MICROSOFT, "FusedMatMul"): _fused_matmul,
    (MICROSOFT, "Gelu"): _elementwise,
    (MICROSOFT, "FastGelu"): _elementwise,
    (MICROSOFT, "BiasGelu"): _elementwise,
    (MICROSOFT, "QuickGelu"): _elementwise,
    (MICROSOFT, "SkipLayerNormalization"): _skip_layer_norm,
    (MICROSOFT, "SkipSimplifiedLayerNormalization"): _skip_layer_norm,
}
