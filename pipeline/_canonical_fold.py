"""Canonical stage, constant computations: arithmetic on constants and static shapes is folded.

TorchScript writes timm's TensorFlow-style "same" padding as about forty nodes per Pad
(Ceil, Sub, Clip, Div, Cast, Unsqueeze, Concat, ConstantOfShape, Reshape, Slice,
Transpose) over constants and over the `Shape` of the Pad's input. ONNX Runtime folds
them when it loads the model, so they cost nothing at run time; but onnx's shape
inference cannot see through them, so every shape after the first such Pad is unknown in
the IR and no shape-conditioned rule matches anywhere downstream.

Here they are folded the way ONNX Runtime would: a node of the standard domain whose
inputs are all constants (or values folded here), a `Shape` or `Size` of a value whose
type is static, and a `Gather` or `Slice` of a `Shape` that picks only static dims, is
*computable*. ORT itself folds no `Shape` with a dynamic dim, so on an export with a
dynamic batch the last kind removes work it would run on every call (`STATIC_DIMS`, a
simplification). The computable values that something else reads
are evaluated by ONNX Runtime's CPU kernels (no graph optimization, so each kernel runs
as written) and become initializers; the types downstream are then inferred again, which
may make more `Shape` nodes computable, so the stage repeats until nothing changes. The
values are the ones ORT would compute at session time, bit for bit.

Left alone: random ops, quantize and dequantize (a QDQ weight must stay in its pair for
ORT to fuse it), nodes with subgraphs, nodes whose output is a graph output or is read
inside a subgraph, constant inputs over `SMALL` elements (weights), and any computed
value over `SMALL` elements. A value ORT cannot evaluate is not folded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from taso._constness import Constness
from taso._fold import initializer
from taso._onnx_export import node_to_proto
from taso._onnx_import import inferred_types
from taso._proto_size import tensor_byte_bound
from taso.backends import max_ir_version
from taso.ir import Graph, Node, TensorType
from taso.pipeline._rewire import STANDARD

FOLDED = "constant computation folded"
STATIC_DIMS = "static dims of a dynamic shape folded"
"""Of the folds, those ORT does not make itself (it folds a Shape only when all its dims are
static): the shape arithmetic then no longer runs, and a Pad whose pads it computed can
join its conv."""
SMALL = 1 << 16
"""Elements: larger constants are weights, larger results are not shape arithmetic."""

_NOT_FOLDED = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Constant",
})
_FROM_TYPE = frozenset({"Shape", "Size"})
"""Ops whose value a static type gives (see `_from_types`)."""
_PURE = frozenset({"Constant", "Shape", "Size"})
"""Ops that compute nothing from values: removed once nothing reads them."""
_MAX_ROUNDS = 16


def fold_constant_computations(graph: Graph, counts: Counter[str]) -> Graph:
    """`graph` with its constant computations folded (see the module docstring)."""
    for _ in range(_MAX_ROUNDS):
        folded = _fold_once(graph)
        if folded is None:
            break
        before, graph, removed = graph, *folded
        counts[FOLDED] += len(removed)
        dynamic = sum(_reads_static_dims_of_dynamic_shape(before, before.nodes[i]) for i in removed)
        if dynamic:
            counts[STATIC_DIMS] += dynamic
    return graph


def _reads_static_dims_of_dynamic_shape(graph: Graph, node: Node) -> bool:
    """A Gather or Slice of a Shape whose input's type is not static: ORT does not fold it."""
    shape_node = _shape_read(graph, node)
    if shape_node is None:
        return False
    in_type = graph.types.get(shape_node.inputs[0])
    return in_type is not None and not in_type.is_static


