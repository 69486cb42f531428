"""The embedded durable store: one SQLite file in WAL mode, one writer thread.

Following datasette's design (see ``design/STYLE.md``):

* **One writer.** Every write (event appends, run/session rows, other modules'
  ``execute_write`` functions) is queued for a single thread that owns the only
  write connection and commits each batch as one transaction: ``BEGIN IMMEDIATE
  ... COMMIT``, or, for a batch of events only, a single multi-row INSERT that
  SQLite runs as its own (equivalent) transaction. Batching is what lets the log
  keep up with a flooding agent: the fsync, the lock and the GIL hand-offs are
  paid per batch, not per event.
* **Effects after commit.** Flush waiters, ``execute_write`` futures and
  subscribers are only woken after COMMIT returned, so nobody ever observes (or
  acts on) a write that could still roll back.
* **Acknowledged = flush() returned.** ``append`` only enqueues; an event is
  durable once a later ``flush()`` has returned. A write failure is never
  swallowed: it fails the batch's futures, makes the store refuse further writes
  and is raised by the next ``append``/``flush``/``close``.
* **Readers never block the writer.** Reads use their own read-only connections
  (WAL readers see the last committed snapshot), from any thread or process.
* **A state change and its event commit together.** :meth:`Store.write` runs a
  repository function over a portable :class:`~baton.store.tx.Tx` and inserts
  the canonical events that describe it in the *same* transaction; the wake-up
  topics it named are rung for every process only after COMMIT
  (:mod:`baton.store.wake`). A function that raises rolls back alone (a
  savepoint), and its events are dropped with it: the run's seq then has a gap,
  never a lie.

Several processes may open the same file (a daemon writes while the CLI reads,
or a second process records human requests): each has its own writer thread;
``BEGIN IMMEDIATE`` plus ``busy_timeout`` serialize them.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import itertools
import logging
import os
import sqlite3
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

from baton import crashpoints
from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store._readers import ReadPool
from baton.store.migrations import CORE_MIGRATIONS, Migration, apply_migrations
from baton.store.records import (
    TERMINAL_RUN_STATUSES,
    RunRecord,
    SessionRecord,
    run_from_row,
    run_to_row,
    session_from_row,
    session_to_row,
)
from baton.store.requests_sql import REQUESTS_MIGRATIONS
from baton.store.services_sql import SERVICES_MIGRATIONS
from baton.store.subscription import Subscription
from baton.store.team_sql import TEAM_MIGRATIONS
from baton.store.tx import Tx
from baton.store.wake import WakeChannel, WakeListener, wake_dir_for
from baton.store.web_sessions import WEB_MIGRATIONS

__all__ = ["Store"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

ALL_MIGRATIONS: Final = (
    *CORE_MIGRATIONS,
    *REQUESTS_MIGRATIONS,
    *TEAM_MIGRATIONS,
    *SERVICES_MIGRATIONS,
    *WEB_MIGRATIONS,
)
"""Every table of the store, in order; :meth:`Store.open` applies what is missing."""

DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long one ``BEGIN IMMEDIATE`` waits for another process's writer."""
_BEGIN_ATTEMPTS: Final = 3
_PAGE_SIZE: Final = 8192
"""Set on a new file only; stored lines are a few hundred bytes, and 8 KiB pages
measured ~20% faster ingest than the 4 KiB default."""
_JOURNAL_SIZE_LIMIT: Final = 64 * 1024 * 1024
"""Truncate the WAL back to this after a checkpoint, so a burst does not leave a huge file."""
_READ_PAGE: Final = 1000
_MAX_ROWS_PER_INSERT: Final = 2048 if sqlite3.sqlite_version_info >= (3, 32, 0) else 128
"""Rows per INSERT statement: 7 parameters each, under SQLITE_MAX_VARIABLE_NUMBER
(32766 since SQLite 3.32, 999 before)."""


