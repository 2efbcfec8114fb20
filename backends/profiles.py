"""Concrete shapes for a model's inputs: `ShapeProfile` and its resolution against a graph.

A profile gives per-input shapes (`images=1x3x640x640`) and/or values of symbolic
dimensions (`batch=4`, `seq=128`). Dimensions the profile leaves open get defaults, the
first rule that applies (a symbol by its name, then by where it first appears):

1. a name that looks like a batch (`batch`, `batch_size`, `N`, `B`, `bs`, ...) is 1;
2. a name that looks like a sequence (`seq`, `sequence_length`, `max_len`, `num_tokens`,
   ...) is `SEQUENCE_DIM` (128: a typical tokenized sentence, where BERT-like models
   spend their time in MatMul as they do in deployment);
3. axis 0 of an input of rank >= 2 (a symbol: only ever there) is 1, the batch in practice;
4. the spatial axes of an image (rank 4, channels static 1 or 3 at axis 1 (NCHW) or else
   at axis 3 (NHWC)) are `IMAGE_DIM` (224, the classifiers' size) when both are dynamic;
   when the other one is static, a multiple of 32 near it (a square), or, for a width
   next to a static height of at most `TEXT_LINE_MAX_HEIGHT`, a text line of that height
   `TEXT_LINE_ASPECT` times as wide (PP-OCR's recognizer, `?x3x48x?`: 48x320, its size);
5. every other dynamic dimension is `DEFAULT_DIM` (32): big enough to exercise real
   kernels, small enough that checks stay fast.

At 32x32 instead of its real 48x320 a text recognizer ran in 2 ms instead of 10 ms, and
what was measured there said little about the model. `input_shapes` records which dims
were given and which defaulted (the report and the CLI show it).

One symbol gets one value across all inputs, so `input_ids[batch, seq]` and
`attention_mask[batch, seq]` always agree. A dim_param of `?` (paddle2onnx writes
`x: float[-1,3,?,?]`) or an empty one names no symbol: such dims are independent, each
taken from its input's own given shape or defaulted like a dim without a name.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import onnx

from taso.errors import BackendError, UsageError
from taso.ir import is_anonymous_dim
from taso.report import DimSource, DynamicDim, InputShape

DEFAULT_DIM = 32
BATCH_DIM = 1
SEQUENCE_DIM = 128
IMAGE_DIM = 224
IMAGE_CHANNELS = (1, 3)
TEXT_LINE_MAX_HEIGHT = 64
TEXT_LINE_ASPECT = 320 / 48
SPATIAL_MULTIPLE = 32
"""Spatial defaults are multiples of this: the strides of detection and OCR backbones."""
_BATCH_NAME = re.compile(r"batch|^(n|b|bs|bsz)$", re.IGNORECASE)
_SEQUENCE_NAME = re.compile(r"seq|len|token", re.IGNORECASE)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ShapeProfile:
    """Per-input shapes and per-symbol values, stored as sorted tuples (hashable)."""

    shapes: tuple[tuple[str, Shape], ...] = ()
    dims: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(
        cls,
        *,
        shapes: Mapping[str, Iterable[int]] | None = None,
        dims: Mapping[str, int] | None = None,
    ) -> ShapeProfile:
        """Build a profile from plain mappings."""
        shape_items = {name: tuple(int(d) for d in shape) for name, shape in (shapes or {}).items()}
        for name, shape in shape_items.items():
            _check_sizes(name, shape)
        dim_items = {name: int(value) for name, value in (dims or {}).items()}
        for name, value in dim_items.items():
            _check_sizes(name, (value,))
        return cls(tuple(sorted(shape_items.items())), tuple(sorted(dim_items.items())))

    @classmethod
    def parse(cls, spec: str | Iterable[str]) -> ShapeProfile:
        """Parse `name=1x3x224x224` (an input's shape) and `name=4` (a symbol's value).

        `name:1,3,224,224` and `name:1x3x224x224` (the syntax of other tools) are aliases
        of `name=1x3x224x224`. `spec` is one string with comma-separated items or an
        iterable of items; the commas of a `name:1,3,...` item belong to its shape.
        """
        pieces = spec.split(",") if isinstance(spec, str) else [p for item in spec for p in item.split(",")]
        shapes: dict[str, Shape] = {}
        dims: dict[str, int] = {}
        for item in _items(pieces):
            _parse_item(item, shapes, dims)
        return cls.of(shapes=shapes, dims=dims)

    def shape_of(self, name: str) -> Shape | None:
        return dict(self.shapes).get(name)

    def dim_of(self, name: str) -> int | None:
        return dict(self.dims).get(name)

    def __str__(self) -> str:
        parts = [f"{name}={'x'.join(map(str, shape))}" for name, shape in self.shapes]
        parts += [f"{name}={value}" for name, value in self.dims]
        return ",".join(parts)


ACCEPTED_FORMS = "NAME=1x3x224x224, NAME:1,3,224,224 or NAME=4 (a dimension's value)"


def _items(pieces: Iterable[str]) -> list[str]:
    """Comma-separated pieces grouped into items: a bare size after `name:` continues its shape."""
    items: list[str] = []
    for piece in (p.strip() for p in pieces):
        if not piece:
            continue
        continues = items and "=" not in items[-1] and ":" in items[-1] and piece.isdigit()
        if continues:
            items[-1] += "," + piece
        else:
            items.append(piece)
    return items


def _parse_item(item: str, shapes: dict[str, Shape], dims: dict[str, int]) -> None:
    """One `name=...` or `name:...` item; `=` wins, so `input:0=1x3` names `input:0`."""
    separator = "=" if "=" in item else ":"
    name, found, value = (part.strip() for part in item.rpartition(separator))
    if not found or not name:
        raise UsageError(f"bad shape item {item!r}: expected {ACCEPTED_FORMS}")
    parts = value.lower().replace(",", "x").split("x")
    try:
        sizes = tuple(int(part) for part in parts)
    except ValueError:
        raise UsageError(f"bad shape item {item!r}: sizes must be integers, as in {ACCEPTED_FORMS}") from None
    if len(sizes) > 1:
        shapes[name] = sizes
    else:
        dims[name] = sizes[0]


def _check_sizes(name: str, sizes: Shape) -> None:
    if any(size < 0 for size in sizes):
        raise UsageError(f"shape profile entry {name!r} has a negative size: {sizes}")


@dataclass(frozen=True)
class _Dim:
    """One axis of a declared input shape: a fixed size, a symbol, or unknown."""

    size: int | None
    symbol: str | None


class InputKind(enum.Enum):
    """How a graph input wraps its tensor: fed as an array, a list of arrays, or an array."""

    TENSOR = "tensor"
    SEQUENCE = "sequence"  # seq(tensor): fed as a list of tensors of the element's shape
    OPTIONAL = "optional"  # optional(tensor): fed present


def tensor_type(value: onnx.ValueInfoProto) -> tuple[InputKind, onnx.TypeProto.Tensor]:
    """The tensor an input holds and how it wraps it; BackendError for maps and nesting
    (no feeds can be made for them, so a model reading one is not run)."""
    type_proto, kind = value.type, InputKind.TENSOR
    outer = type_proto.WhichOneof("value")
    if outer in ("sequence_type", "optional_type"):
        kind = InputKind.SEQUENCE if outer == "sequence_type" else InputKind.OPTIONAL
        type_proto = getattr(type_proto, outer).elem_type
    inner = type_proto.WhichOneof("value")
    if inner not in ("tensor_type", "sparse_tensor_type"):
        raise BackendError(f"input {value.name!r} is a {outer}; no inputs can be generated for it")
    return kind, getattr(type_proto, inner)


def _declared_dims(value: onnx.ValueInfoProto) -> list[_Dim] | None:
    """The declared dims of a tensor input (or of a sequence's element), or None when its rank is unknown."""
    tensor = tensor_type(value)[1]
    if not tensor.HasField("shape"):
        return None
    return [_dim_of(d) for d in tensor.shape.dim]


def _dim_of(dim: onnx.TensorShapeProto.Dimension) -> _Dim:
    if dim.HasField("dim_value") and dim.dim_value >= 0:  # 0 is an empty axis, -1 a dynamic one
        return _Dim(dim.dim_value, None)
    param = dim.dim_param.strip()
    return _Dim(None, None if is_anonymous_dim(param) else param)


def real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (those are optional overrides)."""
    initializers = {tensor.name for tensor in graph.initializer}
    return [value for value in graph.input if value.name not in initializers]


def check_profile_names(model: onnx.ModelProto, profile: ShapeProfile | None) -> None:
    """UsageError for the first profile entry that names neither an input nor a dimension
    of `model`: said as soon as the model is loaded, before any search."""
    if profile is not None:
        _split_profile({value.name: _known_dims(value) for value in real_inputs(model.graph)}, profile)


def _known_dims(value: onnx.ValueInfoProto) -> list[_Dim] | None:
    try:
        return _declared_dims(value)
    except BackendError:  # a map input: no dims to name (what runs it says so)
        return None


def resolve_shapes(model: onnx.ModelProto, profile: ShapeProfile | None = None) -> dict[str, Shape]:
    """Concrete shapes for every real input of `model` under `profile` and the defaults."""
    return _resolve(model, profile).shapes


def input_shapes(model: onnx.ModelProto, profile: ShapeProfile | None = None) -> tuple[InputShape, ...]:
    """The shape every real input is run at, with each dynamic dim's size and whether it
    was given or defaulted; empty when the shapes cannot be resolved (what runs the model
    says why)."""
    try:
        resolution = _resolve(model, profile)
    except (UsageError, BackendError):
        return ()
    return tuple(resolution.record(name) for name in resolution.shapes)


@dataclass(frozen=True)
class _Resolution:
    declared: Mapping[str, list[_Dim] | None]
    explicit: Mapping[str, Shape]
    given_symbols: frozenset[str]
    shapes: Mapping[str, Shape]

    def record(self, name: str) -> InputShape:
        shape, dims = self.shapes[name], self.declared[name]
        dynamic = []
        for axis, size in enumerate(shape):
            dim = None if dims is None else dims[axis]
            if dim is not None and dim.size is not None:
                continue
            symbol = None if dim is None else dim.symbol
            given = name in self.explicit or symbol in self.given_symbols
            label = symbol or f"{name}[{axis}]"
            dynamic.append(DynamicDim(label, size, DimSource.GIVEN if given else DimSource.DEFAULT))
        return InputShape(name, shape, tuple(dynamic))


def _resolve(model: onnx.ModelProto, profile: ShapeProfile | None) -> _Resolution:
    inputs = {value.name: _declared_dims(value) for value in real_inputs(model.graph)}
    explicit, symbols = _split_profile(inputs, profile or ShapeProfile())
    for name, shape in explicit.items():
        dims = inputs[name]
        if dims is not None:
            _bind_from_shape(name, dims, shape, symbols)
    given = frozenset(symbols)
    _default_symbols(inputs, symbols)
    shapes: dict[str, Shape] = {}
    for name, dims in inputs.items():
        if name in explicit:
            shapes[name] = explicit[name]
        elif dims is None:
            raise UsageError(f"input {name!r} has unknown rank; give its shape ({name}=1x3x...)")
        else:
            shapes[name] = tuple(_fill(axis, dims, symbols) for axis in range(len(dims)))
    return _Resolution(inputs, explicit, given, shapes)


def _split_profile(
    inputs: Mapping[str, list[_Dim] | None], profile: ShapeProfile
) -> tuple[dict[str, Shape], dict[str, int]]:
    """Explicit input shapes and symbol values; `name=N` for a rank-1 input is its shape."""
    symbols_in_model = {d.symbol for dims in inputs.values() for d in dims or () if d.symbol}
    explicit = dict(profile.shapes)
    symbols: dict[str, int] = {}
    for name, value in profile.dims:
        if name in symbols_in_model:
            symbols[name] = value
        elif name in inputs:
            explicit[name] = (value,)
        else:
            raise UsageError(f"shape profile names {name!r}: neither a dimension nor an input")
    for name in explicit:
        if name not in inputs:
            known = ", ".join(list(inputs)[:8]) + (", ..." if len(inputs) > 8 else "")
            raise UsageError(f"shape profile names {name!r}, which is not a model input (its inputs: {known})")
    return explicit, symbols


def _bind_from_shape(name: str, dims: list[_Dim], explicit: Shape, symbols: dict[str, int]) -> None:
    if len(dims) != len(explicit):
        raise UsageError(f"input {name!r} has rank {len(dims)}, the profile gives {explicit}")
    for dim, size in zip(dims, explicit, strict=True):
        if dim.size is not None and dim.size != size:
            raise UsageError(
                f"input {name!r} has fixed shape {_show(dims)}, profile gives {explicit}"
            )
        if dim.symbol is not None and symbols.setdefault(dim.symbol, size) != size:
            raise UsageError(f"dimension {dim.symbol!r} gets two values from the profile")


def _default_symbols(inputs: Mapping[str, list[_Dim] | None], symbols: dict[str, int]) -> None:
    """Each symbol the profile left open gets its default: by its name, else by where it
    first appears (see the module docstring)."""
    leading_only: dict[str, bool] = {}
    first_seen: dict[str, tuple[list[_Dim], int]] = {}
    for dims in inputs.values():
        for axis, dim in enumerate(dims or ()):
            if dim.symbol is not None:
                leading = axis == 0 and len(dims or ()) >= 2
                leading_only[dim.symbol] = leading_only.get(dim.symbol, True) and leading
                first_seen.setdefault(dim.symbol, (dims or [], axis))
    for symbol, leading in leading_only.items():
        if symbol not in symbols:
            symbols[symbol] = _symbol_default(symbol, leading, *first_seen[symbol])


def _symbol_default(symbol: str, leading_only: bool, dims: list[_Dim], axis: int) -> int:
    if _BATCH_NAME.search(symbol):
        return BATCH_DIM
    if _SEQUENCE_NAME.search(symbol):
        return SEQUENCE_DIM
    if leading_only:
        return BATCH_DIM
    return _positional_default(dims, axis)


def _positional_default(dims: list[_Dim], axis: int) -> int:
    """The default of a dynamic dim from where it sits: the batch, an image's side, or 32."""
    if axis == 0 and len(dims) >= 2:
        return BATCH_DIM
    spatial = _spatial_axes(dims)
    if axis not in spatial:
        return DEFAULT_DIM
    other = dims[spatial[1] if axis == spatial[0] else spatial[0]].size
    if other is None:
        return IMAGE_DIM
    if axis == spatial[1] and other <= TEXT_LINE_MAX_HEIGHT:  # a text line's width
        return _spatial_multiple(other * TEXT_LINE_ASPECT)
    return _spatial_multiple(other)


def _spatial_axes(dims: list[_Dim]) -> tuple[int, ...]:
    """(height, width) axes of an image input, NCHW or NHWC; () for anything else."""
    if len(dims) != 4:
        return ()
    if dims[1].size in IMAGE_CHANNELS:
        return (2, 3)
    if dims[3].size in IMAGE_CHANNELS:
        return (1, 2)
    return ()


def _spatial_multiple(size: float) -> int:
    return max(SPATIAL_MULTIPLE, round(size / SPATIAL_MULTIPLE) * SPATIAL_MULTIPLE)


def _fill(axis: int, dims: list[_Dim], symbols: Mapping[str, int]) -> int:
    dim = dims[axis]
    if dim.size is not None:
        return dim.size
    if dim.symbol is not None:
        return symbols[dim.symbol]
    return _positional_default(dims, axis)


def _show(dims: list[_Dim]) -> str:
    return "[" + ", ".join(str(d.size or d.symbol or "?") for d in dims) + "]"