def _fold_once(graph: Graph) -> tuple[Graph, list[int]] | None:
    computable = _computable(graph)
    wanted = _read_elsewhere(graph, computable)
    if not wanted:
        return None
    values = _evaluated(graph, computable, wanted)
    if not values:
        return None
    removed = _no_longer_needed(graph, computable, frozenset(values))
    if not removed:
        return None
    gone = {o for node_id in removed for o in graph.nodes[node_id].outputs}
    # a value whose node stays (for another output, too large to fold) stays that node's
    inits = [initializer(name, value) for name, value in values.items() if name in gone]
    graph = graph.rewrite(remove=removed, initializers=inits, types={i.name: i.type for i in inits})
    return _retyped(graph), removed


def _computable(graph: Graph) -> dict[int, Node]:
    """Nodes whose outputs can be computed now, by id, in topological order."""
    constness = Constness(graph)
    known: set[str] = set()
    out: dict[int, Node] = {}
    for node_id in graph.topological_order:
        node = graph.nodes[node_id]
        if _can_compute(graph, constness, node, known):
            out[node_id] = node
            known.update(node.outputs)
    return out


def _can_compute(graph: Graph, constness: Constness, node: Node, known: set[str]) -> bool:
    if node.domain not in STANDARD or node.op_type in _NOT_FOLDED or node.has_subgraphs:
        return False
    if any(o in graph.outputs or o in graph.captured for o in node.outputs):
        return False
    if node.op_type == "Identity" and node.inputs and node.inputs[0] not in known:
        return False  # an alias of a weight: the Identity bypass makes readers read it, no copy
    if _from_types(graph, constness, node, known) is not None:
        return True
    if node.op_type in _FROM_TYPE and node.inputs and node.inputs[0] not in known:
        return False
    return all(not name or name in known or _small_constant(graph, constness, name) for name in node.inputs)


def _small_constant(graph: Graph, constness: Constness, name: str) -> bool:
    """A constant of at most SMALL elements whose value is known now (an initializer or a
    Constant node; an internal weight transform's value exists only after export)."""
    if not constness.is_constant(name):
        return False
    init = graph.initializers.get(name)
    if init is not None:
        return math.prod(init.type.shape or ()) <= SMALL  # type: ignore[arg-type]
    return constness.small_value(name, SMALL) is not None


def _read_elsewhere(graph: Graph, computable: Mapping[int, Node]) -> list[str]:
    """Computed values that a node which stays reads: the ones to evaluate."""
    out = []
    for node in computable.values():
        for name in node.outputs:
            readers = graph.consumers.get(name, ())
            if name and any(reader not in computable for reader in readers):
                out.append(name)
    return out


SINGLE_TRIES = 64
"""Values tried one by one where ORT refuses them all together."""


def _evaluated(graph: Graph, computable: Mapping[int, Node], wanted: list[str]) -> dict[str, np.ndarray]:
    """The `wanted` values ORT computes, those of at most SMALL elements. All in one session;
    if ORT refuses that (one op without a kernel for its type), each value on its own, the
    first `SINGLE_TRIES` of them, so that one value ORT cannot compute stops only its own fold."""
    values = _run(graph, computable, wanted)
    if values is not None:
        return values
    out: dict[str, np.ndarray] = {}
    for name in wanted[:SINGLE_TRIES]:
        out.update(_run(graph, _cone(graph, computable, name), [name]) or {})
    return out



def _run(graph: Graph, computable: Mapping[int, Node], wanted: list[str]) -> dict[str, np.ndarray] | None:
    """`wanted` computed by ORT's CPU kernels (graph optimization off: each kernel as written);
    None if ORT refuses."""
    model = _fold_model(graph, computable, wanted)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        arrays = session.run(wanted, {})
    except Exception:  # noqa: BLE001 - ORT refuses the computation: the graph stays as it is
        return None
    return {name: np.asarray(a) for name, a in zip(wanted, arrays, strict=True) if np.asarray(a).size <= SMALL}


def _cone(graph: Graph, computable: Mapping[int, Node], name: str) -> dict[int, Node]:
    """The computable nodes `name` depends on, in the same (topological) order."""
    needed, stack = set(), [name]
    while stack:
        producer = graph.producers.get(stack.pop())
        if producer is None or producer[0] not in computable or producer[0] in needed:
            continue
        needed.add(producer[0])
        stack.extend(i for i in computable[producer[0]].inputs if i)
    return {node_id: node for node_id, node in computable.items() if node_id in needed}


