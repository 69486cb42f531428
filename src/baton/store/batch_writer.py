"""The store's one writer: the thread that commits the write queue in batches.

Every write (event appends, :class:`~baton.store.tx.Tx` repository functions) is
queued (:mod:`baton.store.write_queue`) for a single thread that owns the only write
connection and commits each batch as one transaction, under the store-wide write
lock its backend takes (:mod:`baton.store.backend`: SQLite's ``BEGIN IMMEDIATE``,
PostgreSQL's advisory lock; events alone, on SQLite, as one multi-row INSERT that is
its own transaction). Effects come after COMMIT only: futures resolve, subscribers
are handed the events, wake-up topics are rung. A write function that raises rolls
back alone (a savepoint). A batch the backend could not commit because the store is
out (its connection lost, the disk full: :meth:`Backend.transient`) is kept and
committed again on a new connection once the store is back (:mod:`baton.store.outage`:
bounded back-off, a limit), its write functions run again; a COMMIT cut short is asked
about first, so a batch is never applied twice. Any other failure of the batch fails its
futures and makes the store refuse further writes. Written once for both backends.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from baton import crashpoints
from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.backend import Backend, WriterConnection
from baton.store.event_rows import EventRow
from baton.store.migrations import Migration, migrate
from baton.store.outage import Health, Outage, OutageGaveUp
from baton.store.write_queue import Flush, QueueItem, Write, WriteQueue

__all__ = ["BatchWriter"]

_log = logging.getLogger(__name__)

_Outcome = tuple[concurrent.futures.Future[Any], Any, BaseException | None]
"""A write's future, its function's result or its error (``Any``: whatever ``fn`` returns)."""


class _Batch:
    """One batch taken from the queue: what it writes, and (per attempt) what came of it."""

    def __init__(self, items: list[QueueItem]) -> None:
        self.items = items
        self.segments: list[list[EventRow] | Write] = []
        self.events: list[list[CanonicalEvent]] = []
        """Events to publish, per segment, in queue order."""
        self.claimed: list[concurrent.futures.Future[Any]] = []
        self.flushes: list[concurrent.futures.Future[None]] = []
        self.stop = False
        self.outcomes: list[_Outcome] = []
        self.topics: list[str] = []
        self.segment_events: list[list[CanonicalEvent]] = []
        """``events`` less those of a write that failed (set by each attempt)."""
        self.token: object | None = None
        """The backend's name for the transaction while its COMMIT is under way."""

    @classmethod
    def of(cls, items: list[QueueItem], *, publish: bool) -> _Batch:
        batch = cls(items)
        rows: list[EventRow] | None = None
        pending: list[CanonicalEvent] | None = None
        for item in items:
            if type(item) is tuple:
                if rows is None:
                    rows = []
                    pending = []
                    batch.segments.append(rows)
                    batch.events.append(pending)
                rows.append(item[0])
                if publish and item[1] is not None:
                    assert pending is not None
                    pending.append(item[1])
            elif type(item) is Write:
                rows = None
                # Claiming makes the future RUNNING, so a late cancel() cannot race
                # with set_result below; a write cancelled before this never runs.
                if item.future.set_running_or_notify_cancel():
                    batch.segments.append(item)
                    batch.events.append(list(item.events) if publish else [])
                    batch.claimed.append(item.future)
            elif type(item) is Flush:
                if item.future.set_running_or_notify_cancel():
                    batch.flushes.append(item.future)
            else:
                batch.stop = True
        return batch

    def reset(self) -> None:
        """Forget a failed attempt's outcomes (the next one runs every write again)."""
        self.outcomes = []
        self.topics = []
        self.segment_events = [list(chunk) for chunk in self.events]
        self.token = None


