"""Corpus families pinned to a converter version are skipped where another is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.corpus import BY_NAME, Family, _build


def _installed(versions: dict[str, str]):
    return lambda distribution: versions.get(distribution)


@pytest.mark.parametrize(
    ("entry", "paddle2onnx", "skipped"),
    [
        ("ppocrv4_rec_p2o1", "2.1.0", True),
        ("ppocrv4_rec_p2o1", "1.2.0", False),
        ("ppocrv4_rec", "1.2.0", True),
        ("ppocrv4_rec", "2.1.0", False),
    ],
)
def test_paddle2onnx_families_build_only_under_their_major_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entry: str, paddle2onnx: str, skipped: bool
) -> None:
    monkeypatch.setattr(_build, "_missing", lambda entry: [])
    monkeypatch.setattr(_build, "_installed_version",
                        _installed({"paddle2onnx": paddle2onnx, "paddlepaddle": "2.6.2"}))
    versions = _build._versions(BY_NAME[entry], tmp_path)
    assert isinstance(versions, str) is skipped
    if skipped:
        assert "paddle2onnx" in versions and paddle2onnx in versions


def test_only_paddle_entries_ask_for_an_opset() -> None:
    paddle = {Family.PADDLE2ONNX, Family.PADDLE2ONNX_1X}
    assert all(entry.family in paddle for entry in BY_NAME.values() if entry.opset is not None)
    assert BY_NAME["ppocrv4_det"].opset == BY_NAME["ppocrv4_rec_p2o1"].opset == 11
