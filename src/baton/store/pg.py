"""The store on PostgreSQL (cluster mode): its backend and :class:`PgStore`.

The writer, its batches, reads, runs, sessions and subscriptions are the SQLite
store's own (:class:`~baton.store.writer_store.WriterStore`); what is PostgreSQL's
(:mod:`baton.store.backend` says what a backend is):

* **One writer at a time, across hosts.** Each batch's transaction first takes one
  transaction-scoped advisory lock (:data:`WRITER_LOCK`), so writers on every host
  are serialized exactly as SQLite's ``BEGIN IMMEDIATE`` serializes processes: the
  repositories' read-then-write rules (version guards, "max(id) is ours", epoch
  fences) hold unchanged under READ COMMITTED, since every statement after the lock
  sees every earlier writer's commit. Migrations take the same lock, so stores
  opened at once on several hosts apply a step once. A uniqueness or reference
  violation is a :class:`~baton.store.tx.StoreConflict`.
* **The dialect**: the repositories' SQL and the migrations, rewritten once by
  :mod:`baton.store.pg_dialect`.
* **Reads** run on pooled connections, each in a ``REPEATABLE READ READ ONLY``
  transaction (one snapshot).
* **Wake-ups are LISTEN/NOTIFY**, which PostgreSQL makes transactional: the
  topics a write names are ``pg_notify``-ed inside its transaction and reach
  every listening process on every host (this one too) at COMMIT, never for a
  rollback.

PostgreSQL is the cluster's store, so :meth:`PgStore.open` gives it the cluster
tables too (:data:`~baton.store.schema.CLUSTER_MIGRATIONS`). Imported only in cluster
mode (``psycopg`` is the ``baton[postgres]`` extra).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from baton.errors import StoreError
from baton.store._readers import ReadPool
from baton.store.event_rows import EventRow
from baton.store.migrations import Migration
from baton.store.outage import BACKOFF, OUTAGE_LIMIT_S
from baton.store.pg_dialect import pg_ddl, pg_query
from baton.store.schema import CLUSTER_MIGRATIONS, STORE_MIGRATIONS
from baton.store.tx import Cursor, Params, Row, Statement, StoreConflict, Tx
from baton.store.wake import WAKE_ALL, WakeRouter
from baton.store.writer_store import WriterStore

__all__ = [
    "WAKE_CHANNEL",
    "WRITER_LOCK",
    "PgBackend",
    "PgStore",
    "PgWakeListener",
    "pg_statement",
]

T = TypeVar("T")
_log = logging.getLogger(__name__)

WAKE_CHANNEL: Final = "baton_wake"
"""The one NOTIFY channel; the payload is the topic."""
WRITER_LOCK: Final = 0x62617431
"""``pg_advisory_xact_lock`` key every write batch and migration takes first ("bat1")."""
_INSERT_EVENT: Final = (
    "INSERT INTO events (run_id, seq, type, session_id, turn_id, ts, json)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_IN_TRANSACTION: Final = (TransactionStatus.INTRANS, TransactionStatus.INERROR)


def _params(params: Params) -> Row:
    # SQLite stores booleans as 0/1 in INTEGER columns; keep that meaning here.
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


def pg_statement(conn: psycopg.Connection[TupleRow]) -> Statement:
    """The repositories' portable SQL on ``conn``, rewritten (conflicts become StoreConflict)."""

    def run(sql: str, params: Params) -> Cursor:
        try:
            return conn.execute(pg_query(sql), _params(params))
        except pg_errors.IntegrityError as exc:
            raise StoreConflict(str(exc)) from exc

    return run


class PgWriter:
    """The writer thread's connection (:class:`~baton.store.backend.WriterConnection`);
    autocommit, with its transactions opened and ended by plain statements."""

    def __init__(self, conn: psycopg.Connection[TupleRow]) -> None:
        self._conn = conn
        self._statement = pg_statement(conn)

    @property
    def in_transaction(self) -> bool:
        # INERROR: a statement failed, a savepoint can still take the transaction back;
        # IDLE or UNKNOWN after an error: the transaction (or the connection) is gone.
        return self._conn.info.transaction_status in _IN_TRANSACTION

    def begin(self) -> None:
        self._conn.execute("BEGIN")
        self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        self._conn.execute("ROLLBACK")

    def execute(self, sql: str) -> None:
        self._conn.execute(sql)

    def tx(self) -> Tx:
        return Tx(self._statement)

    def insert_events(self, rows: Sequence[EventRow]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_INSERT_EVENT, rows)

    def insert_events_alone(self, rows: Sequence[EventRow]) -> bool:
        return False  # executemany is one statement per row: always inside a transaction

    def notify(self, topics: Sequence[str]) -> None:
        for topic in topics:
            self._conn.execute("SELECT pg_notify(%s, %s)", (WAKE_CHANNEL, topic))

    def ddl(self, statement: str) -> str:
        return pg_ddl(statement)

    def commit_token(self) -> object | None:
        row = self._conn.execute("SELECT txid_current()").fetchone()
        return None if row is None else int(row[0])

    def was_committed(self, token: object) -> bool:
        row = self._conn.execute("SELECT txid_status(%s)", (token,)).fetchone()
        return row is not None and row[0] == "committed"

    def create_if_missing(self, statement: str) -> None:
        # Under the lock: two hosts' concurrent CREATE TABLE IF NOT EXISTS can collide.
        self.begin()
        try:
            self._conn.execute(statement)
            self.commit()
        except BaseException:
            if self.in_transaction:
                self.rollback()
            raise

    def close(self) -> None:
        self._conn.close()


