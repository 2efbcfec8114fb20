"""The cost cache's controls (issue 20): `taso optimize --no-cache` keeps costs in memory
for the call only, `taso cache info` says where the cache is and what it holds, `taso
cache clear` removes it."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from taso.backends.cost_cache import DATABASE_NAME, CostCache, CostKey, cache_info, memory_only
from taso.pipeline.cli import main as taso_main
from tests.helpers import models


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TASO_CACHE_DIR", str(folder))
    return folder


def _key(n: int) -> CostKey:
    return CostKey("b", "d", "v", f"sig{n}")


def test_memory_only_keeps_costs_for_the_block_and_writes_nothing(cache_dir: Path) -> None:
    with memory_only():
        CostCache().put(_key(1), 2.5)
        assert CostCache().get(_key(1)) == 2.5  # shared by every cache made in the block
        assert not CostCache().persistent
    assert not cache_dir.exists()
    assert CostCache().get(_key(1)) is None and CostCache().persistent


def test_info_of_a_missing_cache(cache_dir: Path) -> None:
    info = cache_info()
    assert info.path == cache_dir / DATABASE_NAME and not info.exists and info.entries == 0 and info.size_bytes == 0
    assert not cache_dir.exists()  # asking creates nothing


def test_cache_info_and_clear_on_the_command_line(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(3):
        CostCache().put(_key(n), float(n))
    assert taso_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(cache_dir / DATABASE_NAME) in out and "entries: 3" in out
    assert taso_main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["entries"] == 3 and info["size_bytes"] > 0 and info["exists"] is True
    assert taso_main(["cache", "clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not any(cache_dir.glob(DATABASE_NAME + "*"))
    assert taso_main(["cache", "clear"]) == 0
    assert "nothing to remove" in capsys.readouterr().out


def test_bare_cache_command_is_a_usage_error(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert taso_main(["cache"]) == 2
    assert "info" in capsys.readouterr().err


@pytest.mark.ort
def test_no_cache_writes_no_cache_and_says_so(cache_dir: Path, tmp_path: Path) -> None:
    source, report = tmp_path / "in.onnx", tmp_path / "report.json"
    onnx.save_model(models.conv_net(), source)
    code = taso_main(["optimize", str(source), "-o", str(tmp_path / "o.onnx"), "--time-budget", "2",
                      "--no-cache", "--report", str(report), "-q"])
    assert code == 0
    assert not (cache_dir / DATABASE_NAME).exists()
    assert json.loads(report.read_text())["cost_cache"] == {"mode": "memory", "path": None}
