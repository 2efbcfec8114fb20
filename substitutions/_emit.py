"""Spec instances -> ONNX-domain IR nodes: the way back from `node_view`.

`emit_nodes` writes one spec instance as the ONNX node of `spec.params_to_onnx`
(parameters that ONNX takes as constant inputs become new, small initializers with
fresh names) or, when `spec.needs_decomposition` says so for the model's opset, as the
spec's decomposition (a short chain of ONNX nodes). Outputs keep the names the caller
gives; intermediate values get fresh names from a `NameSource`.

Shapes cross between the IR (dims may be None: unknown) and the specs (dims are ints or
symbols) through `spec_shape` / `ir_shape`: an unknown dim becomes a unique placeholder
symbol on the way in and None again on the way out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import onnx
from onnx import numpy_helper

from taso.ir import Dim, Graph, Initializer, Node, TensorType
from taso.opspecs import EmitNode, OnnxNode, OpKind, OpSpec, Shape, ShapeError, get_spec
from taso.opspecs.clip import BOUNDS_AS_INPUTS_OPSET

_UNKNOWN = "?"
_INPUTS_FROM_OPSET = MappingProxyType({"Clip": BOUNDS_AS_INPUTS_OPSET})
"""Ops whose constant-input parameters were float attributes before the given opset."""


class OpsetError(ShapeError):
    """The target needs an op the model's opset lacks, and the op has no decomposition."""


@dataclass(frozen=True)
class Emission:
    """Nodes and initializers written for one spec instance, and types of the new values."""

    nodes: tuple[Node, ...]
    initializers: tuple[Initializer, ...] = ()
    types: Mapping[str, TensorType] = field(default_factory=lambda: MappingProxyType({}))


class NameSource:
    """Fresh value names for one rewrite: unused in the graph and not handed out before."""

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._taken: set[str] = set()

    def fresh(self, hint: str) -> str:
        k = 0
        while True:
            name = f"{hint}__taso{k}"
            if name not in self._taken and not self._used(name):
                self._taken.add(name)
                return name
            k += 1

    def _used(self, name: str) -> bool:
        graph = self._graph
        return (
            name in graph.types
            or name in graph.producers
            or name in graph.initializers
            or name in graph.consumers
            or name in graph.outer_scope
            or name in graph.inputs
        )


# ----- shapes ----------------------------------------------------------------------------


def spec_shape(tensor_type: TensorType | None, name: str) -> Shape | None:
    """A spec-side shape for a value (unknown dims -> unique placeholder symbols)."""
    if tensor_type is None or tensor_type.shape is None:
        return None
    return tuple(f"{_UNKNOWN}{name}[{i}]" if d is None else d for i, d in enumerate(tensor_type.shape))


def ir_shape(shape: Sequence[Dim]) -> tuple[Dim, ...]:
    """An IR-side shape (dims derived from placeholders become unknown again)."""
    return tuple(None if isinstance(d, str) and _UNKNOWN in d else d for d in shape)


def np_dtype(elem_type: int) -> np.dtype:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return np.dtype(np.float32)


