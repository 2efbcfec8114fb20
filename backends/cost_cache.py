"""A persistent cost cache in SQLite, shared safely by concurrent processes.

Costs (milliseconds) are keyed by backend, device, ONNX Runtime version and a signature
string chosen by the caller (e.g. a structural hash of a subgraph plus its shapes).
The database lives in `TASO_CACHE_DIR` if set, else in
`platformdirs.user_cache_dir("taso-onnx")`, unless a directory is given explicitly.

Concurrency: WAL journal (readers never block the writer), a busy timeout, and every
write is one short `INSERT OR REPLACE` transaction. SQLite answers "database is locked"
at once, without waiting, where waiting could deadlock (two processes creating the
database together and both switching it to WAL); such an operation is retried on a fresh
connection, with backoff, for up to the busy timeout. A connection is opened per call,
so instances survive `fork` and are safe to use from several threads.

Faults never break a run. A corrupted database (not SQLite, or "malformed") is moved
aside to `costs.sqlite3.corrupt` and rebuilt, but only when it and its journal files
are regular files we own: a symlink is never followed. Any other failure (a folder that
cannot be made, `TASO_CACHE_DIR=/dev/null`, a read-only database, a rebuild that fails)
switches the instance to an in-memory store for the rest of its life, with one
TasoWarning (a RuntimeWarning) per path per process; `CostCache.persistent` tells which store is used.

`memory_only()` (`taso optimize --no-cache`): every `CostCache` made inside the block
shares one in-memory store that lives as long as the block, and nothing is read from or
written to disk. `cache_info` and `remove_cache` back `taso cache info|clear`.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import os
import sqlite3
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import platformdirs

from taso.errors import TasoWarning

CACHE_DIR_ENV = "TASO_CACHE_DIR"
DATABASE_NAME = "costs.sqlite3"
BUSY_TIMEOUT_S = 30.0
CORRUPT_SUFFIX = ".corrupt"  # where a corrupted database is moved before the rebuild
_JOURNAL_SUFFIXES = ("-wal", "-shm")  # a stale WAL would be replayed into the new database
_CORRUPTION_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_STORE_ERRORS = (OSError, sqlite3.Error)
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_FIRST_BACKOFF_S, _LAST_BACKOFF_S = 0.01, 0.5

# Paths whose fallback to memory this process has already warned about, and the lock
# that makes an instance's switch to memory (and that warning) happen once.
_WARNED_PATHS: set[Path] = set()
_FALLBACK_LOCK = threading.Lock()

T = TypeVar("T")


class CacheMode(enum.Enum):
    """Where a call's costs live."""

    PERSISTENT = "persistent"  # the SQLite database in the cache directory
    MEMORY = "memory"  # in memory for one call (`memory_only`): nothing read or written on disk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS costs (
    backend TEXT NOT NULL,
    device TEXT NOT NULL,
    ort_version TEXT NOT NULL,
    signature TEXT NOT NULL,
    cost_ms REAL NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (backend, device, ort_version, signature)
)
"""


@dataclass(frozen=True)
class CostKey:
    """What a cached cost is valid for."""

    backend: str
    device: str
    ort_version: str
    signature: str

    def as_row(self) -> tuple[str, str, str, str]:
        return (self.backend, self.device, self.ort_version, self.signature)


def default_cache_dir() -> Path:
    """`TASO_CACHE_DIR` if set, else the platform's user cache dir for taso-onnx."""
    override = os.environ.get(CACHE_DIR_ENV)
    return Path(override) if override else Path(platformdirs.user_cache_dir("taso-onnx"))


class _Store(Protocol):
    def get(self, key: CostKey) -> float | None: ...
    def put(self, key: CostKey, cost_ms: float) -> None: ...
    def count(self) -> int: ...
    def clear(self) -> None: ...


