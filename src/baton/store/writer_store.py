"""The one implementation of :class:`~baton.store.store.Store`, over either backend.

Start-up, close, appends, writes, reads, runs, sessions, subscriptions and the
doorbell listener are written here once; its writes go through a
:class:`~baton.store.write_queue.WriteQueue` that its one
:class:`~baton.store.batch_writer.BatchWriter` thread commits, and what differs
between SQLite and PostgreSQL is its :class:`~baton.store.backend.Backend`.
:class:`~baton.store.sqlite.SqliteStore` and :class:`~baton.store.pg.PgStore` only
open one with their backend (and add what only their backend has).

Length: the one Store both backends share (writes, reads, outage waits, run and event
queries) is written once here on purpose: split, the two stores would drift apart again.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.backend import Backend
from baton.store.batch_writer import BatchWriter
from baton.store.core_tables import (
    INSERT_RUN,
    SELECT_RUNS,
    SELECT_SESSIONS,
    UPSERT_SESSION,
    finish_run_tx,
)
from baton.store.event_rows import paged_event_json, parse_event
from baton.store.migrations import Migration
from baton.store.outage import OUTAGE_LIMIT_S, Health, Outage, ride
from baton.store.records import (
    RunRecord,
    SessionRecord,
    run_from_row,
    run_to_row,
    session_from_row,
    session_to_row,
)
from baton.store.subscription import Subscription
from baton.store.tx import Params, Row, StoreConflict, Tx
from baton.store.wake import WakeRouter
from baton.store.write_queue import WriteQueue

__all__ = ["WriterStore"]

T = TypeVar("T")
B = TypeVar("B", bound=Backend)


def _close_at_exit(ref: weakref.ref[WriterStore[Any]]) -> None:
    """Drain a store nobody closed, so queued events are not lost on a clean exit."""
    store = ref()
    if store is not None:
        store.close()


class WriterStore(Generic[B]):
    """A store on one backend ``B``; built and started by :meth:`_opened` (see the module)."""

    def __init__(
        self,
        backend: B,
        *,
        migrations: Sequence[Migration],
        batch_max: int,
        queue_max: int,
        outage_limit_s: float = OUTAGE_LIMIT_S,
    ) -> None:
        """Only sets fields and starts nothing (:meth:`_opened` starts it)."""
        if batch_max < 1 or queue_max < 1:
            raise ValueError("batch_max and queue_max must be at least 1")
        self._backend = backend
        self._health = Health(backend.label, limit=outage_limit_s)
        self._listener: WakeRouter | None = None
        self._queue = WriteQueue(
            backend.label, queue_max=queue_max, load_last_seq=self._load_last_seq
        )
        self._writer = BatchWriter(
            backend,
            self._queue,
            migrations=migrations,
            batch_max=batch_max,
            after_commit=self._ring,
            health=self._health,
        )
        self._atexit_hook = functools.partial(_close_at_exit, weakref.ref(self))

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def _opened(
        cls,
        backend: B,
        *,
        migrations: Sequence[Migration],
        batch_max: int,
        queue_max: int,
        outage_limit_s: float = OUTAGE_LIMIT_S,
    ) -> Self:
        """A store on ``backend``, started: its writer up and its schema current."""
        store = cls(
            backend,
            migrations=migrations,
            batch_max=batch_max,
            queue_max=queue_max,
            outage_limit_s=outage_limit_s,
        )
        store._start()
        return store

    def _start(self) -> None:
        """Start the writer; return once the schema is current."""
        try:
            self._writer.start()
        except BaseException as exc:
            self._backend.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open store {self._backend.label}: {exc}") from exc
        atexit.register(self._atexit_hook)

    def close(self, timeout: float = 30.0) -> None:
        """Drain queued writes, stop the writer and release every connection.

        Idempotent; afterwards every other method raises :class:`StoreError`.
        Raises :class:`StoreError` if the writer does not stop within
        ``timeout`` seconds, or if it failed and nobody has been told yet.
        """
        error = self._writer.close(timeout)
        self._backend.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close_threadsafe()
        atexit.unregister(self._atexit_hook)
        if error is not None:
            raise error

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop while the queue drains."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def path(self) -> Path | None:
        return self._backend.path

    @property
    def closed(self) -> bool:
        return self._queue.closed

    @property
    def outage(self) -> Outage | None:
        """The outage being ridden out now (the store unreachable, its disk full), if any."""
        return self._health.outage

    @property
    def queued(self) -> int:
        """Items waiting for the writer (events, writes, flush markers)."""
        return len(self._queue)

    def _check_open(self) -> None:
        if self._queue.closed:
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
        self._queue.append((event,))

    def append_all(self, events: Sequence[CanonicalEvent]) -> None:
        """:meth:`append` of each event in order, under one lock: all or none are queued."""
        self._queue.append(events)

    async def append_async(self, event: CanonicalEvent) -> None:
        """:meth:`append`, but wait while ``queue_max`` items are queued (backpressure)."""
        await self._queue.room()
        self._queue.append((event,))

    async def room(self) -> None:
        """Return once fewer than ``queue_max`` items are queued (or the store stopped
        accepting, which the next append raises): the backpressure of producers."""
        await self._queue.room()

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

    async def flush(self) -> None:
        """Return once everything appended before this call is committed.

        This is the acknowledgement point: what ``flush()`` covered survives a
        crash of this process or of the machine. Raises :class:`StoreError` if
        any of it could not be written.
        """
        await asyncio.wrap_future(self._queue.submit_flush())

    def flush_sync(self, timeout: float | None = None) -> None:
        """:meth:`flush` for synchronous callers (not from a write function)."""
        self._writer.not_on_writer("flush_sync()")
        try:
            self._queue.submit_flush().result(timeout)
        except TimeoutError as exc:
            raise StoreError(f"flush did not complete within {timeout}s") from exc

    async def write(self, fn: Callable[[Tx], T], *, events: Sequence[CanonicalEvent] = ()) -> T:
        """Run ``fn(tx)`` and insert ``events`` in one transaction; return ``fn``'s result.

        Returns only after COMMIT. If ``fn`` raises, its changes roll back, its
        events are not stored, and the exception is raised here unchanged.
        Topics ``fn`` named with :meth:`Tx.wake` are rung after COMMIT.
        """
        return await asyncio.wrap_future(self._queue.submit(fn, events))

    def write_sync(
        self,
        fn: Callable[[Tx], T],
        *,
        events: Sequence[CanonicalEvent] = (),
        timeout: float | None = None,
    ) -> T:
        """:meth:`write` for synchronous callers (worker threads, not a write function)."""
        self._writer.not_on_writer("write_sync()")
        return self._queue.submit(fn, events).result(timeout)

    def _submit(self, fn: Callable[[Tx], T]) -> concurrent.futures.Future[T]:
        """A write without events, as a future (a backend's raw-connection writes)."""
        return self._queue.submit(fn, ())

    def _write_row(self, sql: str, row: Sequence[Any], what: str) -> None:
        try:
            self.write_sync(lambda tx: tx.execute(sql, row))
        except StoreConflict as exc:
            raise StoreError(f"cannot {what}: {exc}") from exc

    # ---------------------------------------------------------------------- reads

    def read_tx(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn(tx)`` on a read-only snapshot (blocking; call from a worker thread).
        While the store is out it waits for it (:mod:`baton.store.outage`)."""
        self._check_open()
        return ride(self._health, lambda: self._backend.read(fn), self._backend.transient)

    async def aread(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`read_tx` without blocking the event loop."""
        return await asyncio.to_thread(self.read_tx, fn)

    def _fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        self._check_open()
        return ride(
            self._health, lambda: self._backend.fetch_all(sql, params), self._backend.transient
        )

    # ------------------------------------------------------------ runs & sessions

    def create_run(self, run: RunRecord) -> None:
        """Insert a new run row; returns once committed."""
        self._write_row(INSERT_RUN, run_to_row(run), f"create run {run.run_id!r}")
        self._queue.known_run(run.run_id)

    def finish_run(
        self, run_id: str, status: str, ended_at: str, *, if_running: bool = False
    ) -> None:
        """Move a running run to a terminal status; repeating the same status is a no-op.
        ``if_running``: a run already finished is left as it is (see :func:`finish_run_tx`)."""
        self.write_sync(
            lambda tx: finish_run_tx(tx, run_id, status, ended_at, if_running=if_running)
        )

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Most recent runs first."""
        rows = self._fetch_all(
            SELECT_RUNS + " ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (limit,),
        )
        return [run_from_row(row) for row in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._fetch_all(SELECT_RUNS + " WHERE run_id = ?", (run_id,))
        return run_from_row(rows[0]) if rows else None

    def runs_with_prefix(self, prefix: str, limit: int = 2) -> list[RunRecord]:
        """Runs whose id is ``prefix`` or starts with it (an exact match alone if there is
        one), for ids typed by a human; ``limit`` bounds the ambiguous case."""
        exact = self.get_run(prefix)
        if exact is not None:
            return [exact]
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._fetch_all(
            SELECT_RUNS + " WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id LIMIT ?",
            (escaped + "%", limit),
        )
        return [run_from_row(row) for row in rows]

    def last_seq(self, run_id: str) -> int:
        """The highest *committed* seq of the run (0 if none)."""
        rows = self._fetch_all("SELECT max(seq) FROM events WHERE run_id = ?", (run_id,))
        return int(rows[0][0] or 0)

    def iter_event_json(
        self, run_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[str]:
        """The stored NDJSON lines of a run, by seq, exactly as committed.

        Reads in pages, each a short read of its own, so an abandoned iterator
        holds no connection or snapshot.
        """
        return paged_event_json(self._fetch_all, run_id, after_seq=after_seq, limit=limit)

    def iter_events(
        self, run_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[CanonicalEvent]:
        """The committed events of a run, by seq, parsed back into models."""
        for line in self.iter_event_json(run_id, after_seq=after_seq, limit=limit):
            yield parse_event(line)

    def _event_page(self, run_id: str, after_seq: int, limit: int) -> list[CanonicalEvent]:
        return list(self.iter_events(run_id, after_seq=after_seq, limit=limit))

    def upsert_session(self, session: SessionRecord) -> None:
        """Insert or update a session row (``created_at`` of an existing row is kept)."""
        self._write_row(
            UPSERT_SESSION, session_to_row(session), f"save session {session.session_id!r}"
        )

    def get_session(self, session_id: str) -> SessionRecord | None:
        rows = self._fetch_all(SELECT_SESSIONS + " WHERE session_id = ?", (session_id,))
        return session_from_row(rows[0]) if rows else None

    def find_session(self, identity_key: str) -> SessionRecord | None:
        rows = self._fetch_all(SELECT_SESSIONS + " WHERE identity_key = ?", (identity_key,))
        return session_from_row(rows[0]) if rows else None

    def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        rows = self._fetch_all(
            SELECT_SESSIONS + " ORDER BY updated_at DESC, session_id DESC LIMIT ?",
            (limit,),
        )
        return [session_from_row(row) for row in rows]

    # ----------------------------------------------------- subscriptions, wake-ups

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
            on_close=self._queue.remove_subscriber,
        )
        self._queue.add_subscriber(subscription)
        return subscription

    async def listener(self) -> WakeRouter:
        """This process's wake-up listener on the running loop (one per store and loop)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        if self._listener is not None and self._listener.loop is not loop:
            self._listener.close()
            self._listener = None
        if self._listener is None:
            self._listener = await self._backend.listen()
        return self._listener

    def _ring(self, topics: Sequence[str]) -> None:
        """After a commit: this process's waiters, then every other listening process."""
        self._backend.ring(topics, self._listener)
