"""ONNX ModelProto -> Graph IR, without copying weights or losing anything.

The imported graph references the original model as its export template (`ModelContext`);
nodes keep their NodeProto; initializers keep their TensorProto (external data stays on
disk). Value types come from the model's declarations plus onnx shape inference run on a
light proxy of the model (large weights replaced by typed inputs) so that inference
never copies or reads big tensors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType

import onnx

from taso._proto_size import tensor_byte_bound
from taso.ir import Graph, Initializer, Node, TensorType, decode_attributes

_SMALL_TENSOR_BYTES = 4096


@dataclass(frozen=True)
class ModelContext:
    """What export needs besides the graph: the original model (never mutated) and where it lives."""

    template: onnx.ModelProto
    base_dir: str = ""


def import_model(model: onnx.ModelProto, *, base_dir: str = "") -> Graph:
    """Build the IR of `model`'s main graph and validate its structure (cycles, undefined inputs)."""
    graph_proto = model.graph
    nodes = {index: _import_node(proto) for index, proto in enumerate(graph_proto.node)}
    initializers = {t.name: _import_initializer(t, base_dir) for t in graph_proto.initializer}
    init_names = set(initializers)
    inputs = tuple(v.name for v in graph_proto.input if v.name not in init_names)
    types = _declared_types(graph_proto)
    for init in initializers.values():
        types.setdefault(init.name, init.type)
    for name, inferred in inferred_types(model).items():
        if name not in types or types[name].shape is None:
            types[name] = inferred
    declared_outputs = tuple(v.name for v in graph_proto.output)
    graph = Graph(
        inputs=inputs,
        outputs=declared_outputs + tuple(n for n in _training_reads(model) if n not in declared_outputs),
        nodes=MappingProxyType(nodes),
        types=MappingProxyType(types),
        initializers=MappingProxyType(initializers),
        context=ModelContext(template=model, base_dir=base_dir),
        outer_scope=frozenset(_sparse_names(graph_proto)),
    )
    graph.validate()
    return graph


def _training_reads(model: onnx.ModelProto) -> list[str]:
    """Main-graph names that `training_info` reads or binds: kept as if they were outputs.

    The IR keeps every output through every rewrite (a rewrite that would remove one does
    not match), and export writes only the model's declared outputs, so these names
    survive without being added to the model's interface.
    """
    names: dict[str, None] = {}
    for info in model.training_info:
        for binding in (*info.initialization_binding, *info.update_binding):
            names[binding.key] = None
        for sub in (info.initialization, info.algorithm):
            names.update(dict.fromkeys(_free_names(sub)))
    return list(names)


def training_bound(model: onnx.ModelProto) -> frozenset[str]:
    """Initializers that `training_info` assigns: their values are not constants."""
    return frozenset(
        b.key for info in model.training_info for b in (*info.initialization_binding, *info.update_binding)
    )


def _import_node(proto: onnx.NodeProto) -> Node:
    return Node(
        op_type=proto.op_type,
        domain=proto.domain,
        inputs=tuple(proto.input),
        outputs=tuple(proto.output),
        attributes=decode_attributes(proto),
        name=proto.name,
        captures=tuple(captured_names(proto)),
        proto=proto,
    )


def captured_names(node: onnx.NodeProto) -> list[str]:
    """Outer-scope values that the node's subgraphs read (If/Loop/Scan bodies)."""
    found: dict[str, None] = {}
    for attr in node.attribute:
        for sub in _subgraphs(attr):
            for name in _free_names(sub):
                found[name] = None
    return [n for n in found if n not in node.input]


def _subgraphs(attr: onnx.AttributeProto) -> Iterable[onnx.GraphProto]:
    if attr.type == onnx.AttributeProto.GRAPH:
        return (attr.g,)
    if attr.type == onnx.AttributeProto.GRAPHS:
        return tuple(attr.graphs)
    return ()


def _free_names(graph: onnx.GraphProto) -> list[str]:
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= _sparse_names(graph)
    free: dict[str, None] = {}
    for node in graph.node:
        used = itertools.chain(node.input, captured_names(node))
        for name in used:
            if name and name not in defined:
                free[name] = None
        defined.update(o for o in node.output if o)
    for out in graph.output:
        if out.name not in defined:
            free[out.name] = None
    return list(free)


def _sparse_names(graph: onnx.GraphProto) -> set[str]:
    return {s.values.name for s in graph.sparse_initializer}


def _import_initializer(tensor: onnx.TensorProto, base_dir: str) -> Initializer:
    return Initializer(
        name=tensor.name,
        type=TensorType(tensor.data_type, tuple(int(d) for d in tensor.dims)),
        proto=tensor,
        base_dir=base_dir,
    )


def tensor_type_of(type_proto: onnx.TypeProto) -> TensorType | None:
    """The TensorType of a TypeProto, or None for non-tensor types (sequence, map, optional)."""
    if type_proto.WhichOneof("value") != "tensor_type":
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return TensorType(tensor.elem_type, None)
    dims = []
    for dim in tensor.shape.dim:
        kind = dim.WhichOneof("value")
        dims.append(dim.dim_value if kind == "dim_value" else dim.dim_param if kind == "dim_param" else None)
    return TensorType(tensor.elem_type, tuple(dims))


def _declared_types(graph: onnx.GraphProto) -> dict[str, TensorType]:
    types: dict[str, TensorType] = {}
    for info in itertools.chain(graph.input, graph.output, graph.value_info):
        tensor_type = tensor_type_of(info.type)
        if tensor_type is not None:
            types[info.name] = tensor_type
    return types


def inferred_types(model: onnx.ModelProto) -> dict[str, TensorType]:
    """Value types by onnx shape inference, run on a proxy where large weights are typed graph inputs."""
    proxy = _shape_proxy(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(proxy, strict_mode=False, data_prop=_data_prop_is_safe(model))
    except Exception:  # inference is best effort: declared types still hold
        return {}
    return _declared_types(inferred.graph)


_DATA_PROP_MAX_1D = 1 << 16


def _data_prop_is_safe(model: onnx.ModelProto) -> bool:
    """onnx data propagation materializes symbolic values of 1-D tensors: skip it for huge ones."""
    lengths = [t.dims[0] for t in model.graph.initializer if len(t.dims) == 1]
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 1:
            lengths.append(dims[0].dim_value)
    return all(n <= _DATA_PROP_MAX_1D for n in lengths)


def _shape_proxy(model: onnx.ModelProto) -> onnx.ModelProto:
    proxy = onnx.ModelProto()
    proxy.ir_version = model.ir_version
    proxy.opset_import.extend(model.opset_import)
    proxy.functions.extend(model.functions)
    graph = proxy.graph
    graph.node.extend(model.graph.node)
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    graph.value_info.extend(model.graph.value_info)
    declared = {v.name for v in model.graph.input}
    for tensor in model.graph.initializer:
        if _is_small(tensor):
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            dims = list(tensor.dims)
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, dims))
    return proxy


def _is_small(tensor: onnx.TensorProto) -> bool:
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    return tensor_byte_bound(tensor) <= _SMALL_TENSOR_BYTES

