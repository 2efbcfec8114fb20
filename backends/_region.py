"""Cut a region (a set of nodes) out of a Graph as a standalone, runnable ONNX model.

The region model has the region's nodes (their original NodeProtos when they have one);
values it reads from outside become graph inputs with static shapes (`ConcreteShapes.shape`);
weights it reads become initializers (the TensorProtos are copied into the region
model: protobuf cannot share a message, and ORT needs the bytes anyway); values read
outside the region, or graph outputs, become its outputs, so ORT fuses inside the
region exactly where it could in the whole model. Constant cones (nodes computing only
from weights, e.g. internal weight transforms) feeding the region are pulled in, so a
transformed weight stays a constant ORT can pre-pack. Internal ops (`taso.internal`)
are folded first with `taso._fold.fold_constants`; a region whose transforms cannot be
folded is refused (`RegionError`) and the caller falls back to an estimate.

`Region.signature` identifies what the region costs, not what it is called: node
signatures, wiring, input shapes and dtypes, weight shapes (and the bytes of weights of
at most 64 elements, which may be shapes or axes). Repeated blocks share signatures.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import onnx

from taso._fold import fold_constants
from taso._onnx_export import node_to_proto
from taso.backends._session import ModelSource, ModelWithData
from taso.errors import TasoError
from taso.ir import INTERNAL_DOMAIN, Dim, Graph, Node, TensorType
from taso.opspecs import evaluate_op

ShapeOf = Callable[[str, TensorType | None], tuple[Dim, ...] | None]
"""The shape a region input gets (`ConcreteShapes.shape`: static; None: cannot cut)."""

DEFAULT_OPSET = 17
_SMALL_WEIGHT = 64


class RegionError(Exception):
    """The region cannot be turned into a runnable model (the reason is the message)."""


@dataclass(frozen=True)
class Region:
    """A standalone model of some nodes of a graph, and its cost signature."""

    model: onnx.ModelProto
    signature: str
    node_ids: frozenset[int]
    data_folder: str | None = None  # where external weights live (they are referenced, not loaded)

    @property
    def source(self) -> ModelSource:
        """What ORT should load: the proto, with its external-data folder if it has one."""
        if self.data_folder is None:
            return self.model
        return ModelWithData(self.model, Path(self.data_folder))


def neighbourhood(graph: Graph, seeds: Iterable[int], hops: int) -> set[int]:
    """Nodes within `hops` producer/consumer steps of `seeds` (seeds included)."""

    def around(node: Node) -> Iterable[int]:
        yield from (graph.producers[n][0] for n in node.inputs if n in graph.producers)
        for name in node.outputs:
            yield from graph.consumers.get(name, ())

    return _grow(graph, seeds, hops, around)


def _grow(graph: Graph, seeds: Iterable[int], steps: int, around: Callable[[Node], Iterable[int]]) -> set[int]:
    """`seeds` and what `around` reaches from them in up to `steps` steps."""
    reached = {s for s in seeds if s in graph.nodes}
    frontier = set(reached)
    for _ in range(steps):
        step = {i for node_id in frontier for i in around(graph.nodes[node_id])}
        frontier = step - reached
        reached |= step
    return reached


FUSION_ANCHORS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm"})
"""Ops ORT fuses what follows them into (BN, Add, activations): a region's chains of
other ops are followed up to one of these, so a fusion the whole graph has is not
cut off at the region's border (ResNeXt: Conv+BN+Add+Relu is one NCHWc kernel; with
the Conv outside, a region priced Relu -> Clip as free where it costs 15%)."""
FUSION_STEPS = 4


def fusion_closure(graph: Graph, node_ids: Iterable[int], steps: int = FUSION_STEPS) -> set[int]:
    """`node_ids` plus, for up to `steps` steps, the producers of its non-anchor nodes and
    the non-anchor consumers of all of its nodes."""

    def around(node: Node) -> Iterable[int]:
        if node.op_type not in FUSION_ANCHORS:
            yield from (graph.producers[n][0] for n in node.inputs if n in graph.producers)
        for name in node.outputs:
            yield from (c for c in graph.consumers.get(name, ()) if graph.nodes[c].op_type not in FUSION_ANCHORS)

    return _grow(graph, node_ids, steps, around)


def extract_region(graph: Graph, node_ids: Iterable[int], shapes: ShapeOf) -> Region:
    """The region model of `node_ids` in `graph` (plus the constant cones feeding it)."""
    ids = _with_constant_cones(graph, set(node_ids))
    if any(graph.nodes[i].domain == INTERNAL_DOMAIN for i in ids):
        graph, ids = _folded(graph, ids)
    order = _local_order(graph, ids)
    return _build(graph, order, shapes)


def _with_constant_cones(graph: Graph, ids: set[int]) -> set[int]:
    constant: dict[int, bool] = {}

    def computed_from_weights(node_id: int) -> bool:
        """A node whose inputs are all initializers or outputs of such nodes: its value is
        fixed once the weights are (any op, unlike `taso._constness`, which is about what
        export knows); the region pulls it in so ORT can fold or pre-pack it."""
        if node_id not in constant:
            constant[node_id] = False  # guards against cycles
            node = graph.nodes[node_id]
            constant[node_id] = bool(node.inputs) and all(
                not name or name in graph.initializers
                or (name in graph.producers and computed_from_weights(graph.producers[name][0]))
                for name in node.inputs
            )
        return constant[node_id]

    stack = list(ids)
    while stack:
        node = graph.nodes[stack.pop()]
        for name in node.inputs:
            source = graph.producers.get(name)
            if source and source[0] not in ids and computed_from_weights(source[0]):
                ids.add(source[0])
                stack.append(source[0])
    return ids


def _folded(graph: Graph, ids: set[int]) -> tuple[Graph, set[int]]:
    """Fold the region's internal weight transforms (their NumPy semantics, as export does)."""
    sub = _subgraph(graph, ids)
    try:
        folded = fold_constants(sub, evaluate_op)
    except TasoError as error:
        raise RegionError(f"cannot fold the region's weight transforms: {error}") from error
    return folded, set(folded.nodes)