def _insert_sql(rows: int) -> str:
    """An INSERT of ``rows`` rows padded with all-NULL rows that the WHERE drops."""
    values = ",".join(["(?,?,?,?,?,?,?)"] * rows)  # placeholders only, never data
    return (
        "INSERT INTO events (run_id, seq, type, session_id, turn_id, ts, json)"  # noqa: S608
        f" SELECT * FROM (VALUES {values}) WHERE column1 IS NOT NULL"
    )


_INSERT_SQL: Final = {
    size: _insert_sql(size) for size in (1 << k for k in range(_MAX_ROWS_PER_INSERT.bit_length()))
}
"""One statement per power of two: a handful of statements stay prepared in the
cache, and any batch up to 2048 events is a single sqlite3 call."""
_PADDING: Final = (None,) * (7 * _MAX_ROWS_PER_INSERT)

# Column lists match records.run_to_row/run_from_row and session_to_row/session_from_row.
_SELECT_RUNS: Final = (
    "SELECT run_id, kind, agent, cwd, status, created_at, ended_at, meta FROM runs"
)
_INSERT_RUN: Final = (
    "INSERT INTO runs (run_id, kind, agent, cwd, status, created_at, ended_at, meta)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_SESSIONS: Final = (
    "SELECT session_id, agent, agent_session_id, cwd, identity_key,"
    " created_at, updated_at, role, run_id, state FROM sessions"
)
_UPSERT_SESSION: Final = (
    "INSERT INTO sessions (session_id, agent, agent_session_id, cwd, identity_key,"
    " created_at, updated_at, role, run_id, state)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (session_id) DO UPDATE SET"
    " agent = excluded.agent, agent_session_id = excluded.agent_session_id,"
    " cwd = excluded.cwd, identity_key = excluded.identity_key,"
    " updated_at = excluded.updated_at, role = excluded.role,"
    " run_id = excluded.run_id, state = excluded.state"
)
"""Keeps ``created_at`` of an existing row."""

_Row = tuple[str, int, str, str | None, str | None, str, str]


class _Write:
    """A function to run on the writer thread, inside the batch's transaction.

    ``tx`` functions get a :class:`Tx` (repositories); the others the raw
    connection (the store's own rows). ``rows``/``events`` are inserted in the
    same savepoint after the function succeeded.
    """

    __slots__ = ("events", "fn", "future", "rows", "tx")

    def __init__(
        self,
        fn: Callable[[Any], Any],
        future: concurrent.futures.Future[Any],
        *,
        tx: bool = False,
        rows: Sequence[_Row] = (),
        events: Sequence[CanonicalEvent] = (),
    ) -> None:
        self.fn = fn
        self.future = future
        self.tx = tx
        self.rows = rows
        self.events = events


class _Flush:
    """Resolved once everything queued before it is committed."""

    __slots__ = ("future",)

    def __init__(self, future: concurrent.futures.Future[None]) -> None:
        self.future = future


class _Shutdown:
    """Queued last by ``close()``: the writer drains up to it, then stops."""


_SHUTDOWN: Final = _Shutdown()

_Item = tuple[_Row, CanonicalEvent | None] | _Write | _Flush | _Shutdown
"""An event is queued as its row, plus the model only while someone subscribes."""


def _is_busy(exc: sqlite3.Error) -> bool:
    return (exc.sqlite_errorcode & 0xFF) == sqlite3.SQLITE_BUSY


