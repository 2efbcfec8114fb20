"""Build corpus entries into the cache: skip, reuse or convert, then record the manifest.

For each entry:
1. its converter packages must be importable, else it is skipped with a one-line reason;
2. a cached model whose manifest records the installed converter versions and the
   family's way of making weights (`FamilyInfo.weights`) is reused;
3. otherwise the family's builder (`_torch`, `_paddle`, `_tf`, `_quant`) writes
   `model.onnx` into a staging folder, exactly as the converter produced it;
4. if ONNX Runtime refuses the IR version the converter wrote, only `ir_version` is
   lowered, to the highest one ORT loads (the manifest keeps both numbers);
5. the manifest (versions, weights, opset and IR written, shapes and integer ranges,
   build time) is written and the staging folder replaces the cached entry.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import importlib.metadata
import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnxruntime as ort
from packaging.requirements import Requirement  # onnxruntime depends on packaging

from benchmarks.corpus import _cache
from benchmarks.corpus._held_out import HELD_OUT_BY_NAME
from benchmarks.corpus._registry import BY_NAME, FAMILIES, Entry

# Distributions published under more than one name; the first installed one is recorded.
_ALIASES: dict[str, tuple[str, ...]] = {"tensorflow-cpu": ("tensorflow-cpu", "tensorflow")}


class Outcome(enum.Enum):
    BUILT = "built"
    CACHED = "cached"
    SKIPPED = "skipped"
    FAILED = "FAILED"


@dataclass(frozen=True)
class BuildResult:
    name: str
    outcome: Outcome
    detail: str


def _installed_version(distribution: str) -> str | None:
    for name in _ALIASES.get(distribution, (distribution,)):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _missing(entry: Entry) -> list[str]:
    names = (*FAMILIES[entry.family].importable, *entry.requires)
    return [name for name in names if importlib.util.find_spec(name) is None]


def _unmet_pin(entry: Entry) -> str | None:
    """Why the installed versions miss a pin of the entry's family, or None."""
    for pin in FAMILIES[entry.family].pins:
        requirement = Requirement(pin)
        version = _installed_version(requirement.name)
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            return f"needs {pin}, {requirement.name} {version} is installed"
    return None


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _versions(entry: Entry, cache: Path) -> dict[str, str] | str:
    """Installed versions that determine the model, or why the entry cannot be built."""
    missing = _missing(entry)
    if missing:
        return f"{', '.join(missing)} not installed (see benchmarks/corpus/__init__.py)"
    unmet = _unmet_pin(entry)
    if unmet is not None:
        return unmet
    versions = {"onnx": onnx.__version__}
    for distribution in (*FAMILIES[entry.family].distributions, *entry.requires):
        versions[distribution] = _installed_version(distribution) or "unknown"
    if entry.derived_from is not None:
        source = _cache.model_path(cache, entry.derived_from)
        if _cache.read_manifest(cache, entry.derived_from) is None:
            return f"needs {entry.derived_from} built first"
        versions[f"source:{entry.derived_from}"] = _file_digest(source)
    return versions


def _ort_loads(path: Path) -> str | None:
    """None when ORT can create a session for the model, else its error message."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # ORT raises its own Fail / InvalidGraph / ... types
        return str(error)
    return None


def _fit_ir_version(path: Path) -> tuple[int, int]:
    """(IR version now, IR version written); lowers only `ir_version` if ORT refuses it."""
    model = onnx.load(str(path), load_external_data=False)
    written = model.ir_version
    error = _ort_loads(path)
    if error is None or "ir version" not in error.lower():
        return written, written
    for candidate in range(written - 1, 2, -1):
        model.ir_version = candidate
        onnx.save(model, str(path))
        if _ort_loads(path) is None:
            return candidate, written
    raise RuntimeError(f"ONNX Runtime loads no IR version of this model: {error}")


def _opsets(path: Path) -> dict[str, int]:
    model = onnx.load(str(path), load_external_data=False)
    return {(item.domain or "ai.onnx"): item.version for item in model.opset_import}


def _convert(entry: Entry, cache: Path, versions: dict[str, str]) -> BuildResult:
    builder = importlib.import_module(f"benchmarks.corpus.{FAMILIES[entry.family].module}")
    with _cache.staging(cache, entry.name) as folder:
        start = time.perf_counter()
        builder.export(entry, folder / _cache.MODEL_FILE, cache)
        seconds = time.perf_counter() - start
        ir_version, ir_written = _fit_ir_version(folder / _cache.MODEL_FILE)
        manifest = _cache.Manifest(
            name=entry.name,
            converter=entry.family.value,
            versions=versions,
            opset=_opsets(folder / _cache.MODEL_FILE),
            ir_version=ir_version,
            ir_version_written=ir_written,
            input_shapes={name: list(shape) for name, shape in entry.inputs},
            source=entry.source,
            build_seconds=round(seconds, 2),
            weights=FAMILIES[entry.family].weights,
            input_ranges={name: list(bounds) for name, bounds in entry.ranges},
        )
        _cache.write_manifest(folder, manifest)
    lowered = f", IR lowered {ir_written}->{ir_version}" if manifest.ir_lowered else ""
    return BuildResult(entry.name, Outcome.BUILT, f"opset {manifest.opset}{lowered}, {seconds:.1f}s")


def build_entry(entry: Entry, cache: Path) -> BuildResult:
    """Build one entry unless it is cached with the installed converter versions and
    weights made the family's current way."""
    versions = _versions(entry, cache)
    cached = _cache.read_manifest(cache, entry.name)
    if isinstance(versions, str):
        if cached is not None:
            return BuildResult(entry.name, Outcome.CACHED, f"kept as built ({versions})")
        return BuildResult(entry.name, Outcome.SKIPPED, versions)
    if cached is not None and cached.versions == versions:
        if cached.weights == FAMILIES[entry.family].weights:
            return BuildResult(entry.name, Outcome.CACHED, "same converter versions")
    try:
        return _convert(entry, cache, versions)
    except Exception as error:  # a converter's failure ends this entry, not the build
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        return BuildResult(entry.name, Outcome.FAILED, f"{type(error).__name__}: {first_line}")


def known_entries(*, held_out: bool) -> dict[str, Entry]:
    """The corpus's entries by name, or with `held_out` the held-out set's (`_held_out.py`)."""
    return HELD_OUT_BY_NAME if held_out else BY_NAME


def build(names: list[str], cache: Path, *, held_out: bool = False) -> list[BuildResult]:
    """Build the named entries of `known_entries` (all when `names` is empty), derived
    entries last."""
    known = known_entries(held_out=held_out)
    entries = [known[name] for name in names] if names else list(known.values())
    entries.sort(key=lambda entry: entry.derived_from is not None)
    return [build_entry(entry, cache) for entry in entries]
