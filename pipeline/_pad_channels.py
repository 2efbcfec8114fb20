"""Channel padding: conv widths that ORT's NCHWc kernels can block, the extra channels inert.

ORT's CPU provider runs a conv in its blocked NCHWc layout only when its channel counts are
multiples of the block (16 on AVX-512, 8 on AVX2); a network of 8-, 24-, 40- or 88-channel
layers (MobileNetV3 at width 0.35, NASNet's 11/22/44/88) runs those convs in plain NCHW with
reorders between blocked neighbours: 29% of PP-OCR's text-direction classifier went to
ReorderInput/ReorderOutput. Here every such *channel class* is widened to the next multiple
of the block of the machine ORT runs on (`block`: `taso.backends.nchwc_block`), and the
extra channels never reach a real one. The block matters both ways: on an AVX2 machine a
24-channel class is already blocked, and widening it to 32 only adds work:

A class is the set of 4-D values that must share one channel layout: a group-1 conv's
output, and everything channel-wise ops carry it to (unary activations, pooling, spatial
Pad, a depthwise conv, BatchNormalization, Add/Sub/Mul/Div with a per-channel or scalar
constant, or elementwise with another value of the class). Its producers (group-1 convs)
get zero weight rows and zero bias for the extra channels; its consumers (group-1 convs)
get zero weight columns; depthwise convs, BatchNormalization and per-channel constants are
extended (zero weights and shifts, variance and divisors 1). A channel Concat of widened
classes writes their extra channels where they are, between the real ones (GhostNet's
ghost halves of 8, 12 or 20 channels each widened to 16 before they are joined): a class
holding a Concat's output takes the layout of its parts, the same for every Concat in it,
and must come out a multiple of the block wide. A class is widened only if every value in it
is produced and read by such ops: one that reaches a graph output, a subgraph, a reshape,
a Concat on another axis or any other op keeps its width, and so do the parts of a Concat
whose output keeps its width.

Why the real channels are unchanged: each rewrite is an instance of a validated axiom
(`opspecs/axioms/channel_pad.py`): a channel-wise op of a channel concatenation is the
concatenation of the op on each part, a conv reading zero weight columns ignores the
channels they multiply (whatever finite values those hold: every op in a class maps finite
values to finite ones), wherever they sit, and a Concat of concatenations is the
concatenation of their parts. The extra channels of a class are finite for the same
reason, so the whole graph computes the original's values in its real channels, exactly in
real arithmetic (the kernels may sum in a different order: float rounding differs). The
result is measured whole like any rule sweep, and checked against the original like any
result.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from onnx import numpy_helper

from taso.ir import Graph, Initializer, Node, TensorType
from taso.pipeline._rewire import STANDARD
from taso.search.rewrite import Rewrite

PAD_CHANNELS = "layout/pad-channels-"
"""The rule id, less the block, under which a graph with widened channel classes is swept
and reported (`pad_rule_id`: "layout/pad-channels-8" on AVX2)."""

BLOCK = 16
"""The channel block of ORT's NCHWc kernels on AVX-512, the default of `pad_channels`."""


def pad_rule_id(block: int) -> str:
    """The rule id of channel padding to multiples of `block`."""
    return f"{PAD_CHANNELS}{block}"


def is_pad_rule(rule_id: str) -> bool:
    """Whether `rule_id` is channel padding's, to whatever block (`pad_rule_id`)."""
    return rule_id.startswith(PAD_CHANNELS)

CARRIED = frozenset({"Relu", "HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "Clip", "GlobalAveragePool",
                      "MaxPool", "AveragePool", "Identity"})
"""Ops that carry each channel to the same channel of their first output, finite to finite."""
_BINARY = frozenset({"Add", "Sub", "Mul", "Div"})

LEMMAS: Mapping[str, tuple[str, ...]] = {
    **{op: (f"{op.lower()}_concat",) for op in (*CARRIED, "Pad", "BatchNormalization")},
    **{op: (f"{op.lower()}_channel_concat", f"{op.lower()}_scalar_concat") for op in _BINARY},
    "Conv": ("conv_rows_concat", "conv_zero_columns", "conv_zero_columns_inside", "depthwise_conv_concat"),
    "Concat": ("concat_flatten",),
}
"""The lemmas (`taso.opspecs.axioms.channel_pad`) behind each op the padding widens through."""


