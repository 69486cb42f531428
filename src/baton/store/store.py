"""The embedded durable store: one SQLite file in WAL mode, one writer thread.

Following datasette's design (see ``design/STYLE.md``):

* **One writer, effects after commit.** Every write is queued for a single
  thread that owns the only write connection and commits a batch per
  transaction (:mod:`~baton.store.batch_writer`): the fsync, the lock and the
  GIL hand-offs are paid per batch, not per event, and nobody is woken before
  COMMIT returned.
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
or a second process records human requests, or many ``baton run`` share a
project): each has its own writer thread; ``BEGIN IMMEDIATE`` plus
``busy_timeout`` serialize them, and a writer waits for the lock as long as it
takes (a busy store never fails a write; see
:func:`~baton.store.writer_connection.retry_busy`).

The parts: :mod:`~baton.store.batch_writer` (the queue and its writer thread),
:mod:`~baton.store.writer_connection` (the write connection, the busy wait),
:mod:`~baton.store.event_rows` (events as rows), :mod:`~baton.store.snapshot_reads`
(reads), :mod:`~baton.store.core_tables` (runs, sessions, events read back);
this module is the face that opens, closes, appends, writes and subscribes.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, TypeVar

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store._readers import ReadPool
from baton.store.batch_writer import SHUTDOWN, QueuedFlush, QueuedWrite
from baton.store.core_tables import CoreTables
from baton.store.event_rows import event_row, stage_seqs
from baton.store.grants_sql import GRANTS_MIGRATIONS
from baton.store.migrations import CORE_MIGRATIONS, Migration
from baton.store.notify_sql import NOTIFY_MIGRATIONS
from baton.store.placement_sql import CLUSTER_MIGRATIONS
from baton.store.requests_sql import REQUESTS_MIGRATIONS
from baton.store.services_sql import SERVICES_MIGRATIONS
from baton.store.subscription import Subscription
from baton.store.team_schema import TEAM_MIGRATIONS
from baton.store.tx import Tx
from baton.store.wake import WakeChannel, WakeListener
from baton.store.web_sessions import WEB_MIGRATIONS
from baton.store.writer_connection import DEFAULT_BUSY_TIMEOUT_MS, prepare_files

__all__ = ["ALL_MIGRATIONS", "Store"]

T = TypeVar("T")

ALL_MIGRATIONS: Final = (
    *CORE_MIGRATIONS,
    *REQUESTS_MIGRATIONS,
    *TEAM_MIGRATIONS,
    *SERVICES_MIGRATIONS,
    *WEB_MIGRATIONS,
    *CLUSTER_MIGRATIONS,
    *GRANTS_MIGRATIONS,
    *NOTIFY_MIGRATIONS,
)
"""Every table of the store, in order; :meth:`Store.open` applies what is missing."""


def _close_at_exit(ref: weakref.ref[Store]) -> None:
    """Drain a store nobody closed, so queued events are not lost on a clean exit."""
    store = ref()
    if store is not None:
        store.close()


class Store(CoreTables):
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
        super().__init__(
            path,
            migrations=migrations,
            batch_max=batch_max,
            queue_max=queue_max,
            busy_timeout_ms=busy_timeout_ms,
        )
        self._pool = ReadPool(path, busy_timeout_ms=busy_timeout_ms)
        self._atexit_hook = functools.partial(_close_at_exit, weakref.ref(self))

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
        prepare_files(path)
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
                self._queue.append(SHUTDOWN)
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
        self.append_all((event,))

    def append_all(self, events: Sequence[CanonicalEvent]) -> None:
        """:meth:`append` of each event in order, under one lock: all or none are queued."""
        if not self._accepting:
            raise self._not_accepting()
        rows = [event_row(event) for event in events]
        keep = bool(self._subscribers)
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            stage_seqs(events, self._last_seq, self._load_last_seq)
            # Keep the model only for subscribers: otherwise it can die right here,
            # and a queue of plain str/int tuples is nearly free for the GC to scan
            # (measurably faster ingest than keeping every queued model alive).
            if keep:
                self._queue.extend(zip(rows, events, strict=True))
            else:
                self._queue.extend([(row, None) for row in rows])
        if not self._wake.is_set():
            self._wake.set()

    async def append_async(self, event: CanonicalEvent) -> None:
        """:meth:`append`, but wait while ``queue_max`` items are queued (backpressure)."""
        await self.room()
        self.append(event)

    async def room(self) -> None:
        """Return once fewer than ``queue_max`` items are queued (or the store stopped
        accepting, which the next append raises): the backpressure of producers."""
        while len(self._queue) >= self._queue_max and self._accepting:
            await self._wait_for_space()

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

    def _submit_flush(self) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._enqueue(QueuedFlush(future))
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

    def _submit_tx(
        self, fn: Callable[[Tx], T], events: Sequence[CanonicalEvent]
    ) -> concurrent.futures.Future[T]:
        rows = [event_row(e) for e in events]
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        item = QueuedWrite(fn, future, tx=True, rows=rows, events=tuple(events))
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            stage_seqs(events, self._last_seq, self._load_last_seq)
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
