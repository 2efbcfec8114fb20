"""Packaging (issue 20, Build item 5): a LICENSE and an SPDX license expression, `py.typed`,
the report's JSON Schema and the example-model maker inside the wheel, and the
`[cpu]` / `[gpu]` / `[dev]` extras (ONNX Runtime comes from one extra or the other, never both)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import onnx
import pytest

from taso.examples.make_model import build

ROOT = Path(__file__).parent.parent
HAS_SOURCE = (ROOT / "pyproject.toml").exists()
needs_source = pytest.mark.skipif(not HAS_SOURCE, reason="needs the source tree")


def _project() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@needs_source
def test_license_is_an_spdx_expression_with_its_file() -> None:
    project = _project()
    assert isinstance(project["license"], str) and project["license-files"] == ["LICENSE"]
    assert project["license"] == "Apache-2.0" and "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))


@needs_source
def test_onnxruntime_comes_from_exactly_one_extra() -> None:
    project = _project()
    names = [d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]]
    assert "onnxruntime" not in names and "onnxruntime-gpu" not in names
    extras = project["optional-dependencies"]
    assert any(d.startswith("onnxruntime>=") for d in extras["cpu"])
    assert any(d.startswith("onnxruntime-gpu>=") for d in extras["gpu"])
    assert not any(d.startswith("onnxruntime>=") for d in extras["gpu"])
    assert any("[cpu]" in d for d in extras["dev"]) and any(d.startswith("jsonschema") for d in extras["dev"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, check=True,
    )
    path = next(out.glob("taso_onnx-*.whl"))
    return zipfile.ZipFile(path).namelist(), proc.stdout + proc.stderr


@needs_source
def test_the_wheel_ships_the_license_types_schema_and_examples(wheel: tuple[list[str], str]) -> None:
    names, _ = wheel
    for member in ("taso/py.typed", "taso/report.schema.json", "taso/examples/__init__.py",
                   "taso/examples/make_model.py", "taso/substitutions/library/rules.json"):
        assert member in names, member
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), [n for n in names if "dist-info" in n]


@needs_source
def test_building_the_wheel_gives_no_license_warning(wheel: tuple[list[str], str]) -> None:
    _, log = wheel
    assert "deprecated" not in log.lower(), log[-2000:]  # setuptools warned of the license table


def test_the_example_model_maker_runs_as_a_module(tmp_path: Path) -> None:
    out = tmp_path / "example.onnx"
    proc = subprocess.run([sys.executable, "-m", "taso.examples.make_model", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    onnx.checker.check_model(onnx.load(str(out)))
    assert onnx.load(str(out)).SerializeToString() == build().SerializeToString()


def test_without_onnx_runtime_the_import_says_which_extra_to_install() -> None:
    code = "import sys; sys.modules['onnxruntime'] = None; import taso"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:") and "taso-onnx[cpu]" in last and "taso-onnx[gpu]" in last, proc.stderr
