"""The store's one writer: a queue that producers fill and a thread that commits it in batches.

Every write (event appends, ``execute_write`` functions, :class:`~baton.store.tx.Tx`
repository functions) is queued for a single thread that owns the only write
connection and commits each batch as one transaction (``BEGIN IMMEDIATE ...
COMMIT``, or for events only one multi-row INSERT that SQLite runs as its own
transaction). Effects come after COMMIT only: futures resolve, subscribers are
handed the events, wake-up topics are rung. A write function that raises rolls
back alone (a savepoint); a failure of the batch itself fails its futures and
makes the store refuse further writes. :class:`~baton.store.store.Store` is
built on :class:`BatchWriter`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from baton import crashpoints
from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.event_rows import MAX_ROWS_PER_INSERT, EventRow, insert_rows
from baton.store.migrations import Migration, apply_migrations
from baton.store.subscription import Subscription
from baton.store.tx import Tx
from baton.store.wake import WakeChannel, WakeListener, wake_dir_for
from baton.store.writer_connection import connect_writer, retry_busy

__all__ = ["SHUTDOWN", "BatchWriter", "QueueItem", "QueuedFlush", "QueuedWrite"]

T = TypeVar("T")

_log = logging.getLogger(__name__)


class QueuedWrite:
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
        rows: Sequence[EventRow] = (),
        events: Sequence[CanonicalEvent] = (),
    ) -> None:
        self.fn = fn
        self.future = future
        self.tx = tx
        self.rows = rows
        self.events = events


class QueuedFlush:
    """Resolved once everything queued before it is committed."""

    __slots__ = ("future",)

    def __init__(self, future: concurrent.futures.Future[None]) -> None:
        self.future = future


class _Shutdown:
    """Queued last by ``close()``: the writer drains up to it, then stops."""


SHUTDOWN: Final = _Shutdown()

QueueItem = tuple[EventRow, CanonicalEvent | None] | QueuedWrite | QueuedFlush | _Shutdown
"""An event is queued as its row, plus the model only while someone subscribes."""


def _wake_future(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class BatchWriter:
    """The queue, its writer thread and the failure state (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        migrations: Sequence[Migration],
        batch_max: int,
        queue_max: int,
        busy_timeout_ms: int,
    ) -> None:
        self._path = path
        self._migrations = tuple(migrations)
        self._batch_max = batch_max
        self._queue_max = queue_max
        self._busy_timeout_ms = busy_timeout_ms
        # Producer/writer shared state. ``_lock`` orders seq checks with enqueueing
        # and guards the lifecycle flags; the deque itself is thread-safe.
        self._lock = threading.Lock()
        self._queue: deque[QueueItem] = deque()
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
        self._wake_channel = WakeChannel(wake_dir_for(path))
        self._listener: WakeListener | None = None

    def _not_accepting(self) -> StoreError:
        if self._failure is not None:
            self._failure_surfaced = True
            err = StoreError(f"store failed: {self._failure}")
            err.__cause__ = self._failure
            return err
        return StoreError("store is closed")

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

    def _enqueue(self, item: QueuedWrite | QueuedFlush) -> None:
        with self._lock:
            if not self._accepting:
                raise self._not_accepting()
            self._queue.append(item)
        self._wake.set()

    def execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> concurrent.futures.Future[T]:
        """Run ``fn(conn)`` on the writer thread, in order with queued events.

        ``fn`` runs inside the batch's transaction under a savepoint: if it
        raises, only its own changes roll back and the future carries its
        exception unchanged. It must not COMMIT/ROLLBACK itself. The future
        resolves only after the batch is committed.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._enqueue(QueuedWrite(fn, future))
        return future

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

    def _retry_busy(self, fn: Callable[[], T]) -> T:
        return retry_busy(fn, path=self._path, busy_timeout_ms=self._busy_timeout_ms)

    def _writer_main(self) -> None:
        try:
            conn = connect_writer(self._path, self._busy_timeout_ms)
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

    def _write_batch(self, conn: sqlite3.Connection, items: list[QueueItem]) -> bool:
        """Commit one batch, then resolve its futures, publish and ring; True at shutdown."""
        segments: list[list[EventRow] | QueuedWrite] = []
        rows: list[EventRow] | None = None
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
            elif type(item) is QueuedWrite:
                rows = None
                # Claiming makes the future RUNNING, so a late cancel() cannot race
                # with set_result below; a write cancelled before this never runs.
                if item.future.set_running_or_notify_cancel():
                    segments.append(item)
                    segment_events.append(list(item.events) if publish else [])
                    claimed.append(item.future)
            elif type(item) is QueuedFlush:
                if item.future.set_running_or_notify_cancel():
                    flushes.append(item.future)
            else:
                stop = True
        outcomes: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        topics: list[str] = []
        if segments:
            try:
                only = segments[0] if len(segments) == 1 else None
                if type(only) is list and len(only) <= MAX_ROWS_PER_INSERT:
                    # Events only (the flood case): one INSERT statement in autocommit
                    # mode is its own transaction, taking the write lock exactly as
                    # BEGIN IMMEDIATE does (busy handler included), atomic, fsynced
                    # at its implicit COMMIT, and one sqlite3 call instead of three.
                    self._retry_busy(lambda: insert_rows(conn, only))
                else:
                    self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
                    for index, segment in enumerate(segments):
                        if type(segment) is list:
                            insert_rows(conn, segment)
                        else:
                            assert isinstance(segment, QueuedWrite)
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

    def _run_write(
        self, conn: sqlite3.Connection, write: QueuedWrite, topics: list[str]
    ) -> tuple[concurrent.futures.Future[Any], Any, BaseException | None]:
        """Run one write (and insert its events) under a savepoint; its failure stays its own."""
        conn.execute("SAVEPOINT baton_write")
        tx = Tx(conn) if write.tx else None
        try:
            result = write.fn(tx if tx is not None else conn)
            if write.rows:
                insert_rows(conn, list(write.rows))
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
            if (
                isinstance(item, QueuedWrite | QueuedFlush)
                and item.future.set_running_or_notify_cancel()
            ):
                item.future.set_exception(err)
                self._failure_surfaced = True
        self._wake_space_waiters()
        for subscription in self._subscribers:
            subscription._end(err)
