"""Graph IR -> ONNX ModelProto, keeping everything the original model had.

Every field of the original model and graph is carried over (metadata, doc strings,
opset imports, functions, training info, sparse initializers, value_info of values that
still exist). Nodes imported from the file are written from their original NodeProto;
nodes made by rewrites are built from their op and attributes. Internal weight
transforms (domain `taso.internal`) must have been folded into initializers first
(`taso._fold.fold_constants`). The IR version written is the original's, or the lower of
it and `ir_version` (the pipeline passes the highest the installed onnxruntime loads).
"""

from __future__ import annotations

import itertools

import onnx

from taso._onnx_import import ModelContext, captured_names
from taso.errors import VerificationError
from taso.ir import INTERNAL_DOMAIN, AttrValue, Graph, Node

_GRAPH_FIELDS_REBUILT = {"node", "initializer", "value_info"}


def export_model(graph: Graph, *, ir_version: int | None = None) -> onnx.ModelProto:
    """Build a ModelProto for `graph` from its template; weights are referenced, not re-encoded."""
    context = graph.context
    if not isinstance(context, ModelContext):
        raise TypeError("graph has no ModelContext: was it made by taso.import?")
    template = context.template
    model = onnx.ModelProto()
    for descriptor, value in template.ListFields():
        if descriptor.name != "graph":
            copy_field(model, descriptor, value)
    _build_graph(model.graph, graph, template.graph)
    model.ir_version = min(template.ir_version, ir_version or template.ir_version)
    return model


def copy_field(target: object, descriptor: object, value: object) -> None:
    name = descriptor.name  # type: ignore[attr-defined]
    if descriptor.is_repeated:  # type: ignore[attr-defined]
        getattr(target, name).extend(value)  # type: ignore[arg-type]
    elif descriptor.message_type is not None:  # type: ignore[attr-defined]
        getattr(target, name).CopyFrom(value)
    else:
        setattr(target, name, value)


def _build_graph(out: onnx.GraphProto, graph: Graph, template: onnx.GraphProto) -> None:
    for descriptor, value in template.ListFields():
        if descriptor.name not in _GRAPH_FIELDS_REBUILT:
            copy_field(out, descriptor, value)
    used_now = set(graph.consumers) | set(graph.outputs)  # consumers include subgraph reads
    used_before = _names_read(template)
    stopped = _constants_a_rewrite_stopped_using(graph, used_now, used_before)
    for node in graph.ordered_nodes():
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.outputs[0] in stopped:
            continue
        out.node.append(node.proto if node.proto is not None else node_to_proto(node))
    out.initializer.extend(_initializers_to_keep(graph, template, used_now, used_before))
    defined = set(graph.producers) | set(graph.initializers) | set(graph.inputs)
    out.value_info.extend(v for v in template.value_info if v.name in defined and not _retyped(v, graph))


def _retyped(info: onnx.ValueInfoProto, graph: Graph) -> bool:
    """Whether a rewrite gave the value another static shape than its declaration (a value
    kept by name whose channels were widened, `taso.pipeline._pad_channels`)."""
    known = graph.types.get(info.name)
    if known is None or known.shape is None or not info.type.HasField("tensor_type"):
        return False
    declared = info.type.tensor_type.shape
    if not info.type.tensor_type.HasField("shape") or len(declared.dim) != len(known.shape):
        return False
    return any(d.HasField("dim_value") and isinstance(k, int) and d.dim_value != k
               for d, k in zip(declared.dim, known.shape, strict=True))


def _initializers_to_keep(
    graph: Graph, template: onnx.GraphProto, used_now: set[str], used_before: set[str]
) -> list[onnx.TensorProto]:
    """Original initializers in file order, minus those a rewrite stopped using; then new ones."""
    kept = [
        t
        for t in template.initializer
        if t.name in graph.initializers and (t.name in used_now or t.name not in used_before)
    ]
    original = {t.name for t in template.initializer}
    added = [init.proto for name, init in graph.initializers.items() if name not in original and name in used_now]
    return kept + added


def _constants_a_rewrite_stopped_using(graph: Graph, used_now: set[str], used_before: set[str]) -> set[str]:
    """Outputs of Constant nodes that the input read and nothing reads now (the weights a
    fold replaced, when a converter writes weights as Constant nodes): like the initializers
    a rewrite stopped using, they are not written. A Constant the input itself left unread
    stays."""
    constants = {node.outputs[0] for node in graph.nodes.values()
                 if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.outputs}
    return (constants - used_now) & used_before


def _names_read(template: onnx.GraphProto) -> set[str]:
    names = {o.name for o in template.output}
    for node in template.node:
        names.update(itertools.chain(node.input, captured_names(node)))
    return names


def node_to_proto(node: Node) -> onnx.NodeProto:
    """Emit a node made by a rewrite; internal ops must have been folded before."""
    if node.domain == INTERNAL_DOMAIN:
        raise VerificationError(f"internal op {node.op_type} reached export without being folded")
    proto = onnx.helper.make_node(node.op_type, list(node.inputs), list(node.outputs), name=node.name, domain=node.domain or None)
    for key, value in node.attributes:
        proto.attribute.append(_encode_attribute(key, value))
    return proto


def _encode_attribute(key: str, value: AttrValue) -> onnx.AttributeProto:
    if isinstance(value, onnx.AttributeProto):
        attr = onnx.AttributeProto()
        attr.CopyFrom(value)
        return attr
    if isinstance(value, tuple) and not value:
        raise VerificationError(f"attribute {key} is an empty list; its type cannot be inferred")
    return onnx.helper.make_attribute(key, list(value) if isinstance(value, tuple) else value)
