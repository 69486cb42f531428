"""The Store on PostgreSQL (cluster mode): the same interface, migrations and rules.

Everything the team loop, the ledger and the surfaces call on
:class:`baton.store.store.Store` that is not SQLite-specific is here with the
same meaning: ``append``/``flush`` (acknowledged = committed), ``write`` (a
state change and its events in *one* transaction, topics rung only after
COMMIT), ``read_tx``/``aread`` (a consistent snapshot), runs, sessions, event
reads and live subscriptions. The raw-connection calls (``execute_write``,
``read``) stay SQLite-only: repositories use :class:`~baton.store.tx.Tx`.

* **One writer at a time, across hosts.** A thread per process owns one
  connection and commits each batch of queued items in one transaction (a
  failing write function rolls back alone, under a savepoint, exactly as on
  SQLite). Each batch first takes one transaction-scoped advisory lock
  (:data:`WRITER_LOCK`), so writers on every host are serialized exactly as
  SQLite's ``BEGIN IMMEDIATE`` serializes processes: the repositories' read-
  then-write rules (version guards, "max(id) is ours", epoch fences) hold
  unchanged under READ COMMITTED, since every statement after the lock sees
  every earlier writer's commit. A uniqueness or reference violation is a
  :class:`StoreConflict`.
* **Wake-ups are LISTEN/NOTIFY**, which PostgreSQL makes transactional: the
  topics a write names are ``pg_notify``-ed inside its transaction and reach
  every listening process on every host at COMMIT, never for a rollback.
* **Migrations** are the same named steps (:data:`ALL_MIGRATIONS`), rewritten
  by :mod:`baton.store.pg_dialect`; each runs in its own transaction under an
  advisory lock, so stores opened at once on several hosts apply a step once.

Imported only in cluster mode (``psycopg`` is the ``baton[postgres]`` extra).

Length: one backend's whole store face (queue, writer thread, batch commit,
reads, runs/sessions, LISTEN doorbell) mirrors SQLite's five modules; split
by concept it would be five modules of one class each, all private to here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

import psycopg
from psycopg import errors as pg_errors

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.events.sequencer import utc_now
from baton.store.core_tables import (
    INSERT_RUN,
    UPSERT_SESSION,
    TableReads,
    finish_run_tx,
)
from baton.store.event_rows import event_row, stage_seqs
from baton.store.migrations import (
    SCHEMA_MIGRATIONS_SQL,
    Migration,
    split_statements,
    unique_migrations,
)
from baton.store.pg_dialect import pg_ddl, pg_query
from baton.store.records import (
    RunRecord,
    SessionRecord,
    run_to_row,
    session_to_row,
)
from baton.store.store import ALL_MIGRATIONS
from baton.store.subscription import Subscription
from baton.store.tx import Row, StoreConflict, Tx
from baton.store.wake import WAKE_ALL, WakeRouter

__all__ = ["WAKE_CHANNEL", "WRITER_LOCK", "PgStore", "PgTx", "PgWakeListener"]

T = TypeVar("T")
_log = logging.getLogger(__name__)

WAKE_CHANNEL: Final = "baton_wake"
"""The one NOTIFY channel; the payload is the topic."""
_MIGRATION_LOCK: Final = 0x62617430  # "bat0": pg_advisory_xact_lock key for schema steps
WRITER_LOCK: Final = 0x62617431
"""``pg_advisory_xact_lock`` key every write batch takes first ("bat1"): one writer at a time."""
_INSERT_EVENT: Final = (
    "INSERT INTO events (run_id, seq, type, session_id, turn_id, ts, json)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_CONFLICTS: Final = (pg_errors.IntegrityError,)


def _params(params: Sequence[Any]) -> tuple[Any, ...]:
    # SQLite stores booleans as 0/1 in INTEGER columns; keep that meaning here.
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


class PgTx(Tx):
    """A :class:`Tx` on a psycopg connection (the repositories' SQL, rewritten once)."""

    __slots__ = ("_pg",)

    def __init__(self, conn: psycopg.Connection[Any], *, readonly: bool = False) -> None:
        self._pg = conn
        self._topics: list[str] = []
        self.readonly = readonly

    def _cursor(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[Any]:
        try:
            return self._pg.execute(pg_query(sql), _params(params))
        except _CONFLICTS as exc:
            raise StoreConflict(str(exc)) from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        if self.readonly:
            raise StoreError("a read snapshot cannot write")
        return self._cursor(sql, params).rowcount

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self._cursor(sql, params).fetchone()
        return tuple(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [tuple(r) for r in self._cursor(sql, params).fetchall()]


def apply_pg_migrations(
    conn: psycopg.Connection[Any], migrations: Sequence[Migration]
) -> list[str]:
    """Apply the steps not yet recorded, each in its own transaction; return their names."""
    done: list[str] = []
    for migration in unique_migrations(migrations):
        statements = [pg_ddl(s) for s in split_statements(migration.sql)]
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                conn.execute(pg_ddl(SCHEMA_MIGRATIONS_SQL))
                already = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE name = %s", (migration.name,)
                ).fetchone()
                if already is None:
                    for statement in statements:
                        conn.execute(statement.replace("%", "%%"), ())
                    conn.execute(
                        "INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)",
                        (migration.name, utc_now()),
                    )
                    done.append(migration.name)
        except psycopg.Error as exc:
            raise StoreError(f"migration {migration.name!r} failed: {exc}") from exc
    return done


class PgWakeListener(WakeRouter):
    """This process's doorbell: one ``LISTEN`` connection, read by one thread."""

    def __init__(self, dsn: str, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute(f"LISTEN {WAKE_CHANNEL}")
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name="baton-pg-listen", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while not self._closed.is_set():
                # A blocking wait bounded at 0.5 s so close() is noticed; not a poll.
                for note in self._conn.notifies(timeout=0.5):
                    self.wake_threadsafe([note.payload])
        except psycopg.Error:
            if not self._closed.is_set():
                _log.warning("store doorbell connection lost; waiters fall back to re-checks")
        finally:
            self._conn.close()

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


class _Write:
    __slots__ = ("events", "fn", "future", "rows")

    def __init__(
        self,
        fn: Callable[[PgTx], Any],
        future: concurrent.futures.Future[Any],
        rows: Sequence[tuple[Any, ...]],
        events: Sequence[CanonicalEvent],
    ) -> None:
        self.fn = fn
        self.future = future
        self.rows = rows
        self.events = events


class _Flush:
    __slots__ = ("future",)

    def __init__(self, future: concurrent.futures.Future[None]) -> None:
        self.future = future


_SHUTDOWN: Final = object()


class PgStore(TableReads):
    """baton's store on PostgreSQL; open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, dsn: str, *, migrations: Sequence[Migration], batch_max: int) -> None:
        self._dsn = dsn
        self._migrations = tuple(migrations)
        self._batch_max = batch_max
        self._lock = threading.Lock()
        self._queue: deque[Any] = deque()
        self._wake = threading.Event()
        self._last_seq: dict[str, int] = {}
        self._accepting = False
        self._closed = False
        self._failure: StoreError | None = None
        self._subscribers: tuple[Subscription, ...] = ()
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._writer_main, name="baton-pg-writer", daemon=True
        )
        self._readers: list[psycopg.Connection[Any]] = []
        self._readers_lock = threading.Lock()
        self._listener: PgWakeListener | None = None

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        extra_migrations: Sequence[Migration] = (),
        batch_max: int = 2048,
    ) -> PgStore:
        """Connect, apply pending migrations, start the writer; blocks until ready."""
        store = cls(dsn, migrations=(*ALL_MIGRATIONS, *extra_migrations), batch_max=batch_max)
        store._thread.start()
        try:
            store._ready.result()
        except BaseException as exc:
            store._thread.join()
            store._closed = True
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open store {_safe_dsn(dsn)}: {exc}") from exc
        store._accepting = True
        return store

    # ------------------------------------------------------------------ lifecycle

    def close(self, timeout: float = 30.0) -> None:
        """Drain queued writes, stop the writer, close every connection; idempotent."""
        if threading.current_thread() is self._thread:
            raise StoreError("close() called from inside a write function would deadlock")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._accepting:
                self._accepting = False
                self._queue.append(_SHUTDOWN)
        self._wake.set()
        self._thread.join(timeout)
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        for subscription in self._subscribers:
            subscription._end(self._failure)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close_threadsafe()
        if self._thread.is_alive():
            raise StoreError(f"store writer did not stop within {timeout}s")

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> PgStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def path(self) -> None:
        """No file (SQLite's store has one): nothing may launch a per-slot server on it."""
        return None

    @property
    def dsn(self) -> str:
        """Where this store lives (a libpq connection string; may hold a password)."""
        return self._dsn

    @property
    def queued(self) -> int:
        return len(self._queue)

    def _not_accepting(self) -> StoreError:
        if self._failure is not None:
            err = StoreError(f"store failed: {self._failure}")
            err.__cause__ = self._failure
            return err
        return StoreError("store is closed")

    # -------------------------------------------------------------------- appends

    def append(self, event: CanonicalEvent) -> None:
        """Queue ``event`` for the writer; durable after ``flush()`` (as on SQLite)."""
        self.append_all((event,))

    def append_all(self, events: Sequence[CanonicalEvent]) -> None:
        """:meth:`append` of each event in order, under one lock (as on SQLite)."""
        if not self._accepting:
            raise self._not_accepting()
        rows = [event_row(event) for event in events]
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            stage_seqs(events, self._last_seq, self._load_last_seq)
            keep = bool(self._subscribers)
            pairs = zip(rows, events, strict=True)
            self._queue.extend((row, event if keep else None) for row, event in pairs)
        self._wake.set()

    async def append_async(self, event: CanonicalEvent) -> None:
        self.append(event)

    async def room(self) -> None:
        """The queue is unbounded here (the writer drains it per transaction)."""

    def _load_last_seq(self, run_id: str) -> int:
        def load(tx: Tx) -> tuple[Any, Any]:
            row = tx.one(
                "SELECT (SELECT 1 FROM runs WHERE run_id = ?),"
                " (SELECT max(seq) FROM events WHERE run_id = ?)",
                (run_id, run_id),
            )
            assert row is not None
            return row[0], row[1]

        exists, last = self.read_tx(load)
        if exists is None:
            raise StoreError(f"unknown run {run_id!r}: create_run() first")
        return int(last or 0)

    def _enqueue(self, item: Any) -> None:
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            self._queue.append(item)
        self._wake.set()

    def _submit_flush(self) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._enqueue(_Flush(future))
        return future

    async def flush(self) -> None:
        """Return once everything appended before this call is committed."""
        await asyncio.wrap_future(self._submit_flush())

    def flush_sync(self, timeout: float | None = None) -> None:
        self._not_on_writer("flush_sync()")
        try:
            self._submit_flush().result(timeout)
        except TimeoutError as exc:
            raise StoreError(f"flush did not complete within {timeout}s") from exc

    def _submit_tx(
        self, fn: Callable[[Tx], T], events: Sequence[CanonicalEvent]
    ) -> concurrent.futures.Future[T]:
        rows = [event_row(e) for e in events]
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            stage_seqs(events, self._last_seq, self._load_last_seq)
            self._queue.append(_Write(fn, future, rows, tuple(events)))
        self._wake.set()
        return future

    async def write(self, fn: Callable[[Tx], T], *, events: Sequence[CanonicalEvent] = ()) -> T:
        """Run ``fn(tx)`` and insert ``events`` in one transaction; return ``fn``'s result."""
        return await asyncio.wrap_future(self._submit_tx(fn, events))

    def write_sync(
        self,
        fn: Callable[[Tx], T],
        *,
        events: Sequence[CanonicalEvent] = (),
        timeout: float | None = None,
    ) -> T:
        self._not_on_writer("write_sync()")
        return self._submit_tx(fn, events).result(timeout)

    def _not_on_writer(self, what: str) -> None:
        if threading.current_thread() is self._thread:
            raise StoreError(f"{what} called from inside a write function would deadlock")

    # ---------------------------------------------------------------------- reads

    def _reader(self) -> psycopg.Connection[Any]:
        with self._readers_lock:
            if self._closed:
                raise StoreError("store is closed")
            if self._readers:
                return self._readers.pop()
        try:
            return psycopg.connect(self._dsn, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open a read connection: {exc}") from exc

    def _release(self, conn: psycopg.Connection[Any]) -> None:
        with self._readers_lock:
            if not self._closed and len(self._readers) < 4 and not conn.closed:
                self._readers.append(conn)
                return
        conn.close()

    def read_tx(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn(tx)`` on a read-only snapshot (blocking; call from a worker thread)."""
        if self._closed:
            raise StoreError("store is closed")
        conn = self._reader()
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                return fn(PgTx(conn, readonly=True))
            finally:
                conn.execute("ROLLBACK")
        except psycopg.OperationalError as exc:
            conn.close()
            raise StoreError(f"store read failed: {exc}") from exc
        finally:
            self._release(conn)

    async def aread(self, fn: Callable[[Tx], T]) -> T:
        return await asyncio.to_thread(self.read_tx, fn)

    # ------------------------------------------------------------ runs & sessions

    def create_run(self, run: RunRecord) -> None:
        try:
            row = run_to_row(run)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"run {run.run_id!r}: meta is not JSON: {exc}") from exc
        try:
            self.write_sync(lambda tx: tx.execute(INSERT_RUN, row))
        except StoreConflict as exc:
            raise StoreError(f"cannot create run {run.run_id!r}: {exc}") from exc
        with self._lock:
            self._last_seq.setdefault(run.run_id, 0)

    def finish_run(
        self, run_id: str, status: str, ended_at: str, *, if_running: bool = False
    ) -> None:
        """Move a running run to a terminal status (as on SQLite, ``if_running`` too)."""
        self.write_sync(
            lambda tx: finish_run_tx(tx, run_id, status, ended_at, if_running=if_running)
        )

    def upsert_session(self, session: SessionRecord) -> None:
        try:
            row = session_to_row(session)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"session {session.session_id!r}: state is not JSON: {exc}") from exc
        try:
            self.write_sync(lambda tx: tx.execute(UPSERT_SESSION, row))
        except StoreConflict as exc:
            raise StoreError(f"cannot save session {session.session_id!r}: {exc}") from exc

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """:class:`TableReads`' one hook: a read transaction of its own."""
        return self.read_tx(lambda tx: tx.all(sql, params))

    # ----------------------------------------------------- subscriptions, wake-ups

    def subscribe(
        self, run_id: str | None = None, *, max_backlog: int = 10000, after_seq: int | None = None
    ) -> Subscription:
        subscription = Subscription(
            run_id=run_id,
            max_backlog=max_backlog,
            after_seq=after_seq,
            read_page=self._event_page,
            barrier=self.flush,
            on_close=self._unsubscribe,
        )
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            self._subscribers = (*self._subscribers, subscription)
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers = tuple(s for s in self._subscribers if s is not subscription)

    async def listener(self) -> PgWakeListener:
        """This process's LISTEN doorbell on the running loop (one per store and loop)."""
        if self._closed:
            raise StoreError("store is closed")
        loop = asyncio.get_running_loop()
        if self._listener is not None and self._listener.loop is not loop:
            self._listener.close()
            self._listener = None
        if self._listener is None:
            self._listener = await asyncio.to_thread(PgWakeListener, self._dsn, loop)
        return self._listener

    def ring(self, topics: Sequence[str]) -> None:
        """Ring topics outside a write (every host's listeners hear it)."""
        if not topics:
            return
        conn = self._reader()
        try:
            for topic in topics:
                conn.execute("SELECT pg_notify(%s, %s)", (WAKE_CHANNEL, topic))
        finally:
            self._release(conn)

    # ---------------------------------------------------------------- writer thread

    def _writer_main(self) -> None:
        try:
            conn = psycopg.connect(self._dsn, autocommit=True)
        except BaseException as exc:
            self._ready.set_exception(exc)
            return
        try:
            try:
                apply_pg_migrations(conn, self._migrations)
            except BaseException as exc:
                self._ready.set_exception(exc)
                return
            self._ready.set_result(None)
            try:
                self._serve(conn)
            except BaseException as exc:
                self._fail(exc)
            else:
                for subscription in self._subscribers:
                    subscription._end(None)
        finally:
            conn.close()

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        queue = self._queue
        while True:
            if not queue:
                self._wake.clear()
                if not queue:
                    self._wake.wait()
                    continue
            items = [queue.popleft() for _ in range(min(len(queue), self._batch_max))]
            if self._write_batch(conn, items):
                return

    def _write_batch(self, conn: psycopg.Connection[Any], items: list[Any]) -> bool:
        """One transaction for the batch; futures, subscribers and NOTIFY after COMMIT."""
        stop = False
        rows: list[tuple[Any, ...]] = []
        publish: list[CanonicalEvent] = []
        outcomes: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        flushes: list[concurrent.futures.Future[None]] = []
        work: list[Any] = []
        for item in items:
            if item is _SHUTDOWN:
                stop = True
            elif type(item) is _Flush:
                if item.future.set_running_or_notify_cancel():
                    flushes.append(item.future)
            elif type(item) is _Write:
                if item.future.set_running_or_notify_cancel():
                    work.append(item)
            else:
                work.append(item)
        if work:
            try:
                with conn.transaction():
                    topics: list[str] = []
                    with conn.cursor() as cur:
                        cur.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
                        for item in work:
                            if type(item) is not _Write:
                                rows.append(item[0])
                                if item[1] is not None:
                                    publish.append(item[1])
                                continue
                            if rows:  # events queued before this write go in first
                                cur.executemany(_INSERT_EVENT, rows)
                                rows = []
                            outcome = self._run_write(conn, cur, item, topics)
                            outcomes.append(outcome)
                            if outcome[2] is None:
                                publish.extend(item.events)
                        if rows:
                            cur.executemany(_INSERT_EVENT, rows)
                        for topic in dict.fromkeys(topics):
                            cur.execute("SELECT pg_notify(%s, %s)", (WAKE_CHANNEL, topic))
            except BaseException as exc:
                err = StoreError(f"store write failed, batch of {len(items)} rolled back: {exc}")
                err.__cause__ = exc
                self._fail(err)
                for future, _, _ in outcomes:
                    if not future.done():
                        future.set_exception(err)
                for future in flushes:
                    future.set_exception(err)
                for item in work:
                    if type(item) is _Write and not item.future.done():
                        item.future.set_exception(err)
                raise err from exc
        try:
            if publish and self._subscribers:
                for subscription in self._subscribers:
                    subscription._publish(publish)
        finally:
            for future, result, error in outcomes:
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)
            for flush in flushes:
                flush.set_result(None)
        return stop

    @staticmethod
    def _run_write(
        conn: psycopg.Connection[Any], cur: psycopg.Cursor[Any], write: _Write, topics: list[str]
    ) -> tuple[concurrent.futures.Future[Any], Any, BaseException | None]:
        """One write and its events under a savepoint; its failure stays its own."""
        tx = PgTx(conn)
        try:
            with conn.transaction():  # a SAVEPOINT inside the batch's transaction
                result = write.fn(tx)
                if write.rows:
                    cur.executemany(_INSERT_EVENT, list(write.rows))
        except Exception as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise  # the connection itself failed: the whole batch is lost
            return write.future, None, exc
        topics.extend(tx.topics)
        return write.future, result, None

    def _fail(self, exc: BaseException) -> None:
        if exc is self._failure:
            return
        err = exc if isinstance(exc, StoreError) else StoreError(f"store writer failed: {exc!r}")
        _log.error("store %s failed; refusing further writes", _safe_dsn(self._dsn), exc_info=err)
        with self._lock:
            if self._failure is None:
                self._failure = err
            self._accepting = False
            pending = list(self._queue)
            self._queue.clear()
        for item in pending:
            if isinstance(item, _Write | _Flush) and item.future.set_running_or_notify_cancel():
                item.future.set_exception(err)
        for subscription in self._subscribers:
            subscription._end(err)


def _safe_dsn(dsn: str) -> str:
    """A DSN fit for messages: no password."""
    return " ".join(p for p in dsn.split() if not p.lower().startswith("password"))
