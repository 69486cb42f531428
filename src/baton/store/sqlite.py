"""The store in one SQLite file (WAL), the default: its backend and :class:`SqliteStore`.

What is SQLite's own (:mod:`baton.store.backend` says what a backend is):

* the writer's connection (:mod:`~baton.store.writer_connection`: a private file,
  WAL with ``synchronous=FULL``, a patient wait for the lock) takes the write lock with
  ``BEGIN IMMEDIATE``, inserts events with one multi-row statement (a batch of events
  alone is that statement in autocommit mode: its own transaction, one sqlite3 call);
* reads run on a pool of read-only connections, each read one WAL snapshot;
* the doorbell is a directory of FIFOs beside the file (:mod:`~baton.store.wake`),
  rung after COMMIT: this process's listener directly, every other one through its FIFO.

:class:`SqliteStore` also offers the raw connection, for the store's own tests and
tools (``read``, ``execute_write``); repositories use :class:`~baton.store.tx.Tx`.
"""

from __future__ import annotations

import concurrent.futures
import errno
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeVar

from baton.errors import StoreError
from baton.store._readers import ReadPool
from baton.store.event_rows import MAX_ROWS_PER_INSERT, EventRow, insert_rows
from baton.store.migrations import Migration, migrate
from baton.store.outage import OUTAGE_LIMIT_S
from baton.store.schema import STORE_MIGRATIONS
from baton.store.tx import Cursor, Params, Row, Statement, StoreConflict, Tx
from baton.store.wake import WakeChannel, WakeRouter, wake_dir_for
from baton.store.writer_connection import (
    DEFAULT_BUSY_TIMEOUT_MS,
    connect_writer,
    prepare_files,
    retry_busy,
)
from baton.store.writer_store import WriterStore

__all__ = ["SqliteBackend", "SqliteStore", "apply_migrations", "sqlite_statement"]

T = TypeVar("T")


def sqlite_statement(conn: sqlite3.Connection) -> Statement:
    """Portable SQL on ``conn`` (SQLite speaks it as it is; conflicts become StoreConflict)."""

    def run(sql: str, params: Params) -> Cursor:
        try:
            return conn.execute(sql, tuple(params))
        except sqlite3.IntegrityError as exc:
            raise StoreConflict(str(exc)) from exc

    return run


