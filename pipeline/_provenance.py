"""What a report records about the call itself, beside its result: the package versions,
the rules and the input it ran on, its threads, its budget and the cost cache it used,
so that a report says what produced it (and whether a rerun may differ)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import onnx

from taso.backends.cost_cache import CacheMode, CostCache, active_mode
from taso.pipeline._rewriting import RulesArg
from taso.pipeline.budget import Budget, Limit
from taso.report import (
    BudgetUsed,
    CostCacheUsed,
    RuleFile,
    RuleLibraryUsed,
    RuleSource,
    package_versions,
)
from taso.substitutions.rule import RuleLibrary


def call_record(
    model: Path | onnx.ModelProto, rules: RulesArg, *, threads: int, budget: Budget
) -> dict[str, object]:
    """The report fields that describe the call: `versions`, `rule_library`,
    `input_sha256`, `threads`, `budget` and `cost_cache`."""
    return {
        "versions": package_versions(),
        "rule_library": rules_used(rules),
        "input_sha256": input_sha256(model),
        "threads": threads,
        "budget": BudgetUsed(budget.seconds, budget.limit is Limit.DEFAULT),
        "cost_cache": cache_used(),
    }


def input_sha256(model: Path | onnx.ModelProto) -> str | None:
    """sha256 of a model file's bytes, or of a ModelProto's deterministic serialization
    (None for a proto too large to serialize, over 2 GB)."""
    if isinstance(model, onnx.ModelProto):
        try:
            return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()
        except ValueError:
            return None
    with open(model, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def rules_used(rules: RulesArg) -> RuleLibraryUsed:
    """Where the rules came from, the spec hash their library was proved against, and
    the sha256 of each file read (call after `resolve_rules` accepted `rules`)."""
    if rules is None:
        files = _shipped_files()
        return RuleLibraryUsed(RuleSource.SHIPPED, _spec_hash(f.read_text() for f in files),
                               tuple(RuleFile(f.name, _sha256(f.read_bytes())) for f in files))
    if isinstance(rules, str | os.PathLike):
        data = Path(rules).read_bytes()
        return RuleLibraryUsed(RuleSource.FILE, _spec_hash([data.decode()]), (RuleFile(str(rules), _sha256(data)),))
    if isinstance(rules, RuleLibrary):
        found = dict(rules.provenance).get("spec_set_hash")
        return RuleLibraryUsed(RuleSource.GIVEN, None if found is None else str(found))
    return RuleLibraryUsed(RuleSource.GIVEN, None)


def cache_used() -> CostCacheUsed:
    """The cost cache a `CostCache` made now uses."""
    if active_mode() is CacheMode.MEMORY:
        return CostCacheUsed(CacheMode.MEMORY.value, None)
    return CostCacheUsed(CacheMode.PERSISTENT.value, str(CostCache().path))


def _shipped_files() -> list[Traversable]:
    """The shipped rule files, in the order `default_rules` reads them."""
    library = resources.files("taso.substitutions").joinpath("library")
    if not library.is_dir():
        return []
    return sorted((e for e in library.iterdir() if e.name.endswith(".json")), key=lambda e: e.name)


def _spec_hash(texts: Iterable[str]) -> str | None:
    """The first `provenance.spec_set_hash` the rule files record."""
    for text in texts:
        found = json.loads(text).get("provenance", {}).get("spec_set_hash")
        if found is not None:
            return str(found)
    return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
