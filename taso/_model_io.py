"""Reading models with clear errors, checking them, and writing them atomically.

`load_model` turns every way a file can be wrong into one typed `InputError` with a
one-line message, and refuses external data outside the model's folder
(`taso._containment`). `save_model_atomic` writes to temporary files in the destination
folder and renames them into place, so a crash or Ctrl-C never leaves a half-written
model; external data is streamed tensor by tensor into a data file of the output's own.
Files are created with the user's umask; a temporary file left by a killed run (its
process gone) is removed by the next write to the same output.
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import onnx
from google.protobuf.message import DecodeError

from taso._containment import (
    all_tensors,
    check_external_data,
    external_tensors,
    refuse_protected,
    resolve_external,
)
from taso._onnx_export import copy_field
from taso._proto_size import model_byte_bound, tensor_byte_bound
from taso.errors import InvalidModelError, UnsupportedModelError, UsageError, first_line

_PROTO_LIMIT = 2**31 - 1
_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class LoadedModel:
    """A model as read: the proto (external data not loaded), its file, and its folder.

    `protected` holds the real paths of every file the input references (the model file
    and its external data files): nothing this project writes may replace one of them.
    """

    model: onnx.ModelProto
    path: Path | None
    base_dir: str
    protected: frozenset[Path] = frozenset()


def load_model(
    source: str | os.PathLike[str] | onnx.ModelProto, *, base_dir: str | os.PathLike[str] | None = None
) -> LoadedModel:
    """Read and sanity-check a model; raise InvalidModelError/UnsupportedModelError on bad input.

    A path's external data is resolved against its own folder; a ModelProto's only
    against `base_dir`, which must be given when it has external data.
    """
    if isinstance(source, onnx.ModelProto):
        model, path = source, None
        folder = None if base_dir is None else _existing_folder(base_dir)
    elif isinstance(source, str | os.PathLike):
        if base_dir is not None:
            raise UsageError("base_dir is for a ModelProto; a model file's data is read from its own folder")
        path = Path(source)
        model = _read(path)
        folder = path.parent
    else:
        raise UsageError(f"expected a path or an onnx.ModelProto, got {type(source).__name__}")
    _check_versions(model)
    data_files = check_external_data(model, folder)
    own = {Path(os.path.realpath(path))} if path is not None else set()
    return LoadedModel(model=model, path=path, base_dir="" if folder is None else str(folder),
                       protected=frozenset(own | data_files))


def _existing_folder(base_dir: str | os.PathLike[str]) -> Path:
    folder = Path(base_dir)
    if not folder.is_dir():
        raise UsageError(f"base_dir {folder} is not a folder")
    return folder


def _read(path: Path) -> onnx.ModelProto:
    if not path.exists():
        raise InvalidModelError(f"{path}: no such file")
    if not path.is_file():
        raise InvalidModelError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise InvalidModelError(f"{path}: the file is empty")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidModelError(f"{path}: not an ONNX model (protobuf parse failed: {first_line(exc)})") from None
    if model.ir_version == 0 or not model.HasField("graph"):
        raise InvalidModelError(f"{path}: not an ONNX model (no IR version or no graph)")
    return model


def _check_versions(model: onnx.ModelProto) -> None:
    if model.ir_version > onnx.IR_VERSION:
        raise UnsupportedModelError(
            f"IR version {model.ir_version} is newer than this onnx supports ({onnx.IR_VERSION})"
        )
    newest = onnx.defs.onnx_opset_version()
    for opset in model.opset_import:
        if opset.domain in _DEFAULT_DOMAINS and opset.version > newest:
            raise UnsupportedModelError(f"opset {opset.version} is newer than this onnx supports ({newest})")


def check_model(model: onnx.ModelProto, *, path: Path | None = None) -> None:
    """onnx.checker full check of an input; by path when it has one.

    The checker reads a file itself (0.3 s on BERT-base), while a proto must be serialized
    first (4 s). A model with external data is checked as `_with_weights_as_inputs`: the
    checker would look for a proto's data files relative to the working directory, and
    its strict inference cannot read a shape tensor from a data file.
    """
    if model.graph.sparse_initializer or has_external_data(model):
        # onnx's inference types sparse initializers sparse (no standard op takes them; ORT
        # densifies them), and by path it cannot read a shape tensor stored externally
        # (BERT's Reshape shapes): the data files were checked by the loader (containment)
        check_exported(model)
    elif path is not None:
        _checked(lambda: onnx.checker.check_model(str(path), full_check=True))
    else:
        _checked(lambda: onnx.checker.check_model(model, full_check=True))


def check_exported(model: onnx.ModelProto) -> None:
    """Full check of a model this project exported, as `_with_weights_as_inputs`.

    Its large weights are NumPy arrays written by the exporter (or the input's own, checked
    with the input), so only their types and shapes need checking; nodes, small
    initializers, types and opsets get the same full check and strict shape inference.
    """
    _checked(lambda: onnx.checker.check_model(_with_weights_as_inputs(model), full_check=True))


def _checked(check: Callable[[], None]) -> None:
    try:
        check()
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError) as exc:
        raise InvalidModelError(f"the model fails the ONNX checker: {first_line(exc)}") from None


def _with_weights_as_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its external, large and sparse initializers declared as graph inputs instead.

    Nodes, small initializers (shapes, axes: what shape inference reads), types and opsets
    are kept, so the full check and strict shape inference see the same graph; external
    files are not read (they were checked with the input) and large arrays are not copied.
    """
    twin = onnx.ModelProto()
    for descriptor, value in model.ListFields():
        if descriptor.name != "graph":
            copy_field(twin, descriptor, value)
    for descriptor, value in model.graph.ListFields():
        if descriptor.name not in ("initializer", "sparse_initializer"):
            copy_field(twin.graph, descriptor, value)
    declared = {value.name for value in model.graph.input}
    for sparse in model.graph.sparse_initializer:  # ORT densifies them when it loads the model
        if sparse.values.name not in declared:
            twin.graph.input.append(
                onnx.helper.make_tensor_value_info(sparse.values.name, sparse.values.data_type, sparse.dims)
            )
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL and tensor_byte_bound(tensor) < _INLINE_CHECK_BYTES:
            twin.graph.initializer.append(tensor)
        elif tensor.name not in declared:
            twin.graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))
    return twin


