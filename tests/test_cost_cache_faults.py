"""A cost cache that cannot be used never breaks a run.

An unusable database (folder not creatable, `TASO_CACHE_DIR=/dev/null`, read-only db)
falls back to memory with one RuntimeWarning; a corrupted `costs.sqlite3` is moved aside
and rebuilt, unless it is a symlink, which is never followed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import taso
from taso.backends import cost_cache
from taso.backends.cost_cache import CACHE_DIR_ENV, DATABASE_NAME, CostCache, CostKey
from tests.helpers.models import conv_net

KEY = CostKey("ort-cpu", "dev", "1.0", "sig")
GARBAGE = b"this is not a sqlite database\n" * 200


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch) -> Iterator[None]:
    """Each test starts with no path warned about yet (the set is per process)."""
    monkeypatch.setattr(cost_cache, "_WARNED_PATHS", set(), raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        yield


def _cache_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, RuntimeWarning) and "cost cache" in str(w.message)]


def _exercise(cache: CostCache) -> None:
    """Every public operation works and behaves like a cache."""
    assert cache.get(KEY) is None
    cache.put(KEY, 1.5)
    cache.put(KEY, 2.5)
    assert cache.get(KEY) == 2.5 and len(cache) == 1
    cache.clear()
    assert len(cache) == 0 and cache.get(KEY) is None


def _under_a_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file, so no folder can be made under it")
    return blocker / "cache"


def _read_only_connect(monkeypatch) -> None:
    """Open every database read-only (chmod is no obstacle to root)."""
    connect = sqlite3.connect

    def read_only(path: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        return connect(f"file:{path}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", read_only)


def test_dev_null_falls_back_to_memory_with_one_warning(monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, "/dev/null")
    cache = CostCache()
    with warnings.catch_warnings(record=True) as record:
        _exercise(cache)
    messages = _cache_warnings(record)
    assert len(messages) == 1 and "/dev/null" in messages[0]
    assert not cache.persistent


def test_folder_that_cannot_be_made_falls_back_for_the_instance_life(tmp_path: Path):
    directory = _under_a_file(tmp_path)
    cache = CostCache(directory)
    with warnings.catch_warnings(record=True) as record:
        cache.put(KEY, 3.0)
        (tmp_path / "blocker").unlink()  # the folder could be made now: the instance stays in memory
        assert cache.get(KEY) == 3.0 and len(cache) == 1
    assert not directory.exists() and not cache.persistent
    messages = _cache_warnings(record)
    assert len(messages) == 1 and str(directory) in messages[0]


def test_same_path_warns_once_per_process(tmp_path: Path):
    directory = _under_a_file(tmp_path)
    with warnings.catch_warnings(record=True) as record:
        for _ in range(3):
            _exercise(CostCache(directory))
    assert len(_cache_warnings(record)) == 1


def test_read_only_database_falls_back_to_memory(tmp_path: Path, monkeypatch):
    CostCache(tmp_path).put(KEY, 7.0)
    _read_only_connect(monkeypatch)
    cache = CostCache(tmp_path)
    with warnings.catch_warnings(record=True) as record:
        cache.put(CostKey("ort-cpu", "dev", "1.0", "other"), 1.0)
        assert cache.get(CostKey("ort-cpu", "dev", "1.0", "other")) == 1.0
    assert not cache.persistent and len(_cache_warnings(record)) == 1
    monkeypatch.undo()
    assert CostCache(tmp_path).get(KEY) == 7.0  # the read-only database was left alone


def test_garbage_database_is_moved_aside_and_rebuilt(tmp_path: Path):
    (tmp_path / DATABASE_NAME).write_bytes(GARBAGE)
    cache = CostCache(tmp_path)
    with warnings.catch_warnings(record=True) as record:
        cache.put(KEY, 4.0)
    assert cache.persistent and CostCache(tmp_path).get(KEY) == 4.0
    assert (tmp_path / f"{DATABASE_NAME}.corrupt").read_bytes() == GARBAGE
    assert len(_cache_warnings(record)) == 1


def test_malformed_database_is_rebuilt(tmp_path: Path):
    cache = CostCache(tmp_path)
    cache.put(KEY, 1.0)  # creates the database; then enough rows for several pages, in one go
    rows = [("ort-cpu", "dev", "1.0", f"signature-{index}" * 4, float(index), 0.0) for index in range(300)]
    with contextlib.closing(sqlite3.connect(cache.path)) as connection, connection:
        connection.executemany("INSERT INTO costs VALUES (?, ?, ?, ?, ?, ?)", rows)
    data = bytearray(cache.path.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # a b-tree page: "database disk image is malformed"
    cache.path.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True):
        assert CostCache(tmp_path).get(CostKey("ort-cpu", "dev", "1.0", "signature-5" * 4)) is None
        fresh = CostCache(tmp_path)
        fresh.put(KEY, 5.0)
    assert fresh.persistent and fresh.get(KEY) == 5.0 and len(fresh) == 1


def test_symlinked_garbage_is_never_followed(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere.bin"
    elsewhere.write_bytes(GARBAGE)
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / DATABASE_NAME).symlink_to(elsewhere)
    cache = CostCache(directory)
    with warnings.catch_warnings(record=True) as record:
        _exercise(cache)
    assert not cache.persistent and len(_cache_warnings(record)) == 1
    assert elsewhere.read_bytes() == GARBAGE and (directory / DATABASE_NAME).is_symlink()
    assert not (directory / f"{DATABASE_NAME}.corrupt").exists()


def _locked_connect(monkeypatch, times: int | None) -> list[int]:
    """The first `times` connections (every one with None) answer "database is locked"
    at once, as SQLite does where waiting could deadlock; returns the attempts made."""
    connect, attempts = sqlite3.connect, []

    def locked(*args: object, **kwargs: object) -> sqlite3.Connection:
        attempts.append(1)
        if times is None or len(attempts) <= times:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = sqlite3.SQLITE_BUSY
            raise error
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", locked)
    return attempts


def test_a_database_locked_for_a_moment_is_retried_not_abandoned(tmp_path: Path, monkeypatch):
    attempts = _locked_connect(monkeypatch, times=3)
    cache = CostCache(tmp_path)
    with warnings.catch_warnings(record=True) as record:
        cache.put(KEY, 6.0)
    assert cache.persistent and not _cache_warnings(record) and len(attempts) == 4
    monkeypatch.undo()
    assert CostCache(tmp_path).get(KEY) == 6.0


def test_a_database_that_stays_locked_falls_back_after_the_busy_timeout(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cost_cache, "BUSY_TIMEOUT_S", 0.1)
    attempts = _locked_connect(monkeypatch, times=None)
    cache = CostCache(tmp_path)
    with warnings.catch_warnings(record=True) as record:
        cache.put(KEY, 6.0)
        assert cache.get(KEY) == 6.0
    assert not cache.persistent and len(_cache_warnings(record)) == 1
    assert 2 <= len(attempts) < 10  # retried with backoff, then gave up


def _unusable_dev_null(tmp_path: Path) -> str:
    return "/dev/null"


def _unusable_under_a_file(tmp_path: Path) -> str:
    return str(_under_a_file(tmp_path))


def _garbage_file(tmp_path: Path) -> str:
    (tmp_path / DATABASE_NAME).write_bytes(GARBAGE)
    return str(tmp_path)


@pytest.mark.ort
@pytest.mark.parametrize("make_dir", [_unusable_dev_null, _unusable_under_a_file, _garbage_file])
def test_optimize_finishes_with_a_broken_cache(tmp_path: Path, monkeypatch, make_dir):
    monkeypatch.setenv(CACHE_DIR_ENV, make_dir(tmp_path))
    with warnings.catch_warnings(record=True) as record:
        result = taso.optimize_onnx(conv_net(), time_budget_s=2)
    assert result.model.graph.node
    assert not _cache_warnings(record)  # the report carries it, and the CLI prints it
    assert len([w for w in result.report.warnings if "cost cache" in w]) == 1, result.report.warnings