class PgWakeListener(WakeRouter):
    """This process's doorbell: one ``LISTEN`` connection, read by one thread."""

    def __init__(self, dsn: str, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._dsn = dsn
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute(f"LISTEN {WAKE_CHANNEL}")
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name="baton-pg-listen", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        pause = BACKOFF[0]
        try:
            while not self._closed.is_set():
                try:
                    # A blocking wait bounded at 0.5 s so close() is noticed; not a poll.
                    for note in self._conn.notifies(timeout=0.5):
                        self.wake_threadsafe([note.payload])
                    pause = BACKOFF[0]
                except psycopg.Error:
                    if self._closed.is_set():
                        return
                    _log.warning("store doorbell connection lost; listening again")
                    self._conn.close()
                    again = self._listen_again(pause)
                    if again is None:
                        return
                    self._conn = again
                    pause = min(pause * 2, BACKOFF[1])
                    # What was rung while it was out is unknown: every waiter looks again.
                    self.wake_threadsafe([WAKE_ALL])
        finally:
            self._conn.close()

    def _listen_again(self, pause: float) -> psycopg.Connection[TupleRow] | None:
        """A new LISTEN connection, tried with the store's outage back-off (None: closed)."""
        while not self._closed.is_set():
            # The database server must come back: nothing to wait on but trying again.
            self._closed.wait(pause)
            try:
                conn = psycopg.connect(self._dsn, autocommit=True)
                conn.execute(f"LISTEN {WAKE_CHANNEL}")
                return conn
            except psycopg.Error:
                pause = min(pause * 2, BACKOFF[1])
        return None

    def close(self) -> None:
        """Stop listening; idempotent. Wakes every waiter once, as the FIFO listener does."""
        if self._closed.is_set():
            return
        self._closed.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)
        self.wake([WAKE_ALL])

    def close_threadsafe(self) -> None:
        self._closed.set()
        self.wake_threadsafe([WAKE_ALL])


def _safe_dsn(dsn: str) -> str:
    """A DSN fit for messages: no password."""
    return " ".join(p for p in dsn.split() if not p.lower().startswith("password"))


def _connect(dsn: str) -> psycopg.Connection[TupleRow]:
    try:
        return psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot open a read connection: {exc}") from exc


class PgBackend:
    """One PostgreSQL database (:class:`~baton.store.backend.Backend`)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._pool: ReadPool[psycopg.Connection[TupleRow]] = ReadPool(
            lambda: _connect(dsn), lambda conn: conn.close()
        )

    @property
    def label(self) -> str:
        return _safe_dsn(self.dsn)

    @property
    def path(self) -> None:
        return None

    def connect_writer(self) -> PgWriter:
        return PgWriter(psycopg.connect(self.dsn, autocommit=True))

    def read(self, fn: Callable[[Tx], T]) -> T:
        conn = self._pool.acquire()
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                return fn(Tx(pg_statement(conn), readonly=True))
            finally:
                conn.execute("ROLLBACK")
        except psycopg.OperationalError as exc:
            conn.close()
            raise StoreError(f"store read failed: {exc}") from exc
        finally:
            self._pool.release(conn, reusable=not conn.closed)

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.read(lambda tx: tx.all(sql, params))

    async def listen(self) -> WakeRouter:
        return await asyncio.to_thread(PgWakeListener, self.dsn, asyncio.get_running_loop())

    def ring(self, topics: Sequence[str], local: WakeRouter | None) -> None:
        """Nothing after COMMIT: the writer's ``NOTIFY`` reached every listener at COMMIT."""

    def transient(self, exc: BaseException) -> str | None:
        """A lost connection, a server shutting down or starting: out for now."""
        for error in (exc, exc.__cause__):
            if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
                return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        return None

    def close(self) -> None:
        self._pool.close()


class PgStore(WriterStore[PgBackend]):
    """The store on PostgreSQL; open with :meth:`open`, close with :meth:`close`."""

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        extra_migrations: Sequence[Migration] = (),
        batch_max: int = 2048,
        queue_max: int = 65536,
        outage_limit_s: float = OUTAGE_LIMIT_S,
    ) -> PgStore:
        """Connect, apply pending migrations (every store's and the cluster's), start the
        writer; blocks until ready."""
        return cls._opened(
            PgBackend(dsn),
            migrations=(*STORE_MIGRATIONS, *CLUSTER_MIGRATIONS, *extra_migrations),
            batch_max=batch_max,
            queue_max=queue_max,
            outage_limit_s=outage_limit_s,
        )

    @property
    def dsn(self) -> str:
        """Where this store lives (a libpq connection string; may hold a password)."""
        return self._backend.dsn