_INLINE_CHECK_BYTES = 1 << 20


def has_external_data(model: onnx.ModelProto) -> bool:
    return bool(external_tensors(model))


def check_output_path(
    output: str | os.PathLike[str], *, input_path: Path | None, protected: frozenset[Path] = frozenset(),
    what: str = "output",
) -> Path:
    """Refuse output paths that cannot be written or that would overwrite the input.

    For the model's output, its data file `<output>.data` must not be a protected file
    either (the input's own weights named so would be replaced).
    """
    out = Path(output)
    if input_path is not None and out.resolve() == input_path.resolve():
        raise UsageError(f"{out}: the {what} path is the input file; the input is never overwritten")
    refuse_protected(out, protected, what=what)
    if what == "output":
        refuse_protected(data_file_of(out), protected, what="output's data file")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{out}: the output folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{out}: the output folder {folder} is not writable")
    if out.is_dir():
        raise UsageError(f"{out}: the output path is a folder")
    return out


def data_file_of(output: Path) -> Path:
    """Where the external data of a model written to `output` goes."""
    return output.with_name(output.name + ".data")


def save_model_atomic(model: onnx.ModelProto, output: Path, *, base_dir: str = "") -> None:
    """Write `model` to `output` via temp files + rename; stream external data to `<output>.data`."""
    data_name = data_file_of(output).name
    needs_external = has_external_data(model) or model_byte_bound(model) > _PROTO_LIMIT
    with _temp_file(output.parent, output.name) as tmp_model:
        if needs_external:
            with _temp_file(output.parent, data_name) as tmp_data:
                _externalize(model, tmp_data, data_name, base_dir)
                _write_proto(model, tmp_model)
                os.replace(tmp_data, output.parent / data_name)
        else:
            _write_proto(model, tmp_model)
        os.replace(tmp_model, output)


def _write_proto(model: onnx.ModelProto, path: Path) -> None:
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
        f.flush()
        os.fsync(f.fileno())


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file (a report) atomically, with the user's umask."""
    with _temp_file(path.parent, path.name) as tmp:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


_TEMP_SUFFIX = ".tmp"


@contextmanager
def _temp_file(folder: Path, name: str) -> Iterator[Path]:
    """A fresh file `.<name>.<pid>.<random>.tmp` in `folder`, mode 0666 less the umask.

    The pid in its name lets a later write remove what a killed process left behind.
    """
    folder = folder if str(folder) else Path(".")
    _remove_orphans(folder, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=_TEMP_SUFFIX, dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_orphans(folder: Path, name: str) -> None:
    """Remove temp files for `name` whose writing process no longer exists."""
    prefix = f".{name}."
    for entry in folder.glob(f"{glob.escape(prefix)}*{_TEMP_SUFFIX}"):
        pid = entry.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)) and entry.is_file() and not entry.is_symlink():
            with contextlib.suppress(OSError):
                entry.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


_EXTERNAL_MIN_BYTES = 1024


def _externalize(model: onnx.ModelProto, data_path: Path, data_name: str, base_dir: str) -> None:
    """Move every large or already-external tensor into one data file, one chunk at a time."""
    with open(data_path, "wb") as sink:
        for tensor in all_tensors(model):
            offset = sink.tell()
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                _copy_external(tensor, base_dir, sink)
            elif tensor.HasField("raw_data") and len(tensor.raw_data) >= _EXTERNAL_MIN_BYTES:
                sink.write(tensor.raw_data)
                tensor.ClearField("raw_data")
            else:
                continue
            _set_external(tensor, data_name, offset, sink.tell() - offset)
        sink.flush()
        os.fsync(sink.fileno())


_CHUNK = 64 << 20


def _copy_external(tensor: onnx.TensorProto, base_dir: str, sink: BinaryIO) -> None:
    info = {e.key: e.value for e in tensor.external_data}
    source = resolve_external(info.get("location", ""), base_dir or ".", tensor=tensor.name)
    remaining = int(info["length"]) if "length" in info else None
    with open(source, "rb") as f:
        f.seek(int(info.get("offset", 0)))
        while remaining is None or remaining > 0:
            chunk = f.read(_CHUNK if remaining is None else min(_CHUNK, remaining))
            if not chunk:
                break
            sink.write(chunk)
            if remaining is not None:
                remaining -= len(chunk)


def _set_external(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    tensor.data_location = onnx.TensorProto.EXTERNAL