def _subgraph(graph: Graph, ids: set[int]) -> Graph:
    """The region as a Graph whose outputs are the values used outside it."""
    produced = {name for i in ids for name in graph.nodes[i].outputs if name}
    outputs = tuple(sorted(name for name in produced if _escapes(graph, name, ids)))
    return Graph(
        inputs=(),
        outputs=outputs,
        nodes=MappingProxyType({i: graph.nodes[i] for i in ids}),
        types=graph.types,
        initializers=graph.initializers,
        context=graph.context,
        outer_scope=frozenset(graph.inputs) | frozenset(graph.producers.keys() - produced),
    )


def _escapes(graph: Graph, name: str, ids: set[int]) -> bool:
    return name in graph.outputs or any(c not in ids for c in graph.consumers.get(name, ()))


def _local_order(graph: Graph, ids: set[int]) -> list[int]:
    """Region nodes in a topological order (ties by id), without sorting the whole graph
    unless the region is most of it."""
    if 4 * len(ids) > len(graph.nodes):
        return [i for i in graph.topological_order if i in ids]
    waiting = {
        i: {graph.producers[n][0] for n in (*graph.nodes[i].inputs, *graph.nodes[i].captures)
            if n in graph.producers} & ids
        for i in ids
    }
    order: list[int] = []
    ready = sorted(i for i, deps in waiting.items() if not deps)
    done: set[int] = set()
    while ready:
        node_id = ready.pop(0)
        order.append(node_id)
        done.add(node_id)
        freed = [i for i, deps in waiting.items() if i not in done and node_id in deps and deps <= done]
        ready = sorted(set(ready) | set(freed))
    if len(order) != len(ids):
        raise RegionError("the region has a cycle")
    return order