class _MemoryStore:
    """The fallback: costs in a dict, for the rest of one `CostCache` instance's life."""

    def __init__(self) -> None:
        self._costs: dict[CostKey, float] = {}

    def get(self, key: CostKey) -> float | None:
        return self._costs.get(key)

    def put(self, key: CostKey, cost_ms: float) -> None:
        self._costs[key] = float(cost_ms)

    def count(self) -> int:
        return len(self._costs)

    def clear(self) -> None:
        self._costs.clear()


@dataclass(frozen=True)
class _SqliteStore:
    """The database; each call opens its own connection and raises OSError or sqlite3.Error."""

    path: Path

    def get(self, key: CostKey) -> float | None:
        with self._connection() as connection:
            row = connection.execute(
                "SELECT cost_ms FROM costs WHERE backend=? AND device=? AND ort_version=? "
                "AND signature=?",
                key.as_row(),
            ).fetchone()
        return None if row is None else float(row[0])

    def put(self, key: CostKey, cost_ms: float) -> None:
        with self._connection() as connection, connection:
            connection.execute(
                "INSERT OR REPLACE INTO costs VALUES (?, ?, ?, ?, ?, ?)",
                (*key.as_row(), float(cost_ms), time.time()),
            )

    def count(self) -> int:
        with self._connection() as connection:
            return int(connection.execute("SELECT COUNT(*) FROM costs").fetchone()[0])

    def clear(self) -> None:
        with self._connection() as connection, connection:
            connection.execute("DELETE FROM costs")

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)) as connection:
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute(_SCHEMA)
            yield connection


@dataclass
class _Fallback:
    """Mutable state of a frozen `CostCache`: the memory store once the database failed
    (or from the start, inside `memory_only`)."""

    memory: _MemoryStore | None = None


_CALL_MEMORY: contextvars.ContextVar[_MemoryStore | None] = contextvars.ContextVar("taso_cost_memory", default=None)


@contextlib.contextmanager
def memory_only() -> Iterator[None]:
    """Inside the block every new `CostCache` keeps its costs in one shared memory store,
    forgotten when the block ends; the database is neither read nor written."""
    token = _CALL_MEMORY.set(_MemoryStore())
    try:
        yield
    finally:
        _CALL_MEMORY.reset(token)


def active_mode() -> CacheMode:
    """The mode a `CostCache` made now would start in."""
    return CacheMode.PERSISTENT if _CALL_MEMORY.get() is None else CacheMode.MEMORY


def _call_fallback() -> _Fallback:
    return _Fallback(_CALL_MEMORY.get())


@dataclass(frozen=True)
class CostCache:
    """Costs in milliseconds, persisted in `directory / costs.sqlite3` (see module doc
    for what happens when that database cannot be used).

    Nothing touches the disk until the first `get` or `put`.
    """

    directory: Path | str = field(default_factory=default_cache_dir)
    _fallback: _Fallback = field(default_factory=_call_fallback, init=False, repr=False, compare=False)

    @property
    def path(self) -> Path:
        return Path(self.directory) / DATABASE_NAME

    @property
    def persistent(self) -> bool:
        """False once this instance fell back to keeping costs in memory."""
        return self._fallback.memory is None

    def get(self, key: CostKey) -> float | None:
        """The cached cost for `key`, or None."""
        return self._use(lambda store: store.get(key))

    def put(self, key: CostKey, cost_ms: float) -> None:
        """Store (or replace) the cost for `key` in one short transaction."""
        self._use(lambda store: store.put(key, cost_ms))

    def __len__(self) -> int:
        return self._use(lambda store: store.count())

    def clear(self) -> None:
        """Forget every cached cost."""
        self._use(lambda store: store.clear())

    def _use(self, action: Callable[[_Store], T]) -> T:
        memory = self._fallback.memory
        if memory is not None:
            return action(memory)
        try:
            return _retrying_while_busy(action, _SqliteStore(self.path))
        except _STORE_ERRORS as error:
            return self._recover(action, error)

    def _recover(self, action: Callable[[_Store], T], error: OSError | sqlite3.Error) -> T:
        """Rebuild a corrupted database and retry once; else, or if that fails, use memory."""
        if _is_corruption(error) and _move_aside(self.path, error):
            try:
                return action(_SqliteStore(self.path))
            except _STORE_ERRORS as again:
                error = again
        return action(self._fall_back(error))

    def _fall_back(self, error: OSError | sqlite3.Error) -> _MemoryStore:
        with _FALLBACK_LOCK:
            memory = self._fallback.memory
            if memory is not None:  # another thread switched first
                return memory
            memory = self._fallback.memory = _MemoryStore()
            first_for_path = self.path not in _WARNED_PATHS
            _WARNED_PATHS.add(self.path)
        if first_for_path:
            warnings.warn(
                f"cost cache {self.path} cannot be used ({_reason(error)}); "
                "costs are kept in memory and not saved",
                TasoWarning,
                stacklevel=2,
            )
        return memory


