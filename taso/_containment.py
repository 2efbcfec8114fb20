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
    files: set[Path] = set()
    for tensor in external_tensors(model):
        location = external_location(tensor)
        if base_dir is None:
            raise UsageError(
                f"tensor {tensor.name!r} has external data ({location!r}) but the model was given "
                "as a ModelProto without base_dir: pass base_dir=<the folder of its data files>"
            )
        files.add(resolve_external(location, base_dir, tensor=tensor.name))
    return frozenset(files)


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
