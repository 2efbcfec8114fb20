"""The folders import downward only: pipeline -> search/substitutions/backends -> opspecs -> taso.

Imports are read from the source (top-level and inside functions alike) with the
package-dir mapping of pyproject.toml applied, so `taso.backends` means the backends/
folder. The one edge against the grain is listed with its reason; any other upward
edge, any folder-level cycle, and any import inside a function that crosses folders
(the old way of dodging a cycle) fails here.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent

LAYERS = {  # folder -> the folders it may import
    "taso": set(),
    "opspecs": {"taso"},
    "substitutions": {"opspecs", "taso"},
    "search": {"opspecs", "taso"},
    "backends": {"search", "opspecs", "taso"},  # backends implement search's two-method CostModel
    "pipeline": {"search", "substitutions", "backends", "opspecs", "taso"},
}
EXCEPTIONS = {
    ("taso/__init__.py", "pipeline"): "the package's public face re-exports optimize_onnx; nothing else in taso/ does",
}


def _folders() -> dict[str, str]:
    """Import package -> folder, from pyproject's package-dir table."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {package: folder for package, folder in table.items()}


def _folder_of(module: str, packages: Mapping[str, str]) -> str | None:
    best = max((p for p in packages if module == p or module.startswith(p + ".")), key=len, default=None)
    return None if best is None else packages[best].split("/")[0]


def imports(packages: Mapping[str, str]) -> Iterator[tuple[str, str, str, bool]]:
    """(file, its folder, imported folder, inside a function) for every cross-folder import."""
    for folder in sorted({f.split("/")[0] for f in packages.values()}):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            top_level = {id(node) for node in tree.body}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    target = _folder_of(name, packages)
                    if target is not None and target != folder:
                        yield path.relative_to(ROOT).as_posix(), folder, target, id(node) not in top_level


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    return list(nx.simple_cycles(nx.DiGraph(edges)))


def test_folders_import_downward_only() -> None:
    wrong = [
        (path, target) for path, folder, target, _ in imports(_folders())
        if target not in LAYERS[folder] and (path, target) not in EXCEPTIONS
    ]
    assert not wrong, wrong


def test_no_folder_level_cycle_beyond_the_listed_exception() -> None:
    edges = {(folder, target) for path, folder, target, _ in imports(_folders()) if (path, target) not in EXCEPTIONS}
    assert cycles(edges) == []


def test_no_cross_folder_import_inside_a_function() -> None:
    lazy = [(path, target) for path, _, target, inside in imports(_folders()) if inside]
    allowed = {("substitutions/generate/cli.py", "opspecs")}  # taso-gen's subcommands load only what they use
    assert set(lazy) <= allowed, sorted(set(lazy) - allowed)


def _imported_names(path: Path) -> Iterator[str]:
    """Every module an absolute import in `path` names (`from a import b` names `a` and `a.b`)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


GENERATOR = "taso.substitutions.generate"


def test_the_rule_engine_imports_nothing_from_the_generator() -> None:
    """substitutions/*.py is what optimize runs; generate/ may use it, never the other way."""
    engine = sorted((ROOT / "substitutions").glob("*.py"))
    assert {p.name for p in engine} >= {"rule.py", "matching.py", "_matcher.py", "_apply.py"}
    wrong = [
        (path.relative_to(ROOT).as_posix(), name) for path in engine for name in _imported_names(path)
        if name == GENERATOR or name.startswith(GENERATOR + ".")
    ]
    assert not wrong, wrong


def test_the_cycle_finder_finds_cycles() -> None:
    """The checker itself must be able to fail: the old layout's cycle through taso/."""
    assert cycles({("taso", "backends"), ("backends", "taso")}) != []
    assert cycles({("pipeline", "taso"), ("backends", "taso")}) == []


def test_every_folder_is_mapped_and_layered() -> None:
    folders = {f.split("/")[0] for f in _folders().values()}
    assert folders == set(LAYERS)


def test_test_modules_import_no_other_test_module() -> None:
    """Shared rules, builders and oracles live in tests/helpers/, never in a test_*.py file."""
    files = sorted((ROOT / "tests").rglob("*.py"))  # the helpers too: they must not reach back
    wrong = [
        (path.relative_to(ROOT).as_posix(), name) for path in files for name in _imported_names(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert not wrong, wrong
