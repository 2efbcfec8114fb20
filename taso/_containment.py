"""What a model may read and what a run may write: every path decided in one place.

A model's external data (`TensorProto.external_data["location"]`) is resolved against
the model's own folder only: a location that is absolute, climbs out with `..`, or
reaches outside through a symlink is refused with `InvalidModelError`, whatever the
budget and wherever the model came from (a path, or a ModelProto with an explicit
`base_dir`). Every tensor is examined, wherever it lives: initializers, sparse
initializers, tensor attributes, subgraphs, functions and training info.

The files a model references (itself and its data files) are *protected*: nothing this
project writes (the output, its data file, the report) may be one of them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import onnx
from google.protobuf.message import Message

from taso.errors import InvalidModelError, UsageError


def all_tensors(message: Message) -> Iterator[onnx.TensorProto]:
    """Every TensorProto anywhere inside `message` (a model, graph, node, function...)."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        items = value if descriptor.is_repeated else (value,)
        for item in items:
            if isinstance(item, onnx.TensorProto):
                yield item
            else:
                yield from all_tensors(item)


def external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """The tensors of `model` whose data lives in external files."""
    return [t for t in all_tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]


def external_location(tensor: onnx.TensorProto) -> str:
    for entry in tensor.external_data:
        if entry.key == "location":
            return entry.value
    return ""


def resolve_external(location: str, base_dir: str | os.PathLike[str], *, tensor: str = "") -> Path:
    """The real path of an external-data `location`, which must lie inside `base_dir`."""
    where = f"tensor {tensor!r}: external data location {location!r}"
    if not location:
        raise InvalidModelError(f"{where}: empty")
    if "\0" in location or _is_absolute(location):
        raise InvalidModelError(f"{where} is absolute; it must be relative to the model's folder")
    if ".." in _parts(location):
        raise InvalidModelError(f"{where} climbs out of the model's folder ('..')")
    folder = Path(os.path.realpath(base_dir))
    resolved = Path(os.path.realpath(folder / location))
    if not resolved.is_relative_to(folder):
        raise InvalidModelError(f"{where} leads outside the model's folder (through a link)")
    if not resolved.is_file():
        raise InvalidModelError(f"{where}: no such file in the model's folder")
    return resolved


def _is_absolute(location: str) -> bool:
    return PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute() or (
        PureWindowsPath(location).drive != ""
    )


def _parts(location: str) -> tuple[str, ...]:
    return PureWindowsPath(location).parts + PurePosixPath(location).parts


def check_external_data(model: onnx.ModelProto, base_dir: str | os.PathLike[str] | None) -> frozenset[Path]:
    """Refuse external data that leaves `base_dir`; return the data files' real paths.

    `base_dir` None means the model has no folder (a ModelProto given without one): then
    any external data is refused, since resolving it against the working directory would
    read files the caller never named.
    """
    sizes: dict[str, tuple[Path, int]] = {}  # location -> (real path, bytes): one lookup per file
    for tensor in external_tensors(model):
        location = external_location(tensor)
        if base_dir is None:
            raise UsageError(
                f"tensor {tensor.name!r} has external data ({location!r}) but the model was given "
                "as a ModelProto without base_dir: pass base_dir=<the folder of its data files>"
            )
        if location not in sizes:
            data_file = resolve_external(location, base_dir, tensor=tensor.name)
            sizes[location] = data_file, data_file.stat().st_size
        _check_extent(tensor, *sizes[location])
    return frozenset(path for path, _ in sizes.values())


def _check_extent(tensor: onnx.TensorProto, data_file: Path, size: int) -> None:
    """The tensor's bytes lie inside its data file, and are as many as its type needs."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    where = f"tensor {tensor.name!r}: external data in {data_file.name}"
    try:
        offset, length = int(info.get("offset", 0)), int(info["length"]) if "length" in info else None
    except ValueError:
        raise InvalidModelError(f"{where}: offset or length is not an integer") from None
    end = size if length is None else offset + length
    if offset < 0 or (length is not None and length < 0) or end > size:
        raise InvalidModelError(f"{where}: bytes {offset}..{end} lie outside the file ({size} bytes)")
    itemsize = _ITEM_BYTES.get(tensor.data_type)
    if itemsize is not None and end - offset != itemsize * math.prod(tensor.dims):
        raise InvalidModelError(
            f"{where}: {end - offset} bytes for a tensor of {math.prod(tensor.dims)} elements of {itemsize} bytes"
        )


_ITEM_BYTES = {
    onnx.TensorProto.FLOAT: 4, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.FLOAT16: 2, onnx.TensorProto.BFLOAT16: 2,
    onnx.TensorProto.INT8: 1, onnx.TensorProto.UINT8: 1, onnx.TensorProto.INT16: 2, onnx.TensorProto.UINT16: 2,
    onnx.TensorProto.INT32: 4, onnx.TensorProto.UINT32: 4, onnx.TensorProto.INT64: 8, onnx.TensorProto.UINT64: 8,
    onnx.TensorProto.BOOL: 1,
}


def refuse_protected(path: Path, protected: Iterable[Path], *, what: str) -> None:
    """Refuse to write `path` when it is (or links to) a file the input references."""
    real = Path(os.path.realpath(path))
    for kept in protected:
        if real == kept or _same_file(path, kept):
            raise UsageError(f"{path}: the {what} would replace {kept.name}, which the input model references")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
