"""Concrete shapes for a model's inputs: `ShapeProfile` and its resolution against a graph.

A profile gives per-input shapes (`images=1x3x640x640`) and/or values of symbolic
dimensions (`batch=4`, `seq=128`). Dimensions the profile leaves open get defaults:

* a symbolic dimension whose name looks like a batch (`batch`, `batch_size`, `N`, `B`,
  `bs`, ...), or that only ever appears as axis 0 of inputs of rank >= 2, is 1;
* an unnamed dynamic axis 0 of an input of rank >= 2 is 1 (the batch in practice);
* every other dynamic dimension is `DEFAULT_DIM` (32): big enough to exercise real
  kernels (sequence lengths, spatial sizes), small enough that checks stay fast.

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

DEFAULT_DIM = 32
BATCH_DIM = 1
_BATCH_NAME = re.compile(r"batch|^(n|b|bs|bsz)$", re.IGNORECASE)

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
    inputs = {value.name: _declared_dims(value) for value in real_inputs(model.graph)}
    explicit, symbols = _split_profile(inputs, profile or ShapeProfile())
    for name, shape in explicit.items():
        dims = inputs[name]
        if dims is not None:
            _bind_from_shape(name, dims, shape, symbols)
    _default_symbols(inputs, symbols)
    shapes: dict[str, Shape] = {}
    for name, dims in inputs.items():
        if name in explicit:
            shapes[name] = explicit[name]
        elif dims is None:
            raise UsageError(f"input {name!r} has unknown rank; give its shape ({name}=1x3x...)")
        else:
            shapes[name] = tuple(
                _fill(axis, dim, len(dims), symbols) for axis, dim in enumerate(dims)
            )
    return shapes


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
    leading_only: dict[str, bool] = {}
    for dims in inputs.values():
        for axis, dim in enumerate(dims or ()):
            if dim.symbol is not None:
                leading = axis == 0 and len(dims or ()) >= 2
                leading_only[dim.symbol] = leading_only.get(dim.symbol, True) and leading
    for symbol, leading in leading_only.items():
        if symbol not in symbols:
            batch_like = leading or _BATCH_NAME.search(symbol) is not None
            symbols[symbol] = BATCH_DIM if batch_like else DEFAULT_DIM


def _fill(axis: int, dim: _Dim, rank: int, symbols: Mapping[str, int]) -> int:
    if dim.size is not None:
        return dim.size
    if dim.symbol is not None:
        return symbols[dim.symbol]
    return BATCH_DIM if axis == 0 and rank >= 2 else DEFAULT_DIM


def _show(dims: list[_Dim]) -> str:
    return "[" + ", ".join(str(d.size or d.symbol or "?") for d in dims) + "]"
