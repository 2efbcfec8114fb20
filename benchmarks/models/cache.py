"""Building benchmark models on demand into a cache folder, written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchmarks.models._types import Size
from benchmarks.models.registry import MODELS

DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[1] / ".cache"


def cache_path(name: str, size: Size, cache_dir: Path | None = None) -> Path:
    """Where `name` at `size` lives: keyed by name, size and the builder's version."""
    builder = MODELS[name]
    folder = DEFAULT_CACHE_DIR if cache_dir is None else cache_dir
    return folder / f"{name}-{size.value}-v{builder.version}.onnx"


def build_cached(name: str, size: Size, cache_dir: Path | None = None) -> Path:
    """The path of the built model, building it first if the cache lacks it.

    The model is written to a temporary file in the same folder and renamed
    into place, so a concurrent reader never sees a partial file.
    """
    if name not in MODELS:
        raise KeyError(f"unknown benchmark model {name!r}; known: {sorted(MODELS)}")
    path = cache_path(name, size, cache_dir)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    data = MODELS[name].build(size).SerializeToString()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".onnx.tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
