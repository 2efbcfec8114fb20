"""A persistent cost cache in SQLite, shared safely by concurrent processes.

Costs (milliseconds) are keyed by backend, device, ONNX Runtime version and a signature
string chosen by the caller (e.g. a structural hash of a subgraph plus its shapes).
The database lives in `TASO_CACHE_DIR` if set, else in
`platformdirs.user_cache_dir("taso-onnx")`, unless a directory is given explicitly.

Concurrency: WAL journal (readers never block the writer), a busy timeout, and every
write is one short `INSERT OR REPLACE` transaction. A connection is opened per call,
so instances survive `fork` and are safe to use from several threads.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from taso.errors import BackendError

CACHE_DIR_ENV = "TASO_CACHE_DIR"
DATABASE_NAME = "costs.sqlite3"
BUSY_TIMEOUT_S = 30.0

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


@dataclass(frozen=True)
class CostCache:
    """Costs in milliseconds, persisted in `directory / costs.sqlite3`.

    Nothing touches the disk until the first `get` or `put`.
    """

    directory: Path | str = field(default_factory=default_cache_dir)

    @property
    def path(self) -> Path:
        return Path(self.directory) / DATABASE_NAME

    def get(self, key: CostKey) -> float | None:
        """The cached cost for `key`, or None."""
        with self._connection() as connection:
            row = connection.execute(
                "SELECT cost_ms FROM costs WHERE backend=? AND device=? AND ort_version=? "
                "AND signature=?",
                key.as_row(),
            ).fetchone()
        return None if row is None else float(row[0])

    def put(self, key: CostKey, cost_ms: float) -> None:
        """Store (or replace) the cost for `key` in one short transaction."""
        with self._connection() as connection, connection:
            connection.execute(
                "INSERT OR REPLACE INTO costs VALUES (?, ?, ?, ?, ?, ?)",
                (*key.as_row(), float(cost_ms), time.time()),
            )

    def __len__(self) -> int:
        with self._connection() as connection:
            return int(connection.execute("SELECT COUNT(*) FROM costs").fetchone()[0])

    def clear(self) -> None:
        """Forget every cached cost."""
        with self._connection() as connection, connection:
            connection.execute("DELETE FROM costs")

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        try:
            connection = self._open()
        except (OSError, sqlite3.Error) as error:
            raise BackendError(f"cannot open the cost cache {self.path}: {error}") from error
        try:
            yield connection
        except sqlite3.Error as error:
            raise BackendError(f"cost cache {self.path}: {error}") from error
        finally:
            connection.close()

    def _open(self) -> sqlite3.Connection:
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(_SCHEMA)
        return connection
