"""Where corpus models live, and the manifest that says how each one was made.

Layout: `<cache>/<entry name>/model.onnx` (plus any external-data file the converter
wrote beside it) and `<cache>/<entry name>/manifest.json`. A model is rebuilt only when
the converter versions recorded in its manifest differ from the installed ones.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import platformdirs

ENV_VAR = "TASO_CORPUS_DIR"
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "manifest.json"


def default_cache_dir() -> Path:
    """`$TASO_CORPUS_DIR`, else the user cache folder of taso-onnx plus `corpus`."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return Path(configured)
    return Path(platformdirs.user_cache_dir("taso-onnx")) / "corpus"


@dataclass(frozen=True)
class Manifest:
    """How one cached model was made; written next to it as JSON. `weights` says how its
    random weights were made (empty in manifests written before it was recorded);
    `input_ranges` gives each integer input the range [low, high) its values are drawn
    from (token ids, masks; every other input is float, standard normal)."""

    name: str
    converter: str
    versions: dict[str, str]
    opset: dict[str, int]
    ir_version: int
    ir_version_written: int
    input_shapes: dict[str, list[int]]
    source: str
    build_seconds: float
    weights: str = ""
    input_ranges: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ir_lowered(self) -> bool:
        return self.ir_version != self.ir_version_written

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        return cls(**json.loads(text))


def entry_dir(cache: Path, name: str) -> Path:
    return cache / name


def model_path(cache: Path, name: str) -> Path:
    return entry_dir(cache, name) / MODEL_FILE


def read_manifest(cache: Path, name: str) -> Manifest | None:
    """The manifest of a cached entry, or None when the entry is absent or incomplete."""
    path = entry_dir(cache, name) / MANIFEST_FILE
    if not path.is_file() or not model_path(cache, name).is_file():
        return None
    try:
        return Manifest.from_json(path.read_text())
    except (ValueError, TypeError):
        return None


def cached_entries(cache: Path) -> list[tuple[Manifest, Path]]:
    """Every complete entry in `cache` with its model path, sorted by name."""
    if not cache.is_dir():
        return []
    found = []
    for folder in sorted(p for p in cache.iterdir() if p.is_dir()):
        manifest = read_manifest(cache, folder.name)
        if manifest is not None:
            found.append((manifest, model_path(cache, folder.name)))
    return found


@contextmanager
def staging(cache: Path, name: str) -> Iterator[Path]:
    """A fresh folder to build `name` in; it replaces the cached entry only on success."""
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=cache))
    work.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any other
    try:
        yield work
        final = entry_dir(cache, name)
        if final.exists():
            shutil.rmtree(final)
        work.rename(final)
    finally:
        if work.exists():
            shutil.rmtree(work)


def write_manifest(folder: Path, manifest: Manifest) -> None:
    (folder / MANIFEST_FILE).write_text(manifest.to_json() + "\n")