def _fold_model(graph: Graph, computable: Mapping[int, Node], wanted: list[str]) -> onnx.ModelProto:
    """A model of the computation alone: its constants as initializers, `wanted` as outputs."""
    constness = Constness(graph)
    produced = {o for node in computable.values() for o in node.outputs}
    nodes = []
    for node in computable.values():
        value = _from_types(graph, constness, node, produced)
        nodes.append(node_to_proto(node if value is None else _as_constant(node, value)))
    read = {name for proto in nodes for name in proto.input if name and name not in produced}
    inits = [_constant_proto(constness, name) for name in sorted(read)]
    outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in wanted]
    body = onnx.helper.make_graph(nodes, "fold", [], outputs, initializer=inits)
    template = graph.context.template  # type: ignore[union-attr]
    model = onnx.helper.make_model(body, opset_imports=list(template.opset_import))
    model.ir_version = max_ir_version()
    return model


def _from_types(graph: Graph, constness: Constness, node: Node, known: set[str]) -> np.ndarray | None:
    """The value of a node that reads static dims off a type: a Shape or Size of a static
    value not computed here, or a Gather or Slice (step 1) of such a Shape's static dims
    (`x.size(2)` of an input whose batch is dynamic); None for any other node."""
    if node.op_type in _FROM_TYPE and node.inputs and node.inputs[0] not in known:
        dims = _shape_dims(graph, node) if node.op_type == "Shape" else _static_size(graph, node.inputs[0])
        return None if dims is None or not all(isinstance(d, int) for d in dims) else np.array(dims, np.int64)
    shape_node = _shape_read(graph, node)
    if shape_node is None or node.inputs[0] in known:
        return None
    dims = _shape_dims(graph, shape_node)
    arguments = [constness.small_value(name, SMALL) if name else None for name in node.inputs[1:]]
    if dims is None or any(name and a is None for name, a in zip(node.inputs[1:], arguments, strict=True)):
        return None
    picked = _gathered(dims, node, arguments[0]) if node.op_type == "Gather" else _sliced(dims, arguments)
    if picked is None or not all(isinstance(d, int) for d in np.ravel(picked).tolist()):
        return None
    return np.asarray(picked, dtype=np.int64)


def _shape_read(graph: Graph, node: Node) -> Node | None:
    """The Shape node a Gather or Slice picks dims of; None for any other node."""
    if node.op_type not in ("Gather", "Slice") or not node.inputs:
        return None
    producer = graph.producers.get(node.inputs[0])
    shape_node = graph.nodes[producer[0]] if producer else None
    if shape_node is None or shape_node.op_type != "Shape" or shape_node.domain not in STANDARD:
        return None
    return shape_node


def _shape_dims(graph: Graph, shape_node: Node) -> list[object] | None:
    """The dims a Shape node outputs (ints where static), from its input's type."""
    in_type = graph.types.get(shape_node.inputs[0])
    if in_type is None or in_type.shape is None:
        return None
    rank = len(in_type.shape)
    start = _clamped(shape_node.attr("start", 0), rank)  # type: ignore[arg-type]
    end = _clamped(shape_node.attr("end", rank), rank)  # type: ignore[arg-type]
    return list(in_type.shape[start:end])


def _static_size(graph: Graph, name: str) -> list[object] | None:
    in_type = graph.types.get(name)
    if in_type is None or not in_type.is_static:
        return None
    return [math.prod(in_type.shape)]  # type: ignore[arg-type]


def _gathered(dims: list[object], node: Node, indices: np.ndarray | None) -> np.ndarray | None:
    if indices is None or indices.dtype.kind not in "iu" or node.attr("axis", 0) not in (0, -1):
        return None
    if not np.all((indices >= -len(dims)) & (indices < len(dims))):
        return None
    return np.array(dims, dtype=object)[indices]


