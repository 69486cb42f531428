"""The store's one writer: the thread that commits the write queue in batches.

Every write (event appends, :class:`~baton.store.tx.Tx` repository functions) is
queued (:mod:`baton.store.write_queue`) for a single thread that owns the only write
connection and commits each batch as one transaction, under the store-wide write
lock its backend takes (:mod:`baton.store.backend`: SQLite's ``BEGIN IMMEDIATE``,
PostgreSQL's advisory lock; events alone, on SQLite, as one multi-row INSERT that is
its own transaction). Effects come after COMMIT only: futures resolve, subscribers
are handed the events, wake-up topics are rung. A write function that raises rolls
back alone (a savepoint); a failure of the batch itself fails its futures and makes
the store refuse further writes. Written once for both backends.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from baton import crashpoints
from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.backend import Backend, WriterConnection
from baton.store.event_rows import EventRow
from baton.store.migrations import Migration, migrate
from baton.store.write_queue import Flush, QueueItem, Write, WriteQueue

__all__ = ["BatchWriter"]

_log = logging.getLogger(__name__)

_Outcome = tuple[concurrent.futures.Future[Any], Any, BaseException | None]
"""A write's future, its function's result or its error (``Any``: whatever ``fn`` returns)."""


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
    ) -> None:
        self._backend = backend
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
        try:
            try:
                migrate(conn, self._migrations)
            except BaseException as exc:
                self._ready.set_exception(exc)
                return
            self._ready.set_result(None)
            try:
                while not self._write_batch(conn, self._queue.take(self._batch_max)):
                    pass
            except BaseException as exc:
                self._queue.fail(exc)
            else:
                for subscription in self._queue.subscribers:
                    subscription._end(None)
        finally:
            conn.close()

    def _write_batch(self, conn: WriterConnection, items: list[QueueItem]) -> bool:
        """Commit one batch, then resolve its futures, publish and ring; True at shutdown."""
        segments: list[list[EventRow] | Write] = []
        rows: list[EventRow] | None = None
        publish = bool(self._queue.subscribers)
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
            elif type(item) is Write:
                rows = None
                # Claiming makes the future RUNNING, so a late cancel() cannot race
                # with set_result below; a write cancelled before this never runs.
                if item.future.set_running_or_notify_cancel():
                    segments.append(item)
                    segment_events.append(list(item.events) if publish else [])
                    claimed.append(item.future)
            elif type(item) is Flush:
                if item.future.set_running_or_notify_cancel():
                    flushes.append(item.future)
            else:
                stop = True
        outcomes: list[_Outcome] = []
        topics: list[str] = []
        if segments:
            try:
                only = segments[0] if len(segments) == 1 else None
                # Events only (the flood case) may be one statement of their own.
                if not (type(only) is list and conn.insert_events_alone(only)):
                    conn.begin()
                    for index, segment in enumerate(segments):
                        if type(segment) is list:
                            conn.insert_events(segment)
                        else:
                            assert isinstance(segment, Write)
                            outcome = self._run_write(conn, segment, topics)
                            outcomes.append(outcome)
                            if outcome[2] is not None:
                                segment_events[index] = []
                    if topics:
                        conn.notify(list(dict.fromkeys(topics)))
                    conn.commit()
            except BaseException as exc:
                err = StoreError(f"store write failed, batch of {len(items)} rolled back: {exc}")
                err.__cause__ = exc
                if conn.in_transaction:
                    try:
                        conn.rollback()
                    except Exception as rollback_exc:
                        err.add_note(f"rollback also failed: {rollback_exc}")
                # Refuse new writes before anyone waiting on this batch wakes up.
                self._queue.fail(err)
                for future in (*claimed, *flushes):
                    future.set_exception(err)
                    self._queue.told()
                raise err from exc
        if segments:
            crashpoints.durable_write("store.commit")
        # Committed: only now may anyone observe these writes. Subscribers first,
        # so a returned flush() also means they have been handed the events.
        try:
            events = [e for batch in segment_events for e in batch]
            if events:
                for subscription in self._queue.subscribers:
                    subscription._publish(events)
            if topics:
                try:
                    self._after_commit(topics)
                except OSError:  # pragma: no cover - a doorbell must never fail a commit
                    _log.exception("store %s: could not ring %s", self._backend.label, topics)
        finally:
            for future, result, error in outcomes:
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)
            for flush in flushes:
                flush.set_result(None)
        return stop

    def _run_write(self, conn: WriterConnection, write: Write, topics: list[str]) -> _Outcome:
        """Run one write (and insert its events) under a savepoint; its failure stays its own."""
        conn.execute("SAVEPOINT baton_write")
        tx = conn.tx()
        try:
            result = write.fn(tx)
            if write.rows:
                conn.insert_events(write.rows)
        except Exception as exc:
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