def as_attribute(value: object) -> object:
    """A parameter as an IR attribute value: lists become tuples, recursively."""
    if isinstance(value, list | tuple):
        return tuple(as_attribute(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


# ----- emission ----------------------------------------------------------------------------


def emit_nodes(
    spec: OpSpec,
    params: Mapping[str, object],
    inputs: Sequence[str],
    outputs: Sequence[str],
    graph: Graph,
    opset: int,
    *,
    types: Mapping[str, TensorType] | None = None,
    names: NameSource | None = None,
) -> Emission:
    """ONNX-domain nodes computing `spec(params)(inputs) -> outputs`; raises ShapeError if
    the instance cannot be written for this opset (internal fold-only specs included)."""
    known = {**graph.types, **(types or {})}
    writer = _Writer(graph, opset, known, names or NameSource(graph), _data_dtype(inputs, known))
    full = spec.complete(params)
    if spec.needs_decomposition(full, opset=opset):
        writer.decomposition(spec, full, tuple(inputs), tuple(outputs))
    elif spec.kind is OpKind.INTERNAL:
        raise ShapeError(f"{spec.name} is internal ({spec.lowering.value}): its inputs must be constants")
    else:
        writer.node(spec, full, tuple(inputs), tuple(outputs))
    return Emission(tuple(writer.nodes), tuple(writer.initializers), MappingProxyType(writer.new_types))


def _data_dtype(inputs: Sequence[str], known: Mapping[str, TensorType]) -> np.dtype:
    for name in inputs:
        if name in known:
            return np_dtype(known[name].elem_type)
    return np.dtype(np.float32)


ROI_INPUT_UNTIL = 13
"""Resize 11 and 12 require their roi input (read only by tf_crop_and_resize): written empty."""

LEGACY_RESIZE_UNTIL = 11
"""Below opset 11 there is only the legacy nearest upsampling: Resize 10 (x, scales) and
Upsample 9 (x, scales) or 7 (scales as an attribute). It reads input index
floor(i / scale), which on the modelled whole-number scales >= 1 is the spec's x[i // k]
(PP-OCR's opset 9 classifier gates its SE blocks this way: with its channels padded to 16,
ORT ran the Upsample 9 gates in its NCHWc layout, 1.11x over the gates as broadcast Muls)."""


def _legacy_resize(onnx_node: OnnxNode, opset: int) -> OnnxNode:
    scales = onnx_node.const_inputs[2]
    if opset >= 10:
        return OnnxNode("Resize", {"mode": "nearest"}, {1: scales}, onnx_node.domain)
    if opset == 9:
        return OnnxNode("Upsample", {"mode": "nearest"}, {1: scales}, onnx_node.domain)
    attrs = {"mode": "nearest", "scales": [float(s) for s in scales.reshape(-1)]}
    return OnnxNode("Upsample", attrs, {}, onnx_node.domain)


def _older_form(spec: OpSpec, onnx_node: OnnxNode, opset: int) -> OnnxNode:
    """`onnx_node` as `opset` writes it: Clip's bounds as attributes before opset 11;
    Resize's empty roi before opset 13, and its legacy form before opset 11."""
    if spec.name == "Resize" and opset < LEGACY_RESIZE_UNTIL:
        return _legacy_resize(onnx_node, opset)
    if spec.name == "Resize" and opset < ROI_INPUT_UNTIL:
        const = {**onnx_node.const_inputs, 1: np.zeros(0, dtype=np.float32)}
        return OnnxNode(onnx_node.op_type, dict(onnx_node.attrs), const, onnx_node.domain)
    if opset >= _INPUTS_FROM_OPSET.get(spec.name, 0):
        return onnx_node
    attrs = dict(onnx_node.attrs)
    for p in spec.params:
        if p.input_index in onnx_node.const_inputs:
            attrs[p.attr_name] = float(onnx_node.const_inputs[p.input_index].reshape(-1)[0])
    return OnnxNode(onnx_node.op_type, attrs, {}, onnx_node.domain)


class _Writer:
    """Accumulates the nodes, initializers and types of one emission."""

    def __init__(
        self, graph: Graph, opset: int, known: dict[str, TensorType], names: NameSource, dtype: np.dtype
    ) -> None:
        self.graph, self.opset, self.known, self.names, self.dtype = graph, opset, known, names, dtype
        self.nodes: list[Node] = []
        self.initializers: list[Initializer] = []
        self.new_types: dict[str, TensorType] = {}

    def node(self, spec: OpSpec, params: Mapping[str, object], inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
        if self.opset < spec.min_opset:
            raise OpsetError(f"{spec.name} needs opset {spec.min_opset}, the model has {self.opset}")
        onnx_node = _older_form(spec, spec.params_to_onnx(params, dtype=self.dtype), self.opset)
        wired = self._wire(inputs, onnx_node.const_inputs, outputs[0])
        attributes = tuple(sorted((k, as_attribute(v)) for k, v in onnx_node.attrs.items()))
        self.nodes.append(Node(onnx_node.op_type, onnx_node.domain, wired, outputs, attributes))

    def _wire(self, tensors: tuple[str, ...], consts: Mapping[int, np.ndarray], hint: str) -> tuple[str, ...]:
        """ONNX input list: constant parameters at their positions, tensors filling the rest."""
        count = max([len(tensors) + len(consts), *(i + 1 for i in consts)])
        remaining = list(tensors)
        wired: list[str] = []
        for position in range(count):
            if position in consts:
                wired.append(self.constant(consts[position], f"{hint}_in{position}"))
            else:
                wired.append(remaining.pop(0) if remaining else "")
        while wired and not wired[-1]:
            wired.pop()
        return tuple(wired)

    def constant(self, array: np.ndarray, hint: str) -> str:
        name = self.names.fresh(hint)
        proto = numpy_helper.from_array(np.ascontiguousarray(array).reshape(np.shape(array)), name)  # 0-d stays 0-d
        tensor_type = TensorType(proto.data_type, tuple(int(d) for d in array.shape))
        self.initializers.append(Initializer(name, tensor_type, proto))
        self.new_types[name] = self.known[name] = tensor_type
        return name

    def decomposition(
        self, spec: OpSpec, params: Mapping[str, object], inputs: tuple[str, ...], outputs: tuple[str, ...]
    ) -> None:
        if spec.decomposition is None or len(outputs) != 1:
            raise ShapeError(f"{spec.name}: no single-output decomposition")
        local: dict[str, str] = {}
        for step in spec.decomposition(params):
            step_inputs = self._step_inputs(step, inputs, local)
            out = outputs[0] if step.output == "out" else self.names.fresh(f"{outputs[0]}_{step.output}")
            local[step.output] = out
            self._step(step, step_inputs, out, is_final=step.output == "out")

    def _step_inputs(self, step: EmitNode, inputs: tuple[str, ...], local: dict[str, str]) -> tuple[str, ...]:
        names: list[str] = []
        for ref in step.inputs:
            if isinstance(ref, int) and not isinstance(ref, bool):
                if ref < len(inputs):
                    names.append(inputs[ref])
            elif isinstance(ref, str):
                names.append(local[ref])
            else:
                names.append(self.constant(np.asarray(ref, dtype=self.dtype), f"{step.op_type}_scalar"))
        return tuple(names)

    def _step(self, step: EmitNode, inputs: tuple[str, ...], out: str, *, is_final: bool) -> None:
        step_spec = get_spec(step.op_type)
        attrs = {k: v for k, v in step.attrs.items() if v is not None}
        if step_spec is None:
            attributes = tuple(sorted((k, as_attribute(v)) for k, v in attrs.items()))
            self.nodes.append(Node(step.op_type, "", inputs, (out,), attributes))
            return
        params = step_spec.complete(step_spec.params_from_onnx(attrs))
        self.node(step_spec, params, inputs, (out,))
        if not is_final:
            self._record_type(step_spec, params, inputs, out)

    def _record_type(self, spec: OpSpec, params: Mapping[str, object], inputs: tuple[str, ...], out: str) -> None:
        shapes = [spec_shape(self.known.get(i), i) for i in inputs]
        elem_type = self.known[inputs[0]].elem_type if inputs and inputs[0] in self.known else onnx.TensorProto.FLOAT
        shape: tuple[Dim, ...] | None = None
        if all(s is not None for s in shapes):
            try:
                shape = ir_shape(spec.infer_shapes(shapes, params)[0])  # type: ignore[arg-type]
            except (ShapeError, ValueError, TypeError, IndexError):
                shape = None
        self.new_types[out] = self.known[out] = TensorType(elem_type, shape)