def _wake_future(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _close_at_exit(ref: weakref.ref[Store]) -> None:
    """Drain a store nobody closed, so queued events are not lost on a clean exit."""
    store = ref()
    if store is not None:
        store.close()


def _prepare_files(path: Path) -> None:
    """Create the parent directory 0700 and the database file 0600.

    SQLite creates ``-wal``/``-shm`` with the database file's permissions, so
    creating the file ourselves first is what keeps all three private.
    """
    try:
        if not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create store file {path}: {exc}") from exc
    os.close(fd)


class Store:
    """baton's durable log of runs, sessions and canonical events.

    Open with :meth:`Store.open`; close with :meth:`close` (or ``with``).
    """

    def __init__(
        self,
        path: Path,
        *,
        migrations: Sequence[Migration],
        batch_max: int,
        queue_max: int,
        busy_timeout_ms: int,
    ) -> None:
        """Use :meth:`open`; this only sets fields and starts nothing."""
        self._path = path
        self._migrations = tuple(migrations)
        self._batch_max = batch_max
        self._queue_max = queue_max
        self._busy_timeout_ms = busy_timeout_ms
        self._pool = ReadPool(path, busy_timeout_ms=busy_timeout_ms)
        # Producer/writer shared state. ``_lock`` orders seq checks with enqueueing
        # and guards the lifecycle flags; the deque itself is thread-safe.
        self._lock = threading.Lock()
        self._queue: deque[_Item] = deque()
        self._wake = threading.Event()
        self._last_seq: dict[str, int] = {}
        self._accepting = False
        self._closed = False
        self._failure: StoreError | None = None
        self._failure_surfaced = False
        self._subscribers: tuple[Subscription, ...] = ()
        self._space_lock = threading.Lock()
        self._space_waiters: list[asyncio.Future[None]] = []
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._writer_main, name=f"baton-store-writer:{path.name}", daemon=True
        )
        self._atexit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        self._wake_channel = WakeChannel(wake_dir_for(path))
        self._listener: WakeListener | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        extra_migrations: Sequence[Migration] = (),
        batch_max: int = 2048,
        queue_max: int = 65536,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> Store:
        """Open (creating if needed) the store at ``path`` and apply pending migrations.

        Blocks until the writer thread is up and the schema is current.
        """
        if batch_max < 1 or queue_max < 1:
            raise ValueError("batch_max and queue_max must be at least 1")
        path = Path(path).absolute()
        _prepare_files(path)
        store = cls(
            path,
            migrations=(*ALL_MIGRATIONS, *extra_migrations),
            batch_max=batch_max,
            queue_max=queue_max,
            busy_timeout_ms=busy_timeout_ms,
        )
        store._start()
        return store

    def _start(self) -> None:
        self._thread.start()
        try:
            self._ready.result()
        except BaseException as exc:
            self._thread.join()
            self._pool.close()
            self._closed = True
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open store {self._path}: {exc}") from exc
        with self._lock:
            self._accepting = True
        atexit.register(self._atexit_hook)

    def close(self, timeout: float = 30.0) -> None:
        """Drain queued writes, stop the writer and release every connection.

        Idempotent; afterwards every other method raises :class:`StoreError`.
        Raises :class:`StoreError` if the writer does not stop within
        ``timeout`` seconds, or if it failed and nobody has been told yet.
        """
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
        stuck = self._thread.is_alive()
        self._pool.close()
        self._wake_space_waiters()
        for subscription in self._subscribers:
            subscription._end(self._failure)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close_threadsafe()
        atexit.unregister(self._atexit_hook)
        if stuck:
            raise StoreError(
                f"store writer did not stop within {timeout}s; queued writes may be lost"
            )
        if self._failure is not None and not self._failure_surfaced:
            self._failure_surfaced = True
            raise StoreError(f"store failed: {self._failure}") from self._failure

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop while the queue drains."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def queued(self) -> int:
        """Items waiting for the writer (events, writes, flush markers)."""
        return len(self._queue)

    def _not_accepting(self) -> StoreError:
        if self._failure is not None:
            self._failure_surfaced = True
            err = StoreError(f"store failed: {self._failure}")
            err.__cause__ = self._failure
            return err
        return StoreError("store is closed")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    # -------------------------------------------------------------------- appends

    def append(self, event: CanonicalEvent) -> None:
        """Queue ``event`` for the writer without blocking; durable after ``flush()``.

        Serializes here, on the producer, so an event that cannot be stored is
        refused to its producer instead of failing a whole batch later. Raises
        :class:`StoreError` if the seq does not strictly increase for its run,
        the run is unknown, the event cannot be serialized, or the store is
        closed or failed. Never blocks and never drops: past ``queue_max`` the
        queue grows; producers that can await should use :meth:`append_async`.
        """
        if not self._accepting:
            raise self._not_accepting()
        row = _event_row(event)
        run_id = event.run_id
        seq = event.seq
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            last = self._last_seq.get(run_id)
            if last is None:
                last = self._load_last_seq(run_id)
            if seq <= last:
                raise StoreError(
                    f"run {run_id!r}: seq {seq} does not follow {last} "
                    "(seqs must strictly increase)"
                )
            self._last_seq[run_id] = seq
            # Keep the model only for subscribers: otherwise it can die right here,
            # and a queue of plain str/int tuples is nearly free for the GC to scan
            # (measurably faster ingest than keeping every queued model alive).
            self._queue.append((row, event if self._subscribers else None))
        if not self._wake.is_set():
            self._wake.set()

    async def append_async(self, event: CanonicalEvent) -> None:
        """:meth:`append`, but wait while ``queue_max`` items are queued (backpressure)."""
        while len(self._queue) >= self._queue_max and self._accepting:
            await self._wait_for_space()
        self.append(event)

    async def _wait_for_space(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._space_lock:
            self._space_waiters.append(waiter)
        # Re-check after registering: the writer may have drained in between.
        if len(self._queue) < self._queue_max or not self._accepting:
            _wake_future(waiter)
        try:
            await waiter
        finally:
            with self._space_lock:
                if waiter in self._space_waiters:
                    self._space_waiters.remove(waiter)

    def _wake_space_waiters(self) -> None:
        with self._space_lock:
            waiters, self._space_waiters = self._space_waiters, []
        for waiter in waiters:
            try:
                waiter.get_loop().call_soon_threadsafe(_wake_future, waiter)
            except RuntimeError:
                continue  # that producer's event loop is closed; nobody to wake

    def _load_last_seq(self, run_id: str) -> int:
        """Seed the per-run seq cache (first append for a run in this process)."""
        rows = self._fetch_all(
            "SELECT (SELECT 1 FROM runs WHERE run_id = ?),"
            " (SELECT max(seq) FROM events WHERE run_id = ?)",
            (run_id, run_id),
        )
        exists, last = rows[0]
        if exists is None:
            raise StoreError(f"unknown run {run_id!r}: create_run() first")
        return int(last or 0)

    # -------------------------------------------------------------- flush & writes

    def _enqueue(self, item: _Write | _Flush) -> None:
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
        """Return once everything appended before this call is committed.

        This is the acknowledgement point: what ``flush()`` covered survives a
        crash of this process or of the machine. Raises :class:`StoreError` if
        any of it could not be written.
        """
        await asyncio.wrap_future(self._submit_flush())

    def flush_sync(self, timeout: float | None = None) -> None:
        """:meth:`flush` for synchronous callers (not from a write function)."""
        self._not_on_writer("flush_sync()")
        try:
            self._submit_flush().result(timeout)
        except TimeoutError as exc:
            raise StoreError(f"flush did not complete within {timeout}s") from exc

    def execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> concurrent.futures.Future[T]:
        """Run ``fn(conn)`` on the writer thread, in order with queued events.

        ``fn`` runs inside the batch's transaction under a savepoint: if it
        raises, only its own changes roll back and the future carries its
        exception unchanged. It must not COMMIT/ROLLBACK itself. The future
        resolves only after the batch is committed.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._enqueue(_Write(fn, future))
        return future

    def _submit_tx(
        self, fn: Callable[[Tx], T], events: Sequence[CanonicalEvent]
    ) -> concurrent.futures.Future[T]:
        rows = [_event_row(e) for e in events]
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        item = _Write(fn, future, tx=True, rows=rows, events=tuple(events))
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            staged: dict[str, int] = {}
            for event in events:
                last = staged.get(event.run_id)
                if last is None:
                    last = self._last_seq.get(event.run_id)
                if last is None:
                    last = self._load_last_seq(event.run_id)
                if event.seq <= last:
                    raise StoreError(
                        f"run {event.run_id!r}: seq {event.seq} does not follow {last} "
                        "(seqs must strictly increase)"
                    )
                staged[event.run_id] = event.seq
            self._last_seq.update(staged)
            self._queue.append(item)
        self._wake.set()
        return future

    async def write(self, fn: Callable[[Tx], T], *, events: Sequence[CanonicalEvent] = ()) -> T:
        """Run ``fn(tx)`` and insert ``events`` in one transaction; return ``fn``'s result.

        Returns only after COMMIT. If ``fn`` raises, its changes roll back, its
        events are not stored, and the exception is raised here unchanged.
        Topics ``fn`` named with :meth:`Tx.wake` are rung after COMMIT.
        """
        return await asyncio.wrap_future(self._submit_tx(fn, events))

    def write_sync(
        self,
        fn: Callable[[Tx], T],
        *,
        events: Sequence[CanonicalEvent] = (),
        timeout: float | None = None,
    ) -> T:
        """:meth:`write` for synchronous callers (worker threads, not a write function)."""
        self._not_on_writer("write_sync()")
        return self._submit_tx(fn, events).result(timeout)

    def read_tx(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn(tx)`` on a read-only snapshot (blocking; call from a worker thread)."""
        return self.read(lambda conn: fn(Tx(conn, readonly=True)))

    async def aread(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`read_tx` without blocking the event loop."""
        return await asyncio.to_thread(self.read_tx, fn)

    # -------------------------------------------------------------------- wake-ups

    @property
    def wake_channel(self) -> WakeChannel:
        """The store's cross-process doorbell (see :mod:`baton.store.wake`)."""
        return self._wake_channel

    async def listener(self) -> WakeListener:
        """This process's wake-up listener on the running loop (one per store and loop)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        if self._listener is not None and self._listener.loop is not loop:
            self._listener.close()
            self._listener = None
        if self._listener is None:
            self._listener = await self._wake_channel.listen()
        return self._listener

    def ring(self, topics: Sequence[str]) -> None:
        """Wake local waiters, then every other listening process (after a commit)."""
        if not topics:
            return
        listener = self._listener
        if listener is not None:
            listener.wake_threadsafe(topics)
        self._wake_channel.ring(topics, skip=listener.path if listener is not None else None)

    def _not_on_writer(self, what: str) -> None:
        if threading.current_thread() is self._thread:
            raise StoreError(f"{what} called from inside a write function would deadlock")

    def _write_and_wait(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._not_on_writer("a synchronous store write")
        return self.execute_write(fn).result()

    def create_run(self, run: RunRecord) -> None:
        """Insert a new run row; returns once committed."""
        try:
            row = run_to_row(run)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"run {run.run_id!r}: meta is not JSON: {exc}") from exc

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(_INSERT_RUN, row)

        try:
            self._write_and_wait(insert)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot create run {run.run_id!r}: {exc}") from exc
        with self._lock:
            self._last_seq.setdefault(run.run_id, 0)

    def finish_run(self, run_id: str, status: str, ended_at: str) -> None:
        """Move a running run to a terminal status; repeating the same status is a no-op."""
        if status not in TERMINAL_RUN_STATUSES:
            raise StoreError(f"{status!r} is not a terminal run status")

        def update(conn: sqlite3.Connection) -> None:
            finish_run_tx(Tx(conn), run_id, status, ended_at)

        try:
            self._write_and_wait(update)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot finish run {run_id!r}: {exc}") from exc

    def upsert_session(self, session: SessionRecord) -> None:
        """Insert or update a session row (``created_at`` of an existing row is kept)."""
        try:
            row = session_to_row(session)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"session {session.session_id!r}: state is not JSON: {exc}") from exc

        def upsert(conn: sqlite3.Connection) -> None:
            conn.execute(_UPSERT_SESSION, row)

        try:
            self._write_and_wait(upsert)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot save session {session.session_id!r}: {exc}") from exc

    # ---------------------------------------------------------------------- reads

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a read-only connection, in one consistent snapshot."""
        self._check_open()
        conn = self._pool.acquire()
        try:
            conn.execute("BEGIN")
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        finally:
            self._pool.release(conn)

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        self._check_open()
        conn = self._pool.acquire()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"store read failed: {exc}") from exc
        finally:
            self._pool.release(conn)

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Most recent runs first."""
        rows = self._fetch_all(
            _SELECT_RUNS + " ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (limit,),
        )
        return [run_from_row(row) for row in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._fetch_all(_SELECT_RUNS + " WHERE run_id = ?", (run_id,))
        return run_from_row(rows[0]) if rows else None

    def last_seq(self, run_id: str) -> int:
        """The highest *committed* seq of the run (0 if none)."""
        rows = self._fetch_all("SELECT max(seq) FROM events WHERE run_id = ?", (run_id,))
        return int(rows[0][0] or 0)

    def iter_event_json(
        self, run_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[str]:
        """The stored NDJSON lines of a run, by seq, exactly as committed.

        Reads in pages, each on a briefly checked-out connection, so an
        abandoned iterator holds no connection or snapshot.
        """
        cursor = after_seq
        remaining = limit
        while remaining is None or remaining > 0:
            page = _READ_PAGE if remaining is None else min(_READ_PAGE, remaining)
            rows = self._fetch_all(
                "SELECT seq, json FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, cursor, page),
            )
            for _, line in rows:
                yield line
            if len(rows) < page:
                return
            cursor = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)

    def iter_events(
        self, run_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[CanonicalEvent]:
        """The committed events of a run, by seq, parsed back into models."""
        for line in self.iter_event_json(run_id, after_seq=after_seq, limit=limit):
            yield _parse_event(line)

    def _event_page(self, run_id: str, after_seq: int, limit: int) -> list[CanonicalEvent]:
        return list(self.iter_events(run_id, after_seq=after_seq, limit=limit))

    def get_session(self, session_id: str) -> SessionRecord | None:
        rows = self._fetch_all(_SELECT_SESSIONS + " WHERE session_id = ?", (session_id,))
        return session_from_row(rows[0]) if rows else None

    def find_session(self, identity_key: str) -> SessionRecord | None:
        rows = self._fetch_all(_SELECT_SESSIONS + " WHERE identity_key = ?", (identity_key,))
        return session_from_row(rows[0]) if rows else None

    def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        rows = self._fetch_all(
            _SELECT_SESSIONS + " ORDER BY updated_at DESC, session_id DESC LIMIT ?",
            (limit,),
        )
        return [session_from_row(row) for row in rows]

    # --------------------------------------------------------------- subscriptions

    def subscribe(
        self,
        run_id: str | None = None,
        *,
        max_backlog: int = 10000,
        after_seq: int | None = None,
    ) -> Subscription:
        """Tail committed events of one run (or all runs) as an async iterator.

        Delivers the events appended after this call, once committed; with
        ``after_seq`` (one run only) it first replays that run's events after
        that seq from the store, then continues live without a gap or duplicate
        (resuming an SSE stream).
        """
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

    # ---------------------------------------------------------------- writer thread

    def _connect_writer(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, isolation_level=None, timeout=self._busy_timeout_ms / 1000
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
            mode = self._retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(f"cannot put {self._path} in WAL mode (got {mode!r})")
            # synchronous=FULL: in WAL mode this fsyncs the WAL on every COMMIT,
            # and since a commit is a whole batch the cost is one fsync per batch.
            # NORMAL would fsync only at checkpoints: a committed batch then
            # survives a crash of *this process* (the OS page cache still has it)
            # but can vanish on a power loss or kernel crash. flush() returning is
            # our promise that the data is durable, so NORMAL would break
            # "nothing acknowledged is lost on a crash" for machine crashes.
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA journal_size_limit = {_JOURNAL_SIZE_LIMIT}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _retry_busy(self, fn: Callable[[], T]) -> T:
        """Retry a lock-taking statement that failed with SQLITE_BUSY after busy_timeout."""
        for attempt in range(_BEGIN_ATTEMPTS):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == _BEGIN_ATTEMPTS - 1:
                    raise
                _log.warning("store %s is busy (another writer); retrying", self._path)
        raise AssertionError("unreachable")

    def _writer_main(self) -> None:
        try:
            conn = self._connect_writer()
        except BaseException as exc:
            self._ready.set_exception(exc)
            return
        try:
            try:
                apply_migrations(conn, self._migrations)
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

    def _serve(self, conn: sqlite3.Connection) -> None:
        """Drain the queue in batches of up to ``batch_max`` until the shutdown marker."""
        queue = self._queue
        wake = self._wake
        pop = queue.popleft
        batch_max = self._batch_max
        while True:
            if not queue:
                # Clear, then re-check: an append after the clear sets the event
                # again, an append before it is seen by the re-check.
                wake.clear()
                if not queue:
                    wake.wait()
                    continue
            items = [pop() for _ in range(min(len(queue), batch_max))]
            if self._space_waiters:
                self._wake_space_waiters()
            if self._write_batch(conn, items):
                return

    def _write_batch(self, conn: sqlite3.Connection, items: list[_Item]) -> bool:
        """Commit one batch, then resolve its futures, publish and ring; True at shutdown."""
        segments: list[list[_Row] | _Write] = []
        rows: list[_Row] | None = None
        publish = bool(self._subscribers)
        # Events to publish, per segment, in queue order (a failed write's are dropped).
        segment_events: list[list[CanonicalEvent]] = []
        pending: list[CanonicalEvent] | None = None
        claimed: list[concurrent.futures.Future[Any]] = []
        flushes: list[concurrent.futures.Future[None]] = []
        stop = False
        for item in items:
            if type(item) is tuple:
                if rows is None:
                    rows = []
                    pending = []
                    segments.append(rows)
                    segment_events.append(pending)
                rows.append(item[0])
                if publish and item[1] is not None:
                    assert pending is not None
                    pending.append(item[1])
            elif type(item) is _Write:
                rows = None
                # Claiming makes the future RUNNING, so a late cancel() cannot race
                # with set_result below; a write cancelled before this never runs.
                if item.future.set_running_or_notify_cancel():
                    segments.append(item)
                    segment_events.append(list(item.events) if publish else [])
                    claimed.append(item.future)
            elif type(item) is _Flush:
                if item.future.set_running_or_notify_cancel():
                    flushes.append(item.future)
            else:
                stop = True
        outcomes: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        topics: list[str] = []
        if segments:
            try:
                only = segments[0] if len(segments) == 1 else None
                if type(only) is list and len(only) <= _MAX_ROWS_PER_INSERT:
                    # Events only (the flood case): one INSERT statement in autocommit
                    # mode is its own transaction, taking the write lock exactly as
                    # BEGIN IMMEDIATE does (busy handler included), atomic, fsynced
                    # at its implicit COMMIT, and one sqlite3 call instead of three.
                    self._retry_busy(lambda: self._insert_rows(conn, only))
                else:
                    self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
                    for index, segment in enumerate(segments):
                        if type(segment) is list:
                            self._insert_rows(conn, segment)
                        else:
                            assert isinstance(segment, _Write)
                            outcome = self._run_write(conn, segment, topics)
                            outcomes.append(outcome)
                            if outcome[2] is not None:
                                segment_events[index] = []
                    conn.execute("COMMIT")
            except BaseException as exc:
                err = StoreError(f"store write failed, batch of {len(items)} rolled back: {exc}")
                err.__cause__ = exc
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as rollback_exc:
                        err.add_note(f"rollback also failed: {rollback_exc}")
                # Refuse new writes before anyone waiting on this batch wakes up.
                self._fail(err)
                for future in (*claimed, *flushes):
                    future.set_exception(err)
                    self._failure_surfaced = True
                raise err from exc
        if segments:
            crashpoints.durable_write("store.commit")
        # Committed: only now may anyone observe these writes. Subscribers first,
        # so a returned flush() also means they have been handed the events.
        try:
            events = [e for batch in segment_events for e in batch]
            if events:
                for subscription in self._subscribers:
                    subscription._publish(events)
            if topics:
                try:
                    self.ring(topics)
                except OSError:  # pragma: no cover - a doorbell must never fail a commit
                    _log.exception("store %s: could not ring %s", self._path, topics)
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
    def _insert_rows(conn: sqlite3.Connection, rows: list[_Row]) -> None:
        """Insert with as few statements as possible (one per 2048 rows).

        Each statement step releases and re-takes the GIL, and while the event
        loop is busy every re-take can wait a whole switch interval (5 ms), so
        the number of sqlite3 calls per batch, not the rows, bounds ingest.
        """
        for start in range(0, len(rows), _MAX_ROWS_PER_INSERT):
            chunk = rows[start : start + _MAX_ROWS_PER_INSERT]
            size = 1 << (len(chunk) - 1).bit_length()
            params = list(itertools.chain.from_iterable(chunk))
            params.extend(_PADDING[: 7 * (size - len(chunk))])
            conn.execute(_INSERT_SQL[size], params)

    def _run_write(
        self, conn: sqlite3.Connection, write: _Write, topics: list[str]
    ) -> tuple[concurrent.futures.Future[Any], Any, BaseException | None]:
        """Run one write (and insert its events) under a savepoint; its failure stays its own."""
        conn.execute("SAVEPOINT baton_write")
        tx = Tx(conn) if write.tx else None
        try:
            result = write.fn(tx if tx is not None else conn)
            if write.rows:
                self._insert_rows(conn, list(write.rows))
        except Exception as exc:
            if not conn.in_transaction:
                # SQLite already rolled the whole transaction back (disk full, I/O
                # error...): the batch is lost, not just this function.
                raise
            conn.execute("ROLLBACK TO baton_write")
            conn.execute("RELEASE baton_write")
            return write.future, None, exc
        if not conn.in_transaction:
            raise StoreError("a write function ended the store's transaction itself")
        conn.execute("RELEASE baton_write")
        if tx is not None:
            topics.extend(tx.topics)
        return write.future, result, None

    def _fail(self, exc: BaseException) -> None:
        """The writer cannot go on: refuse new writes, fail everything queued, say so."""
        if exc is self._failure:
            return  # already handled where it happened
        err = exc if isinstance(exc, StoreError) else StoreError(f"store writer failed: {exc!r}")
        if err is not exc:
            err.__cause__ = exc
        _log.error("store %s failed; refusing further writes", self._path, exc_info=err)
        with self._lock:
            if self._failure is None:
                self._failure = err
            self._accepting = False
            pending = list(self._queue)
            self._queue.clear()
        for item in pending:
            if isinstance(item, _Write | _Flush) and item.future.set_running_or_notify_cancel():
                item.future.set_exception(err)
                self._failure_surfaced = True
        self._wake_space_waiters()
        for subscription in self._subscribers:
            subscription._end(err)


def finish_run_tx(tx: Tx, run_id: str, status: str, ended_at: str) -> None:
    """The rule of :meth:`Store.finish_run`, over any backend's :class:`Tx`."""
    if status not in TERMINAL_RUN_STATUSES:
        raise StoreError(f"{status!r} is not a terminal run status")
    current = tx.scalar("SELECT status FROM runs WHERE run_id = ?", (run_id,))
    if current is None:
        raise StoreError(f"unknown run {run_id!r}")
    if current == status:
        return
    if current != "running":
        raise StoreError(f"run {run_id!r} already finished as {current!r}")
    tx.execute(
        "UPDATE runs SET status = ?, ended_at = ? WHERE run_id = ?", (status, ended_at, run_id)
    )


def _event_row(event: CanonicalEvent) -> _Row:
    """The ``events`` row of ``event``, serialized on the producer (refused there if it cannot be)."""
    try:
        line = event.to_json()
    except Exception as exc:
        raise StoreError(
            f"event {event.type} seq {event.seq} of run {event.run_id!r} "
            f"cannot be serialized: {exc}"
        ) from exc
    return (event.run_id, event.seq, event.type, event.session_id, event.turn_id, event.ts, line)


def _parse_event(line: str) -> CanonicalEvent:
    try:
        return CanonicalEvent.model_validate_json(line)
    except ValueError as exc:
        raise StoreError(f"stored event does not parse: {exc}") from exc