@dataclass(frozen=True)
class Layout:
    """Where each of a class's channels sits in its widened value (`index`), and how many
    channels that value has (`width`); the others are extra."""

    index: tuple[int, ...]
    width: int

    @classmethod
    def identity(cls, channels: int) -> Layout:
        return cls(tuple(range(channels)), channels)

    @classmethod
    def trailing(cls, channels: int, block: int) -> Layout:
        """The real channels first, the extra ones after, up to a multiple of `block`."""
        return cls(tuple(range(channels)), -(-channels // block) * block)

    @property
    def widened(self) -> bool:
        return self.width != len(self.index)

    def then(self, other: Layout) -> Layout:
        """The layout of the channel Concat of a value laid out as `self` and one as `other`."""
        return Layout(self.index + tuple(self.width + i for i in other.index), self.width + other.width)


@dataclass(frozen=True)
class Padding:
    """A graph with its channel classes widened, and how many classes and nodes changed."""

    graph: Graph
    classes: int
    nodes: int


def padded_rewrites(graph: Graph, near: frozenset[int] | None, *, block: int = BLOCK) -> Iterator[Rewrite]:
    """The channel padding of `graph` to multiples of `block` as one `Rewrite` (none if no
    class can be widened, or when asked only for rewrites near a change: it is a
    whole-graph rewrite)."""
    if near is not None:
        return
    padding = pad_channels(graph, block=block)
    if padding is not None:
        yield Rewrite.between(pad_rule_id(block), graph, padding.graph)


def pad_channels(graph: Graph, *, block: int = BLOCK) -> Padding | None:
    """`graph` with every channel class that can be widened widened to a multiple of `block`."""
    if block < 2:
        raise ValueError(f"a channel block is at least 2 channels, got {block}")
    classes = _Classes.of(graph)
    layouts = classes.layouts(block)
    if not layouts:
        return None
    return _Widener(graph, classes, layouts).widened()


class _Classes:
    """Union-find over 4-D values: which values share a channel layout, which cannot be widened."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.parent: dict[str, str] = {}
        self.fixed: set[str] = set()
        self.produced: set[str] = set()  # values some group-1 conv writes
        self.concats: dict[str, tuple[str, ...]] = {}  # a channel Concat's output: its parts
        self.kinds: dict[int, _Kind] = {}  # how each node treats channels, by node id

    @classmethod
    def of(cls, graph: Graph) -> _Classes:
        found = cls(graph)
        for node_id, node in graph.nodes.items():
            found.kinds[node_id] = _kind(graph, node, found.channels)
            found._visit(node, found.kinds[node_id])
        found.fixed.update(graph.inputs, graph.outputs)
        for node in graph.nodes.values():
            found.fixed.update(node.captures)
        return found

    def channels(self, name: str) -> int | None:
        tensor = self.graph.types.get(name)
        if tensor is None or tensor.shape is None or len(tensor.shape) != 4 or not isinstance(tensor.shape[1], int):
            return None
        return tensor.shape[1]

    def root(self, name: str) -> str:
        self.parent.setdefault(name, name)
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def join(self, a: str, b: str) -> None:
        if self.channels(a) is None or self.channels(a) != self.channels(b):
            self.fixed.update((a, b))
            return
        self.parent[self.root(a)] = self.root(b)

    def _visit(self, node: Node, kind: _Kind) -> None:
        if kind is _Kind.CARRIED:
            self.join(node.inputs[0], node.outputs[0])
        elif kind is _Kind.BINARY:
            for name in node.inputs:
                if name not in self.graph.initializers and self.channels(name) == self.channels(node.outputs[0]):
                    self.join(name, node.outputs[0])
        elif kind is _Kind.CONV:
            self.root(node.inputs[0])
            self.root(node.outputs[0])
            self.produced.add(node.outputs[0])
        elif kind is _Kind.DEPTHWISE:
            self.join(node.inputs[0], node.outputs[0])
        elif kind is _Kind.CONCAT:
            for name in (*node.inputs, node.outputs[0]):
                self.root(name)
            self.concats[node.outputs[0]] = node.inputs
        else:
            self.fixed.update(name for name in (*node.inputs, *node.outputs) if name and self.channels(name) is not None)

    def layouts(self, block: int) -> dict[str, Layout]:
        """The layout of each class root that is widened. A class whose Concats disagree, or
        come out a width ORT cannot block, keeps its width; so do the parts of a Concat
        whose class keeps its width; that may change other layouts: repeat until none does."""
        members: dict[str, list[str]] = {}
        for name in list(self.parent):
            members.setdefault(self.root(name), []).append(name)
        fixed = {self.root(name) for name in self.fixed if name in self.parent}
        while True:
            laid = _Layouts(self, members, fixed, block)
            for root in members:
                laid.of(root)
            if laid.conflicts <= fixed:  # nothing new keeps its width: these layouts agree
                return {root: layout for root, layout in laid.done.items() if layout.widened}
            fixed |= laid.conflicts


class _Layouts:
    """One pass choosing each class's layout, collecting the classes that must keep their width."""

    def __init__(self, classes: _Classes, members: Mapping[str, list[str]], fixed: set[str], block: int) -> None:
        self.classes, self.members, self.fixed, self.block = classes, members, fixed, block
        self.done: dict[str, Layout] = {}
        self.conflicts: set[str] = set()
        self.visiting: set[str] = set()

    def of(self, root: str) -> Layout:
        if root in self.visiting:  # reached again through its own Concat: it keeps its width
            self.conflicts.add(root)
            return Layout.identity(self.classes.channels(root) or 0)
        if root not in self.done:
            self.visiting.add(root)
            self.done[root] = self._choose(root)
            self.visiting.discard(root)
        return self.done[root]

    def _choose(self, root: str) -> Layout:
        channels = self.classes.channels(root) or 0
        names = self.members[root]
        sources = [self.classes.concats[name] for name in names if name in self.classes.concats]
        if root in self.fixed:
            for parts in sources:
                self.conflicts.update(r for r in self._roots(parts) if self.of(r).widened)
            return Layout.identity(channels)
        if sources:
            return self._concatenated(root, sources, channels)
        if channels >= 2 and channels % self.block and any(name in self.classes.produced for name in names):
            return Layout.trailing(channels, self.block)
        return Layout.identity(channels)

    def _concatenated(self, root: str, sources: list[tuple[str, ...]], channels: int) -> Layout:
        candidates = set()
        for parts in sources:
            layout = Layout((), 0)
            for part in self._roots(parts):
                layout = layout.then(self.of(part))
            candidates.add(layout)
        (layout, *others) = candidates
        if others or (layout.widened and layout.width % self.block):
            self.conflicts.add(root)
            return Layout.identity(channels)
        return layout

    def _roots(self, parts: tuple[str, ...]) -> list[str]:
        return [self.classes.root(name) for name in parts]


class _Kind(enum.Enum):
    """How a node treats channels."""

    CARRIED = "each channel to itself"
    BINARY = "elementwise with values of the class or constants it can extend"
    CONV = "a group-1 conv: writes a class, reads one"
    DEPTHWISE = "a depthwise conv: each channel to itself, with its own weights"
    CONCAT = "a Concat over channels: its output laid out as its parts, one after another"
    OTHER = "anything else: the values it reads and writes keep their width"


def _kind(graph: Graph, node: Node, channels: Callable[[str], int | None]) -> _Kind:
    """How `node` treats channels: carries them (`CARRIED`, spatial Pad, BatchNormalization),
    elementwise with constants it can extend, a group-1 or depthwise conv, or anything else."""
    if node.domain not in STANDARD or not node.outputs or channels(node.outputs[0]) is None:
        return _Kind.OTHER
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        return _Kind.OTHER
    op = node.op_type
    if op in CARRIED and _operands_constant(graph, node.inputs[1:], scalar=True):
        return _Kind.CARRIED
    if op == "Pad" and _spatial_pad(graph, node):
        return _Kind.CARRIED
    if op == "BatchNormalization" and _operands_constant(graph, node.inputs[1:5], scalar=False):
        return _Kind.CARRIED
    if op in _BINARY and _binary_extendable(graph, node, channels):
        return _Kind.BINARY
    if op == "Conv":
        return _conv_kind(graph, node, channels)
    if op == "Concat" and _channel_concat(node, channels):
        return _Kind.CONCAT
    return _Kind.OTHER


def _operands_constant(graph: Graph, names: tuple[str, ...], *, scalar: bool) -> bool:
    for name in names:
        if not name:
            continue
        init = graph.initializers.get(name)
        if init is None or (scalar and init.type.shape is not None and int(np.prod(init.type.shape)) != 1):
            return False
    return True


def _channel_concat(node: Node, channels: Callable[[str], int | None]) -> bool:
    parts = [channels(name) if name else None for name in node.inputs]
    return node.attr("axis", None) in (1, -3) and None not in parts and sum(parts) == channels(node.outputs[0])


def _spatial_pad(graph: Graph, node: Node) -> bool:
    mode = node.attr("mode", b"constant")
    if mode not in (b"constant", "constant") or len(node.inputs) < 2:
        return False
    pads = graph.initializers.get(node.inputs[1])
    if pads is None or (len(node.inputs) > 3 and node.inputs[3]):
        return False
    values = pads.array().reshape(-1)
    return len(values) == 8 and not values[[0, 1, 4, 5]].any() and _operands_constant(graph, node.inputs[2:3], scalar=True)


def _binary_extendable(graph: Graph, node: Node, channels: Callable[[str], int | None]) -> bool:
    """Add/Sub/Mul/Div whose constants are scalars or per channel, and whose divisor (Div) is one."""
    width = channels(node.outputs[0])
    for index, name in enumerate(node.inputs):
        init = graph.initializers.get(name)
        if init is None:
            if node.op_type == "Div" and index == 1:
                return False
            if channels(name) not in (width, 1):
                return False
            continue
        if _channel_axis(init.type.shape, width) is None:
            return False
    return True


def _channel_axis(shape: tuple | None, width: int | None) -> int | None:
    """The axis of a constant that runs over channels ((C,1,1) or (1,C,1,1)); -1 for a
    one-element constant; None for any other shape."""
    if shape is None or len(shape) > 4:
        return None
    if all(d == 1 for d in shape):
        return -1
    if len(shape) >= 3 and shape[-3] == width and all(d == 1 for d in shape[-2:]) and all(d == 1 for d in shape[:-3]):
        return len(shape) - 3
    return None


def _conv_kind(graph: Graph, node: Node, channels: Callable[[str], int | None]) -> _Kind:
    weight = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if weight is None or weight.type.shape is None or len(weight.type.shape) != 4 or channels(node.inputs[0]) is None:
        return _Kind.OTHER
    if len(node.inputs) > 2 and node.inputs[2] and node.inputs[2] not in graph.initializers:
        return _Kind.OTHER
    group = int(node.attr("group", 1))
    if group == 1:
        return _Kind.CONV
    if group == weight.type.shape[0] == channels(node.inputs[0]) and weight.type.shape[1] == 1:
        return _Kind.DEPTHWISE
    return _Kind.OTHER


class _Widener:
    """Writes the widened graph: new weights for the nodes that touch a widened class."""

    def __init__(self, graph: Graph, classes: _Classes, layouts: Mapping[str, Layout]) -> None:
        self.graph, self.classes, self.layouts = graph, classes, layouts
        self.initializers: list[Initializer] = []

    def layout(self, name: str) -> Layout | None:
        return self.layouts.get(self.classes.root(name)) if name in self.classes.parent else None

    def widened(self) -> Padding:
        remove, add = [], []
        for node_id, node in self.graph.nodes.items():
            replaced = self._node(node, self.classes.kinds[node_id])
            if replaced is not None:
                remove.append(node_id)
                add.append(replaced)
        types = {name: self._type(name, layout) for name in self.classes.parent if (layout := self.layout(name))}
        graph = self.graph.rewrite(remove=remove, add=add, types=types, initializers=self.initializers)
        return Padding(graph, len(self.layouts), len(add))

    def _type(self, name: str, layout: Layout) -> TensorType:
        tensor = self.graph.types[name]
        assert tensor.shape is not None
        return TensorType(tensor.elem_type, (tensor.shape[0], layout.width, *tensor.shape[2:]))

    def _node(self, node: Node, kind: _Kind) -> Node | None:
        out = self.layout(node.outputs[0]) if node.outputs else None
        if kind is _Kind.CONV:
            return self._conv(node, out, self.layout(node.inputs[0]))
        if kind is _Kind.DEPTHWISE and out:
            return self._depthwise(node, out)
        if kind is _Kind.BINARY and out:
            return self._binary(node, out)
        if kind is _Kind.CARRIED and out and node.op_type == "BatchNormalization":
            fills = (0.0, 0.0, 0.0, 1.0)  # scale, shift, mean, variance
            inputs = [self._extended(name, 0, out, fill) for name, fill in zip(node.inputs[1:5], fills, strict=True)]
            return _with(node, (node.inputs[0], *inputs, *node.inputs[5:]))
        return None  # a Concat of widened parts needs no change: its output is laid out as they are

    def _conv(self, node: Node, out: Layout | None, into: Layout | None) -> Node | None:
        if not out and not into:
            return None
        weight = self.graph.initializers[node.inputs[1]].array()
        if out:
            weight = _spread(weight, 0, out, 0.0)
        if into:
            weight = _spread(weight, 1, into, 0.0)
        inputs = list(node.inputs)
        inputs[1] = self._new(node.inputs[1], weight)
        if out and len(inputs) > 2 and inputs[2]:
            inputs[2] = self._extended(inputs[2], 0, out, 0.0)
        return _with(node, tuple(inputs))

    def _depthwise(self, node: Node, out: Layout) -> Node:
        inputs = list(node.inputs)
        inputs[1] = self._extended(inputs[1], 0, out, 0.0)
        if len(inputs) > 2 and inputs[2]:
            inputs[2] = self._extended(inputs[2], 0, out, 0.0)
        attributes = tuple((k, out.width if k == "group" else v) for k, v in node.attributes)
        return _with(node, tuple(inputs), attributes)

    def _binary(self, node: Node, out: Layout) -> Node | None:
        inputs, changed = list(node.inputs), False
        fill = 1.0 if node.op_type == "Div" else 0.0
        for index, name in enumerate(node.inputs):
            init = self.graph.initializers.get(name)
            axis = None if init is None else _channel_axis(init.type.shape, self.classes.channels(node.outputs[0]))
            if axis is not None and axis >= 0:
                inputs[index], changed = self._extended(name, axis, out, fill), True
        return _with(node, tuple(inputs)) if changed else None

    def _extended(self, name: str, axis: int, layout: Layout, fill: float) -> str:
        return self._new(name, _spread(self.graph.initializers[name].array(), axis, layout, fill))

    def _new(self, name: str, value: np.ndarray) -> str:
        fresh = self.graph.fresh_name(f"{name}_padded")
        while any(init.name == fresh for init in self.initializers):
            fresh = self.graph.fresh_name(fresh)
        elem_type = self.graph.initializers[name].type.elem_type
        self.initializers.append(Initializer(fresh, TensorType(elem_type, value.shape), numpy_helper.from_array(value, fresh)))
        return fresh


def _spread(value: np.ndarray, axis: int, layout: Layout, fill: float) -> np.ndarray:
    """`value` with its entries along `axis` moved to `layout`'s positions, `fill` elsewhere."""
    shape = list(value.shape)
    shape[axis] = layout.width
    spread = np.full(shape, fill, dtype=value.dtype)
    target: list[object] = [slice(None)] * value.ndim
    target[axis] = np.asarray(layout.index, dtype=np.int64)
    spread[tuple(target)] = value
    return spread


def _with(node: Node, inputs: tuple[str, ...], attributes: tuple | None = None) -> Node:
    return Node(node.op_type, node.domain, inputs, node.outputs,
                node.attributes if attributes is None else attributes, node.name, node.captures)