def _sliced(dims: list[object], arguments: list[np.ndarray | None]) -> np.ndarray | None:
    starts, ends, axes, steps = (arguments + [None] * 4)[:4]
    if starts is None or ends is None or starts.size != 1 or ends.size != 1:
        return None
    if (axes is not None and axes.reshape(-1).tolist() not in ([0], [-1])) or (
            steps is not None and steps.reshape(-1).tolist() != [1]):
        return None
    return np.array(dims[int(starts.reshape(-1)[0]):int(ends.reshape(-1)[0])], dtype=object)


def _as_constant(node: Node, value: np.ndarray) -> Node:
    attribute = onnx.helper.make_attribute("value", numpy_helper.from_array(value))
    return Node("Constant", "", (), node.outputs, (("value", attribute),), node.name)


def _clamped(axis: int, rank: int) -> int:
    return min(max(axis + rank if axis < 0 else axis, 0), rank)


def _constant_proto(constness: Constness, name: str) -> onnx.TensorProto:
    value = constness.small_value(name, SMALL)
    assert value is not None  # `_small_constant` said so
    return numpy_helper.from_array(value, name)


def _no_longer_needed(graph: Graph, computable: Mapping[int, Node], folded: frozenset[str]) -> list[int]:
    """Computable nodes that nothing needs once `folded` are initializers (and the Constant
    and Shape nodes only they read)."""
    needed = (set(graph.outputs) | graph.captured) - folded
    removed = []
    for node_id in reversed(graph.topological_order):
        node = graph.nodes[node_id]
        removable = node_id in computable or (node.op_type in _PURE and node.domain in STANDARD)
        if removable and not any(o in needed for o in node.outputs):
            removed.append(node_id)
        else:
            needed.update(name for name in (*node.inputs, *node.captures) if name and name not in folded)
    return sorted(removed)


def _retyped(graph: Graph) -> Graph:
    """`graph` with the types onnx infers now where they say more than the ones it had."""
    better = {name: t for name, t in inferred_types(_typing_model(graph)).items()
              if _says_more(t, graph.types.get(name))}
    return graph.rewrite(types=better) if better else graph


_TYPED_NOT_HELD = 4096
"""Bytes: a larger weight is given to shape inference as a typed input, not copied."""


def _typing_model(graph: Graph) -> onnx.ModelProto:
    """What onnx's shape inference needs of `graph`: its nodes, its small weights, and its
    inputs and large weights as typed inputs (a whole export would copy every weight)."""
    template = graph.context.template  # type: ignore[union-attr]
    held = [init.proto for init in graph.initializers.values()
            if not init.is_external and tensor_byte_bound(init.proto) <= _TYPED_NOT_HELD]
    held_names = {tensor.name for tensor in held}
    typed = [*graph.inputs, *(name for name in graph.initializers if name not in held_names)]
    inputs = [_value_info(name, graph.types.get(name)) for name in typed]
    nodes = [node.proto if node.proto is not None else node_to_proto(node) for node in graph.ordered_nodes()]
    outputs = [onnx.ValueInfoProto(name=name) for name in graph.outputs]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "types", inputs, outputs, initializer=held),
                                   opset_imports=list(template.opset_import))
    model.functions.extend(template.functions)
    model.ir_version = template.ir_version
    return model


def _value_info(name: str, value_type: TensorType | None) -> onnx.ValueInfoProto:
    if value_type is None:
        return onnx.ValueInfoProto(name=name)
    return onnx.helper.make_tensor_value_info(name, value_type.elem_type, value_type.shape)


def _says_more(new: TensorType, old: TensorType | None) -> bool:
    if old is None or old.shape is None:
        return new.shape is not None
    if new.shape is None or len(new.shape) != len(old.shape) or new.elem_type != old.elem_type:
        return False
    return _static_dims(new.shape) > _static_dims(old.shape)


def _static_dims(shape: Iterable[object]) -> int:
    return sum(isinstance(d, int) for d in shape)
