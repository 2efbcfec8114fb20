"""Optimize the bodies of If / Loop / Scan recursively, keeping outer-scope references.

    node with a GRAPH attribute -> body as its own IR graph (outer-scope names = `outer_scope`)
      -> its own nested bodies first -> search with the same rules and a share of the budget
      -> export back into a copy of the node's attribute

A body is imported from a small model whose graph is the body plus typed inputs for
the outer-scope values it reads, so that shape inference knows their types; the IR
then lists those names as `outer_scope` (never as inputs) and exports from the pure
body, so the written body has exactly its original inputs and outputs. Outer-scope
values are never constants inside a body (a weight transform cannot read them), so a
rewrite there never copies or moves an outer tensor. Value names stay stable under
rewrites, so every outer-scope reference and every branch output keeps its name.
A body is priced like any graph: its context (`BodyContext`) names the main graph it
belongs to, whose shapes cost models use (a body's outer-scope reads are none of its
inputs, so its own shapes cannot be resolved from it alone), and a region declares the
values its nodes' own bodies read as inputs; a value captured any number of scopes up is
priced like any other, whichever graph a cost model is given first.

A body is left untouched when nothing improved it, when its budget share is empty, or
when it cannot be imported, searched or exported (the reason is reported back);
`GRAPHS` attributes (lists of graphs, unused by the standard ops) are never touched.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import onnx

from taso._onnx_import import ModelContext, captured_names, import_model
from taso.errors import TasoError
from taso.ir import Graph, Node, TensorType, decode_attributes
from taso.pipeline._export import export
from taso.pipeline.budget import Budget

BodySearch = Callable[[Graph, Budget], tuple[Graph, Mapping[str, int]]]
"""`search(body, budget) -> (best body, applied rule counts)`: what the caller searches with."""


@dataclass(frozen=True)
class BodyContext(ModelContext):
    """A body's export template, and the main graph it belongs to (at any depth): cost
    models infer shapes from `main` (`taso.backends.graph_cost.concrete_shapes`)."""

    main: Graph | None = None


@dataclass(frozen=True)
class BodiesOutcome:
    """The graph with optimized bodies, the rules applied inside them, and bodies left alone."""

    graph: Graph
    applied: dict[str, int]
    skipped: tuple[str, ...] = ()


def body_node_count(graph: Graph) -> int:
    """How many nodes the subgraphs of `graph`'s nodes hold, at any depth."""
    return sum(_proto_nodes(body) for node in graph.nodes.values() for _, body in _bodies(node))


def optimize_bodies(graph: Graph, search: BodySearch, *, budget: Budget) -> BodiesOutcome:
    """Optimize every If/Loop/Scan body of `graph`, each with a share of `budget` by size."""
    total = body_node_count(graph)
    if total == 0 or budget.left() <= 0:
        return BodiesOutcome(graph, {})
    applied: Counter[str] = Counter()
    skipped: list[str] = []
    nodes = dict(graph.nodes)
    for node_id in graph.topological_order:
        node = nodes[node_id]
        bodies = list(_bodies(node))
        if not bodies:
            continue
        proto = _copy(node.proto)
        for attr_name, body in bodies:
            share = budget.by_nodes(_proto_nodes(body), total)
            total -= _proto_nodes(body)
            try:
                new_body, counts = _optimize_body(body, graph, search, share)
            except (TasoError, ValueError, KeyError, onnx.checker.ValidationError) as exc:
                skipped.append(f"{node.name or node.op_type}.{attr_name}: {exc}")
                continue
            if counts:
                _attribute(proto, attr_name).g.CopyFrom(new_body)
                applied.update(counts)
        if proto != node.proto:
            nodes[node_id] = _with_proto(node, proto)
    new_graph = dataclasses.replace(graph, nodes=MappingProxyType(nodes)) if applied else graph
    return BodiesOutcome(new_graph, dict(sorted(applied.items())), tuple(skipped))


def _optimize_body(
    body: onnx.GraphProto, outer: Graph, search: BodySearch, budget: Budget
) -> tuple[onnx.GraphProto, dict[str, int]]:
    graph = import_body(body, outer)
    own = budget.by_nodes(len(graph.nodes), len(graph.nodes) + body_node_count(graph))
    best, counts = search(graph, own) if own.seconds > 0 and graph.nodes else (graph, {})
    nested = optimize_bodies(best, search, budget=budget)
    applied = Counter(counts) + Counter(nested.applied)
    if not applied:
        return body, {}
    return export(nested.graph).graph, dict(applied)


def import_body(body: onnx.GraphProto, outer: Graph) -> Graph:
    """The IR of a subgraph; the outer-scope values it reads become its `outer_scope`."""
    template = _model_around(body, outer)
    free = captured_from(body)
    proxy = onnx.ModelProto()
    proxy.CopyFrom(template)
    proxy.graph.input.extend(_value_info(name, outer.types.get(name)) for name in free)
    context = outer.context
    base_dir = context.base_dir if isinstance(context, ModelContext) else ""
    imported = import_model(proxy, base_dir=base_dir)
    types = {**imported.types}
    for name in outer.types.keys() - types.keys():  # fresh names must not shadow outer values
        types[name] = outer.types[name]
    return dataclasses.replace(
        imported,
        inputs=tuple(v.name for v in body.input),
        types=MappingProxyType(types),
        context=BodyContext(template=template, base_dir=base_dir, main=_main_graph(outer)),
        outer_scope=frozenset(free),
    )


def _main_graph(outer: Graph) -> Graph:
    """The main graph `outer` belongs to (`outer` itself when it is the main graph)."""
    context = outer.context
    return context.main if isinstance(context, BodyContext) and context.main is not None else outer


def captured_from(body: onnx.GraphProto) -> list[str]:
    """Names a body reads from enclosing scopes (directly or from its own nested bodies)."""
    holder = onnx.NodeProto()
    holder.attribute.add(name="body", type=onnx.AttributeProto.GRAPH).g.CopyFrom(body)
    return captured_names(holder)


def _model_around(body: onnx.GraphProto, outer: Graph) -> onnx.ModelProto:
    model = onnx.ModelProto()
    context = outer.context
    if isinstance(context, ModelContext):
        template = context.template
        model.ir_version = template.ir_version
        model.opset_import.extend(template.opset_import)
        model.functions.extend(template.functions)
    model.graph.CopyFrom(body)
    return model


def _value_info(name: str, tensor_type: TensorType | None) -> onnx.ValueInfoProto:
    if tensor_type is None or not tensor_type.elem_type:
        return onnx.ValueInfoProto(name=name)
    shape = None if tensor_type.shape is None else list(tensor_type.shape)
    return onnx.helper.make_tensor_value_info(name, tensor_type.elem_type, shape)


def _bodies(node: Node) -> Iterator[tuple[str, onnx.GraphProto]]:
    if node.proto is None:
        return
    for attr in node.proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g


def _proto_nodes(body: onnx.GraphProto) -> int:
    nested = sum(
        _proto_nodes(a.g) for n in body.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH
    )
    return len(body.node) + nested


def _copy(proto: onnx.NodeProto | None) -> onnx.NodeProto:
    copied = onnx.NodeProto()
    if proto is not None:
        copied.CopyFrom(proto)
    return copied


def _attribute(proto: onnx.NodeProto, name: str) -> onnx.AttributeProto:
    return next(a for a in proto.attribute if a.name == name)


def _with_proto(node: Node, proto: onnx.NodeProto) -> Node:
    return dataclasses.replace(
        node, attributes=decode_attributes(proto), captures=tuple(captured_names(proto)), proto=proto
    )