def _retrying_while_busy(action: Callable[[_Store], T], store: _SqliteStore) -> T:
    """`action(store)`, retried while SQLite says the database is busy or locked, until
    `BUSY_TIMEOUT_S` has passed; each try opens its own connection and holds no lock."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    backoff = _FIRST_BACKOFF_S
    while True:
        try:
            return action(store)
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() + backoff > deadline:
                raise
        time.sleep(backoff)
        backoff = min(2 * backoff, _LAST_BACKOFF_S)


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY_CODES


def _reason(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _is_corruption(error: BaseException) -> bool:
    """SQLITE_CORRUPT ("malformed") or SQLITE_NOTADB, extended codes included."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.DatabaseError) and code is not None and code & 0xFF in _CORRUPTION_CODES


def _move_aside(path: Path, error: BaseException) -> bool:
    """Move a corrupted database to `*.corrupt` and delete its journal files, so the next
    connection creates a fresh one. Only our own regular files: never through a symlink."""
    journals = [path.with_name(path.name + suffix) for suffix in _JOURNAL_SUFFIXES]
    present = [path, *(journal for journal in journals if os.path.lexists(journal))]
    if not all(_is_own_regular_file(each) for each in present):
        return False
    try:
        os.replace(path, path.with_name(path.name + CORRUPT_SUFFIX))
        for journal in journals:
            journal.unlink(missing_ok=True)
    except OSError:
        return False
    warnings.warn(
        f"cost cache {path} was corrupted ({_reason(error)}); moved it to {path.name}{CORRUPT_SUFFIX} "
        "and started a new one",
        TasoWarning,
        stacklevel=2,
    )
    return True


def _is_own_regular_file(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()


@dataclass(frozen=True)
class CacheInfo:
    """What `taso cache info` prints: the database's path, its files' total size and its
    entry count (None, with `problem`, when the database cannot be read)."""

    path: Path
    exists: bool
    size_bytes: int
    entries: int | None
    problem: str | None = None


def _files(path: Path) -> list[Path]:
    """The database and its journal and moved-aside files that exist."""
    candidates = [path, *(path.with_name(path.name + s) for s in (*_JOURNAL_SUFFIXES, CORRUPT_SUFFIX))]
    return [each for each in candidates if os.path.lexists(each)]


def cache_info(directory: Path | str | None = None) -> CacheInfo:
    """The cache in `directory` (default: `default_cache_dir()`), without creating it."""
    path = Path(directory if directory is not None else default_cache_dir()) / DATABASE_NAME
    size = sum(each.lstat().st_size for each in _files(path))
    if not path.is_file():
        return CacheInfo(path, False, size, 0)
    try:
        return CacheInfo(path, True, size, _SqliteStore(path).count())
    except _STORE_ERRORS as error:
        return CacheInfo(path, True, size, None, _reason(error))


def remove_cache(directory: Path | str | None = None) -> list[Path]:
    """Delete the database, its journal files and a moved-aside corrupt copy (a symlink
    is removed, never followed); return what was removed."""
    path = Path(directory if directory is not None else default_cache_dir()) / DATABASE_NAME
    removed = _files(path)
    for each in removed:
        each.unlink()
    return removed