def _build(graph: Graph, order: Sequence[int], shapes: ShapeOf) -> Region:
    nodes = [graph.nodes[i] for i in order]
    digest = hashlib.blake2b(digest_size=16, person=b"taso-region")
    where: dict[str, bytes] = {}
    inputs: list[onnx.ValueInfoProto] = []
    weights: list[onnx.TensorProto] = []
    for position, node in enumerate(nodes):
        _feed(digest, node.signature)
        for name in (*node.inputs, *node.captures):  # a body's outer-scope reads are region inputs too
            if name and name not in where:
                where[name] = _external(graph, name, shapes, inputs, weights)
            _feed(digest, where.get(name, b""))
        for k, out in enumerate(node.outputs):
            if out:
                where[out] = f"n{position}.{k}".encode()
    outputs = _outputs(graph, nodes, set(order), shapes)
    for value in outputs:
        _feed(digest, b"out:" + where[value.name])
    model = _model(graph, [_proto(n) for n in nodes], inputs, outputs, weights)
    external = [graph.initializers[t.name] for t in weights if t.data_location == onnx.TensorProto.EXTERNAL]
    folder = external[0].base_dir if external else None
    return Region(model, digest.hexdigest(), frozenset(order), folder)


def _external(
    graph: Graph,
    name: str,
    shapes: ShapeOf,
    inputs: list[onnx.ValueInfoProto],
    weights: list[onnx.TensorProto],
) -> bytes:
    """Declare a value read from outside the region; return how the signature sees it."""
    if name in graph.initializers:
        init = graph.initializers[name]
        tensor = init.proto  # external data stays on disk: the region references it
        weights.append(tensor)
        small = init.array().tobytes() if _numel(tensor) <= _SMALL_WEIGHT else b""
        return f"w:{tensor.data_type}:{tuple(tensor.dims)}:".encode() + small
    declared = graph.types.get(name)
    shape = shapes(name, declared)
    if shape is None or declared is None:
        raise RegionError(f"no static shape for value {name!r}")
    inputs.append(onnx.helper.make_tensor_value_info(name, declared.elem_type, list(shape)))
    return f"in{len(inputs)}:{declared.elem_type}:{shape}".encode()


def _outputs(graph: Graph, nodes: Sequence[Node], ids: set[int], shapes: ShapeOf) -> list[onnx.ValueInfoProto]:
    produced = [name for node in nodes for name in node.outputs if name]
    names = [name for name in produced if _escapes(graph, name, ids)]
    if not names:  # a dead region: keep its last values alive so ORT runs it
        names = [name for name in produced if not graph.consumers.get(name)]
    return [_value_info(n, _elem(graph, n), shapes(n, graph.types.get(n))) for n in names]


def _value_info(name: str, elem: int, shape: tuple[Dim, ...] | None) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def _elem(graph: Graph, name: str) -> int:
    declared = graph.types.get(name)
    return declared.elem_type if declared else onnx.TensorProto.FLOAT


def _proto(node: Node) -> onnx.NodeProto:
    return node.proto if node.proto is not None else node_to_proto(node)


def _model(
    graph: Graph,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    weights: list[onnx.TensorProto],
) -> onnx.ModelProto:
    body = onnx.helper.make_graph(nodes, "region", inputs, outputs, weights)
    template = getattr(graph.context, "template", None)
    if template is not None:
        model = onnx.helper.make_model(body, opset_imports=list(template.opset_import))
        model.functions.extend(template.functions)
    else:
        model = onnx.helper.make_model(body, opset_imports=_opsets(nodes))
    return model


def _opsets(nodes: list[onnx.NodeProto]) -> list[onnx.OperatorSetIdProto]:
    domains = sorted({n.domain for n in nodes if n.domain not in ("", "ai.onnx")})
    return [onnx.helper.make_opsetid("", DEFAULT_OPSET)] + [onnx.helper.make_opsetid(d, 1) for d in domains]


def _numel(tensor: onnx.TensorProto) -> int:
    count = 1
    for dim in tensor.dims:
        count *= dim
    return count


def _feed(digest: hashlib._Hash, part: bytes) -> None:
    digest.update(len(part).to_bytes(4, "little"))
    digest.update(part)
