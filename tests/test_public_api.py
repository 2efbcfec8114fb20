"""The public API is small and deliberate: this test pins it."""

from __future__ import annotations

import inspect
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import taso

EXPECTED = {
    "BackendError", "CheckStatus", "Decision", "InputError", "InvalidModelError", "Latency",
    "NumericMismatchError", "OptimizeResult", "Report", "StopReason", "TasoError",
    "UnsupportedModelError", "UsageError", "VerificationError", "optimize_onnx",
}


def test_public_names_are_pinned() -> None:
    assert set(taso.__all__) == EXPECTED
    public = {n for n in dir(taso) if not n.startswith("_")} - {
        "api", "errors", "report", "ir", "cli", "backends", "opspecs", "substitutions", "search", "pipeline", "examples",
    }
    assert public == EXPECTED


def test_optimize_onnx_signature() -> None:
    params = inspect.signature(taso.optimize_onnx).parameters
    assert list(params)[:2] == ["model", "output"]
    keyword_only = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only[:5] == ["backend", "time_budget_s", "alpha", "check", "rules"]
    assert params["alpha"].default == 1.05 and params["check"].default is True


def test_error_hierarchy() -> None:
    for name in ("InputError", "BackendError", "VerificationError"):
        assert issubclass(getattr(taso, name), taso.TasoError)
    for name in ("InvalidModelError", "UnsupportedModelError", "UsageError"):
        assert issubclass(getattr(taso, name), taso.InputError)
    assert issubclass(taso.NumericMismatchError, taso.VerificationError)


@pytest.mark.skipif(not Path(__file__).parent.parent.joinpath("pyproject.toml").exists(), reason="needs the source tree")
def test_wheel_contains_only_the_taso_tree(tmp_path: Path) -> None:
    root = Path(__file__).parent.parent
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(root)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("taso_onnx-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    code = [n for n in names if ".dist-info/" not in n]
    assert code and all(n.startswith("taso/") for n in code), [n for n in code if not n.startswith("taso/")]
    for package in ("taso/opspecs/", "taso/opspecs/axioms/", "taso/substitutions/", "taso/substitutions/generate/",
                    "taso/search/", "taso/backends/", "taso/pipeline/"):
        assert any(n.startswith(package) for n in code), package
    assert not any(n.startswith(("tests/", "benchmarks/", "examples/")) for n in names)