class SqliteWriter:
    """The writer thread's connection (:class:`~baton.store.backend.WriterConnection`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> None:
        self.conn = conn
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._statement = sqlite_statement(conn)

    def _retry_busy(self, fn: Callable[[], T]) -> T:
        return retry_busy(fn, path=self._path, busy_timeout_ms=self._busy_timeout_ms)

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction

    def begin(self) -> None:
        self._retry_busy(lambda: self.conn.execute("BEGIN IMMEDIATE"))

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def execute(self, sql: str) -> None:
        self.conn.execute(sql)

    def tx(self) -> Tx:
        return Tx(self._statement)

    def insert_events(self, rows: Sequence[EventRow]) -> None:
        insert_rows(self.conn, rows)

    def insert_events_alone(self, rows: Sequence[EventRow]) -> bool:
        # One INSERT statement in autocommit mode is its own transaction, taking the
        # write lock exactly as BEGIN IMMEDIATE does (busy handler included), atomic,
        # fsynced at its implicit COMMIT, and one sqlite3 call instead of three.
        if len(rows) > MAX_ROWS_PER_INSERT:
            return False
        self._retry_busy(lambda: insert_rows(self.conn, rows))
        return True

    def notify(self, topics: Sequence[str]) -> None:
        """Nothing inside the transaction: the FIFOs are rung after COMMIT (:meth:`ring`)."""

    def ddl(self, statement: str) -> str:
        return statement

    def create_if_missing(self, statement: str) -> None:
        self._retry_busy(lambda: self.conn.execute(statement))

    def commit_token(self) -> None:
        return None  # a COMMIT that failed did not commit (SQLite rolls the whole batch back)

    def was_committed(self, token: object) -> bool:
        return False

    def close(self) -> None:
        self.conn.close()


def _connect_reader(uri: str, busy_timeout_ms: int) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(
            uri,
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=busy_timeout_ms / 1000,
        )
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open a read connection: {exc}") from exc
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return conn


class SqliteBackend:
    """One SQLite file (:class:`~baton.store.backend.Backend`)."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        uri = path.as_uri() + "?mode=ro"
        self._pool: ReadPool[sqlite3.Connection] = ReadPool(
            lambda: _connect_reader(uri, busy_timeout_ms), sqlite3.Connection.close
        )
        self.channel = WakeChannel(directory=wake_dir_for(path))
        self.writer: SqliteWriter | None = None
        """The writer thread's connection once it is open (raw writes run on that thread)."""

    @property
    def label(self) -> str:
        return str(self._path)

    @property
    def path(self) -> Path:
        return self._path

    def connect_writer(self) -> SqliteWriter:
        self.writer = SqliteWriter(
            connect_writer(self._path, self._busy_timeout_ms), self._path, self._busy_timeout_ms
        )
        return self.writer

    def read_raw(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on a read-only connection, in one consistent snapshot."""
        conn = self._pool.acquire()
        reusable = True
        try:
            conn.execute("BEGIN")
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        finally:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    reusable = False  # a broken connection is discarded, not reused
            self._pool.release(conn, reusable=reusable)

    def read(self, fn: Callable[[Tx], T]) -> T:
        return self.read_raw(lambda conn: fn(Tx(sqlite_statement(conn), readonly=True)))

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        conn = self._pool.acquire()
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"store read failed: {exc}") from exc
        finally:
            self._pool.release(conn)

    async def listen(self) -> WakeRouter:
        return await self.channel.listen()

    def ring(self, topics: Sequence[str], local: WakeRouter | None) -> None:
        if not topics:
            return
        if local is not None:
            local.wake_threadsafe(topics)
        self.channel.ring(topics, skip=local.path if local is not None else None)

    def transient(self, exc: BaseException) -> str | None:
        """A full disk, an I/O error, the lock held past the wait: the store is out for now."""
        for error in (exc, exc.__cause__):
            if isinstance(error, sqlite3.Error):
                code = getattr(error, "sqlite_errorcode", 0) & 0xFF
                if code in _OUTAGE_CODES:
                    return f"{_OUTAGE_CODES[code]}: {error}"
            if isinstance(error, OSError) and error.errno in _OUTAGE_ERRNOS:
                return f"{os.strerror(error.errno or 0)}: {error}"
        return None

    def close(self) -> None:
        self._pool.close()


_OUTAGE_CODES: Final = {
    sqlite3.SQLITE_FULL: "the disk holding the store is full",
    sqlite3.SQLITE_IOERR: "an I/O error on the store's file",
    sqlite3.SQLITE_BUSY: "another process holds the store's write lock",
    sqlite3.SQLITE_LOCKED: "the store's table is locked",
    sqlite3.SQLITE_CANTOPEN: "the store's file cannot be opened",
}
_OUTAGE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """:func:`~baton.store.migrations.migrate` on a plain SQLite connection (autocommit,
    outside a transaction): tools and tests that build a store of another age."""
    path = Path(conn.execute("PRAGMA database_list").fetchone()[2] or ":memory:")
    return migrate(SqliteWriter(conn, path, DEFAULT_BUSY_TIMEOUT_MS), migrations)


class SqliteStore(WriterStore[SqliteBackend]):
    """The store in one SQLite file; open with :meth:`open`, close with :meth:`close`."""

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        extra_migrations: Sequence[Migration] = (),
        batch_max: int = 2048,
        queue_max: int = 65536,
        outage_limit_s: float = OUTAGE_LIMIT_S,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> SqliteStore:
        """Open (creating if needed, 0700/0600) the store at ``path`` with every store's
        tables (:data:`~baton.store.schema.STORE_MIGRATIONS`) and ``extra_migrations``.

        Blocks until the writer thread is up and the schema is current.
        """
        path = Path(path).absolute()
        prepare_files(path)
        return cls._opened(
            SqliteBackend(path, busy_timeout_ms=busy_timeout_ms),
            migrations=(*STORE_MIGRATIONS, *extra_migrations),
            batch_max=batch_max,
            queue_max=queue_max,
            outage_limit_s=outage_limit_s,
        )

    @property
    def path(self) -> Path:
        return self._backend.path

    @property
    def wake_channel(self) -> WakeChannel:
        """The store's cross-process doorbell (see :mod:`baton.store.wake`)."""
        return self._backend.channel

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a read-only connection, in one consistent snapshot."""
        self._check_open()
        return self._backend.read_raw(fn)

    def execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> concurrent.futures.Future[T]:
        """Run ``fn(conn)`` on the writer thread, in order with queued events.

        ``fn`` runs inside the batch's transaction under a savepoint: if it
        raises, only its own changes roll back and the future carries its
        exception unchanged. It must not COMMIT/ROLLBACK itself. The future
        resolves only after the batch is committed.
        """
        backend = self._backend

        def raw(tx: Tx) -> T:
            assert backend.writer is not None  # runs on the writer thread, after it connected
            return fn(backend.writer.conn)

        return self._submit(raw)
