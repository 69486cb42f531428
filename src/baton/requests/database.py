"""The database seam of the ledger: a single writer, separate readers.

The ledger needs two things from storage: run a function in one write
transaction on the single writer (ordered with everything else that writes),
and run a read against a consistent snapshot. :class:`LedgerDatabase` names
exactly that, and :class:`baton.store.Store` satisfies it as is (``path``,
``execute_write``, ``read``), so the ledger shares the store's one WAL writer
thread with the event log. :class:`SqliteDatabase` is a small standalone
implementation for processes that only touch requests (``baton inbox`` and
``baton answer``, benches), with the same migration bookkeeping
(``schema_migrations``), so either may open the file first.

Both use SQLite in WAL mode with a busy timeout, which is what makes answering
from another process safe: the CLI's write waits for the daemon's lock instead
of failing, and readers never block the writer.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar

from baton.errors import StoreError
from baton.store.migrations import Migration, apply_migrations

__all__ = ["LedgerDatabase", "SqliteDatabase"]

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000


class LedgerDatabase(Protocol):
    """What the ledger needs from storage (see the module docstring)."""

    @property
    def path(self) -> Path:
        """The database file; the wake-up channel lives beside it."""
        ...

    def execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Run ``fn`` on the single writer inside one transaction; roll back if it raises."""
        ...

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` against a consistent read snapshot (blocking; the ledger calls it
        from a worker thread)."""
        ...


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    else:
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL, like the store: an acknowledged answer survives power loss too.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    return conn


class SqliteDatabase:
    """A standalone :class:`LedgerDatabase`: one writer thread, one reader thread.

    Each connection is used only by its own thread. ``close()`` is idempotent and
    drains queued work; using the database afterwards raises ``StoreError``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="baton-requests-writer")
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="baton-requests-reader")
        self._write_conn: sqlite3.Connection | None = None
        self._read_conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    @classmethod
    def open(cls, path: Path, migrations: Sequence[Migration] = ()) -> SqliteDatabase:
        """Open (creating if needed) ``path`` and apply ``migrations``."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            path.touch(mode=0o600)
        db = cls(path)
        try:
            db._write_conn = db._writer.submit(_connect, path, readonly=False).result()
            db._read_conn = db._reader.submit(_connect, path, readonly=True).result()
            # The store's own migration runner (``schema_migrations``), so a
            # database first opened here is later opened by ``Store`` unchanged.
            write_conn = db._write_conn
            db._writer.submit(apply_migrations, write_conn, migrations).result()
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"cannot open request ledger {path}: {exc}") from exc
        except BaseException:
            db.close()
            raise
        return db

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"request database {self._path} is closed")

    def execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> Future[T]:
        with self._lock:
            self._check_open()
            return self._writer.submit(self._in_transaction, fn)

    def _in_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._write_conn
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            self._check_open()
            future = self._reader.submit(self._in_snapshot, fn)
        return future.result()

    def _in_snapshot(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._read_conn
        assert conn is not None
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for executor, attr in ((self._writer, "_write_conn"), (self._reader, "_read_conn")):
            conn: sqlite3.Connection | None = getattr(self, attr)
            if conn is not None:
                executor.submit(conn.close).result()
            executor.shutdown(wait=True)