class BatchWriter:
    """The writer thread over ``queue`` and ``backend`` (see the module docstring);
    ``after_commit(topics)`` rings the topics a committed batch named."""

    def __init__(
        self,
        backend: Backend,
        queue: WriteQueue,
        *,
        migrations: Sequence[Migration],
        batch_max: int,
        after_commit: Callable[[Sequence[str]], None],
        health: Health,
    ) -> None:
        self._backend = backend
        self._health = health
        self._conn: WriterConnection
        self._queue = queue
        self._migrations = tuple(migrations)
        self._batch_max = batch_max
        self._after_commit = after_commit
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._writer_main, name=f"baton-store-writer:{backend.label}", daemon=True
        )

    def start(self) -> None:
        """Start the thread; return once the schema is current (raise what stopped it)."""
        self._thread.start()
        try:
            self._ready.result()
        except BaseException:
            self._thread.join()
            self._queue.shut()  # never opened: nothing queued, nothing to drain
            raise
        self._queue.open()

    def close(self, timeout: float) -> StoreError | None:
        """Drain queued writes and stop the thread; idempotent.

        Returns what the store's ``close()`` must raise once it has released the rest:
        a writer that did not stop within ``timeout``, or a failure nobody was told of.
        """
        self.not_on_writer("close()")
        if not self._queue.shut():
            return None
        self._thread.join(timeout)
        self._queue.wake_space_waiters()
        for subscription in self._queue.subscribers:
            subscription._end(self._queue.failure)
        if self._thread.is_alive():
            return StoreError(
                f"store writer did not stop within {timeout}s; queued writes may be lost"
            )
        return self._queue.untold_failure()

    def not_on_writer(self, what: str) -> None:
        if threading.current_thread() is self._thread:
            raise StoreError(f"{what} called from inside a write function would deadlock")

    # -------------------------------------------------------------- writer thread

    def _writer_main(self) -> None:
        try:
            conn = self._backend.connect_writer()
        except BaseException as exc:
            self._ready.set_exception(exc)
            return
        self._conn = conn
        try:
            try:
                migrate(conn, self._migrations)
            except BaseException as exc:
                self._ready.set_exception(exc)
                return
            self._ready.set_result(None)
            try:
                while not self._write_batch(self._queue.take(self._batch_max)):
                    pass
            except BaseException as exc:
                self._queue.fail(exc)
            else:
                for subscription in self._queue.subscribers:
                    subscription._end(None)
        finally:
            with contextlib.suppress(Exception):
                self._conn.close()

    def _write_batch(self, items: list[QueueItem]) -> bool:
        """Commit one batch (riding out an outage), then resolve its futures, publish and
        ring; True at shutdown."""
        batch = _Batch.of(items, publish=bool(self._queue.subscribers))
        if batch.segments:
            outage: Outage | None = None
            while True:
                try:
                    self._commit(batch)
                    break
                except BaseException as exc:
                    self._roll_back()
                    reason = self._backend.transient(exc)
                    if reason is None:
                        self._fail(batch, len(items), exc)
                    now = time.monotonic()
                    if outage is None:
                        outage = self._health.begin(reason, now)
                    if self._reconnect(batch, outage, exc):
                        break  # its COMMIT went through before the connection was lost
            if outage is not None:
                self._health.end(time.monotonic())
            crashpoints.durable_write("store.commit")
        # Committed: only now may anyone observe these writes. Subscribers first,
        # so a returned flush() also means they have been handed the events.
        try:
            events = [e for chunk in batch.segment_events for e in chunk]
            if events:
                for subscription in self._queue.subscribers:
                    subscription._publish(events)
            if batch.topics:
                try:
                    self._after_commit(batch.topics)
                except OSError:  # pragma: no cover - a doorbell must never fail a commit
                    _log.exception("store %s: could not ring %s", self._backend.label, batch.topics)
        finally:
            for future, result, error in batch.outcomes:
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)
            for flush in batch.flushes:
                flush.set_result(None)
        return batch.stop

    def _commit(self, batch: _Batch) -> None:
        """One attempt at the batch's transaction (its write functions run again on a retry)."""
        conn = self._conn
        batch.reset()
        segments = batch.segments
        only = segments[0] if len(segments) == 1 else None
        # Events only (the flood case) may be one statement of their own.
        if type(only) is list and conn.insert_events_alone(only):
            return
        conn.begin()
        for index, segment in enumerate(segments):
            if type(segment) is list:
                conn.insert_events(segment)
            else:
                assert isinstance(segment, Write)
                outcome = self._run_write(conn, segment, batch.topics)
                batch.outcomes.append(outcome)
                if outcome[2] is not None:
                    batch.segment_events[index] = []
        if batch.topics:
            conn.notify(list(dict.fromkeys(batch.topics)))
        batch.token = conn.commit_token()
        conn.commit()
        batch.token = None

    def _roll_back(self) -> None:
        conn = self._conn
        with contextlib.suppress(Exception):
            if conn.in_transaction:
                conn.rollback()

    def _reconnect(self, batch: _Batch, outage: Outage, cause: BaseException) -> bool:
        """A new writer connection, tried with the outage's back-off until its limit;
        True when the batch being committed turns out to have committed already."""
        token = batch.token
        while True:
            now = time.monotonic()
            if outage.over(now, self._health.limit):
                self._health.end(now)
                err = OutageGaveUp(
                    f"the store {self._backend.label} was unreachable for "
                    f"{self._health.limit:.0f} s: {outage.reason}"
                )
                self._fail(batch, len(batch.items), err, cause=cause)
            # The database (another process, another host) must come back: wait, try again.
            time.sleep(outage.pause())
            outage.tries += 1
            with contextlib.suppress(Exception):
                self._conn.close()
            try:
                self._conn = self._backend.connect_writer()
                return token is not None and self._conn.was_committed(token)
            except BaseException as exc:
                reason = self._backend.transient(exc)
                if reason is None:
                    self._fail(batch, len(batch.items), exc)
                outage.reason = reason

    def _fail(
        self, batch: _Batch, size: int, exc: BaseException, *, cause: BaseException | None = None
    ) -> NoReturn:
        """The batch is lost: refuse new writes, fail its futures, stop the writer."""
        if isinstance(exc, OutageGaveUp):
            err: StoreError = exc
        else:
            err = StoreError(f"store write failed, batch of {size} rolled back: {exc}")
        err.__cause__ = cause or exc
        # Refuse new writes before anyone waiting on this batch wakes up.
        self._queue.fail(err)
        for future in (*batch.claimed, *batch.flushes):
            future.set_exception(err)
            self._queue.told()
        raise err from cause or exc

    def _run_write(self, conn: WriterConnection, write: Write, topics: list[str]) -> _Outcome:
        """Run one write (and insert its events) under a savepoint; its failure stays its own."""
        conn.execute("SAVEPOINT baton_write")
        tx = conn.tx()
        try:
            result = write.fn(tx)
            if write.rows:
                conn.insert_events(write.rows)
        except Exception as exc:  # any failure rolls the batch back (the caller gets it)
            if not conn.in_transaction:
                # The driver already ended the whole transaction (disk full, an I/O
                # error, a lost connection...): the batch is lost, not just this write.
                raise
            conn.execute("ROLLBACK TO SAVEPOINT baton_write")
            conn.execute("RELEASE SAVEPOINT baton_write")
            return write.future, None, exc
        if not conn.in_transaction:
            raise StoreError("a write function ended the store's transaction itself")
        conn.execute("RELEASE SAVEPOINT baton_write")
        topics.extend(tx.topics)
        return write.future, result, None
