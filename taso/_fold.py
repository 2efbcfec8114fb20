"""Fold weight transforms: internal-domain nodes over constants become initializers.

Rewrites that change weights (scale a conv kernel per channel, concatenate kernels,
enlarge a kernel) do not touch arrays during the search: they add nodes of the domain
`taso.internal` whose inputs are constants. Before export, each such node is evaluated
once with its spec's NumPy semantics (the same semantics the axioms were checked
against) and replaced by an initializer carrying the node's output name. The floor knows
no operator: the caller passes the semantics (`Evaluate`; `taso.opspecs.evaluate_op`).

The semantics compute in float64, so a whole 280 MB float32 weight would need over 1 GB
of temporaries; broadcasting binary ops (the usual weight transforms: scale, merge) are
therefore evaluated in slices of the leading axis, which gives the same values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from taso._constness import Constness
from taso._containment import resolve_external
from taso.errors import VerificationError
from taso.ir import INTERNAL_DOMAIN, Graph, Initializer, Node, TensorType

Evaluate = Callable[[str, Sequence[np.ndarray], Mapping[str, object]], list[np.ndarray]]
"""An operator's NumPy semantics by op name: (op, input arrays, params) -> output arrays."""


def has_internal_nodes(graph: Graph) -> bool:
    return any(node.domain == INTERNAL_DOMAIN for node in graph.nodes.values())


def fold_constants(graph: Graph, evaluate: Evaluate) -> Graph:
    """A graph without internal nodes; raises VerificationError if one reads a non-constant."""
    if not has_internal_nodes(graph):
        return graph
    constness = Constness(graph)
    internal = [i for i in graph.topological_order if graph.nodes[i].domain == INTERNAL_DOMAIN]
    inside = frozenset(internal)
    pending = _internal_reads(graph, internal)
    folded: dict[str, np.ndarray] = {}
    new_inits: list[Initializer] = []
    for node_id in internal:
        node = graph.nodes[node_id]
        arrays = [_constant(constness, folded, name, node) for name in node.inputs]
        outputs = _evaluate(evaluate, node.op_type, arrays, dict(node.attributes))
        del arrays
        for name in node.inputs:  # free intermediates once their last reader has run
            pending[name] -= 1
            if pending[name] == 0:
                folded.pop(name, None)
        for name, array in zip(node.outputs, outputs, strict=True):
            value = _typed(graph, name, array)
            if _read_outside(graph, name, inside):
                new_inits.append(initializer(name, value))
            if pending.get(name, 0):
                folded[name] = value
    return graph.rewrite(remove=internal, initializers=new_inits, types={i.name: i.type for i in new_inits})


_BROADCASTING_BINARY = frozenset({"Add", "Sub", "Mul", "Div"})
_SLICE_ELEMENTS = 1 << 22  # float64 temporaries of a slice: a few tens of MB


def _evaluate(
    evaluate: Evaluate, op: str, arrays: Sequence[np.ndarray], params: Mapping[str, object]
) -> list[np.ndarray]:
    """`evaluate`; a large broadcasting binary op slice by slice of its output's axis 0."""
    if op not in _BROADCASTING_BINARY or len(arrays) != 2:
        return evaluate(op, arrays, params)
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    if not shape or math.prod(shape) <= _SLICE_ELEMENTS:
        return evaluate(op, arrays, params)
    rows = max(1, _SLICE_ELEMENTS // max(1, math.prod(shape[1:])))
    out: np.ndarray | None = None
    for start in range(0, shape[0], rows):
        (piece,) = evaluate(op, [_rows(a, shape, start, start + rows) for a in arrays], params)
        if out is None:
            out = np.empty(shape, dtype=piece.dtype)
        out[start : start + rows] = piece
    return [out] if out is not None else evaluate(op, arrays, params)


def _rows(array: np.ndarray, shape: tuple[int, ...], start: int, stop: int) -> np.ndarray:
    """The operand's part for output rows [start, stop): sliced unless it broadcasts along axis 0."""
    if array.ndim == len(shape) and array.shape[0] == shape[0]:
        return array[start:stop]
    return array


def _internal_reads(graph: Graph, internal: list[int]) -> dict[str, int]:
    reads: dict[str, int] = {}
    for node_id in internal:
        for name in graph.nodes[node_id].inputs:
            reads[name] = reads.get(name, 0) + 1
    return reads


def _read_outside(graph: Graph, name: str, inside: frozenset[int]) -> bool:
    """Whether a folded value is read by a node that stays (or is a graph output)."""
    return name in graph.outputs or any(c not in inside for c in graph.consumers.get(name, ()))


def _constant(constness: Constness, folded: dict[str, np.ndarray], name: str, node: Node) -> np.ndarray:
    graph = constness.graph
    if name in folded:
        return folded[name]
    if not constness.is_constant(name):
        raise VerificationError(f"weight transform {node.op_type} reads '{name}', which is not a constant")
    init = graph.initializers.get(name)
    if init is not None:
        return _read_external(init) if init.is_external else init.array()
    producer = graph.nodes[graph.producers[name][0]]
    value = producer.attr("value")
    if producer.op_type == "Constant" and isinstance(value, onnx.AttributeProto):
        return numpy_helper.to_array(value.t)
    raise VerificationError(f"weight transform {node.op_type} reads '{name}', whose value cannot be read")


_RAW_TYPES = frozenset({
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL,
    TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
    TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
})


def _read_external(init: Initializer) -> np.ndarray:
    """An external tensor read straight into its array (onnx's loader holds the bytes twice).

    Only the plain case: a numeric type whose raw bytes are the array, offset and length
    within the file; anything else goes through `Initializer.array()` (onnx's loader, with
    its own checks and messages). The location was checked when the model was loaded
    (`taso._containment`); it is resolved by the same rule here.
    """
    info = {entry.key: entry.value for entry in init.proto.external_data}
    path = resolve_external(info.get("location", ""), init.base_dir or ".", tensor=init.name)
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(init.proto.data_type)).newbyteorder("<")
    count = math.prod(init.proto.dims)
    offset, length = int(info.get("offset", 0)), int(info.get("length", count * dtype.itemsize))
    plain = (
        init.proto.data_type in _RAW_TYPES and length == count * dtype.itemsize
        and offset + length <= path.stat().st_size
    )
    if not plain:
        return init.array()
    return np.fromfile(path, dtype=dtype, count=count, offset=offset).reshape(tuple(init.proto.dims))


def _typed(graph: Graph, name: str, array: np.ndarray) -> np.ndarray:
    """Cast to the element type the rewrite declared for this value (constants default to float32)."""
    known = graph.types.get(name)
    if known is None or not known.elem_type:
        return np.asarray(array)
    return np.asarray(array).astype(onnx.helper.tensor_dtype_to_np_dtype(known.elem_type), copy=False)


def initializer(name: str, array: np.ndarray) -> Initializer:
    """`array` as an initializer named `name`, typed by its own dtype and shape."""
    proto = numpy_helper.from_array(np.ascontiguousarray(array).reshape(array.shape), name)  # 0-d stays 0-d
    return Initializer(name=name, type=TensorType(proto.data_type, tuple(array.shape)), proto=proto)
