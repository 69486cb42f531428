"""The store's face: what every caller may ask of it, on either backend.

baton keeps every durable fact in one store, an embedded SQLite file on one
machine (:class:`~baton.store.sqlite.SqliteStore`) or PostgreSQL for a cluster
(:class:`~baton.store.pg.PgStore`). Both are one implementation
(:class:`~baton.store.writer_store.WriterStore`) over a backend that differs by
its dialect and its connection (:mod:`baton.store.backend`); callers type against
:class:`Store`, never a backend. Following datasette's design (``design/STYLE.md``):

* **One writer, effects after commit.** Every write is queued for a single
  thread that owns the only write connection and commits a batch per
  transaction (:mod:`~baton.store.batch_writer`): the fsync, the lock and the
  GIL hand-offs are paid per batch, not per event, and nobody is woken before
  COMMIT returned.
* **Acknowledged = flush() returned.** ``append`` only enqueues; an event is
  durable once a later ``flush()`` has returned. A write failure is never
  swallowed: it fails the batch's futures, makes the store refuse further writes
  and is raised by the next ``append``/``flush``/``close``.
* **Readers never block the writer.** Reads use connections of their own, each
  read one consistent snapshot, from any thread or process.
* **A state change and its event commit together.** :meth:`Store.write` runs a
  repository function over a portable :class:`~baton.store.tx.Tx` and inserts
  the canonical events that describe it in the *same* transaction; the wake-up
  topics it named are rung for every process only after COMMIT
  (:mod:`baton.store.wake`). A function that raises rolls back alone (a
  savepoint), and its events are dropped with it: the run's seq then has a gap,
  never a lie.

Several processes (and, with PostgreSQL, several hosts) may write one store: each
has its own writer thread, and the backend's write lock serializes their batches;
a writer waits for it as long as it takes (a busy store never fails a write).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, Self, TypeVar

from baton.events.model import CanonicalEvent
from baton.store.outage import Outage
from baton.store.records import RunRecord, SessionRecord
from baton.store.subscription import Subscription
from baton.store.tx import Tx
from baton.store.wake import WakeRouter

__all__ = ["Store"]

T = TypeVar("T")


class Store(Protocol):
    """baton's durable log of runs, sessions and canonical events, and every repository's
    transactions. Open one with ``SqliteStore.open`` or ``PgStore.open`` (the composition
    root does: :mod:`baton.app`); close it with :meth:`close` (or ``with``)."""

    # ------------------------------------------------------------------ lifecycle

    @property
    def path(self) -> Path | None:
        """The store's file (``None`` on PostgreSQL: nothing may start a per-slot server on it)."""
        ...

    @property
    def closed(self) -> bool: ...

    @property
    def queued(self) -> int:
        """Items waiting for the writer (events, writes, flush markers)."""
        ...

    @property
    def outage(self) -> Outage | None:
        """The outage being ridden out now (unreachable, disk full), None while it answers."""
        ...

    def close(self, timeout: float = 30.0) -> None:
        """Drain queued writes, stop the writer, release every connection; idempotent.
        Afterwards every other method raises :class:`~baton.errors.StoreError`."""
        ...

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop while the queue drains."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc_info: object) -> None: ...

    # -------------------------------------------------------------- events, writes

    def append(self, event: CanonicalEvent) -> None:
        """Queue ``event`` without blocking; durable after ``flush()``."""
        ...

    def append_all(self, events: Sequence[CanonicalEvent]) -> None:
        """:meth:`append` of each event in order: all or none are queued."""
        ...

    async def append_async(self, event: CanonicalEvent) -> None:
        """:meth:`append`, waiting while the queue is full (backpressure)."""
        ...

    async def room(self) -> None:
        """Return once the queue has room (the backpressure of producers)."""
        ...

    async def flush(self) -> None:
        """Return once everything appended before this call is committed."""
        ...

    def flush_sync(self, timeout: float | None = None) -> None: ...

    async def write(self, fn: Callable[[Tx], T], *, events: Sequence[CanonicalEvent] = ()) -> T:
        """Run ``fn(tx)`` and insert ``events`` in one transaction; ``fn``'s result after COMMIT."""
        ...

    def write_sync(
        self,
        fn: Callable[[Tx], T],
        *,
        events: Sequence[CanonicalEvent] = (),
        timeout: float | None = None,
    ) -> T: ...

    # ---------------------------------------------------------------------- reads

    def read_tx(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn(tx)`` on a read-only snapshot (blocking; call from a worker thread)."""
        ...

    async def aread(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`read_tx` without blocking the event loop."""
        ...

    # ------------------------------------------------------------ runs & sessions

    def create_run(self, run: RunRecord) -> None: ...

    def finish_run(
        self, run_id: str, status: str, ended_at: str, *, if_running: bool = False
    ) -> None: ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]: ...

    def runs_with_prefix(self, prefix: str, limit: int = 2) -> list[RunRecord]: ...

    def last_seq(self, run_id: str) -> int: ...

    def iter_event_json(
        self, run_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[str]: ...

    def iter_events(
        self, run_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[CanonicalEvent]: ...

    def upsert_session(self, session: SessionRecord) -> None: ...

    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def find_session(self, identity_key: str) -> SessionRecord | None: ...

    def list_sessions(self, limit: int = 100) -> list[SessionRecord]: ...

    # ---------------------------------------------------- subscriptions, wake-ups

    def subscribe(
        self,
        run_id: str | None = None,
        *,
        max_backlog: int = 10000,
        after_seq: int | None = None,
    ) -> Subscription:
        """Tail committed events of one run (or all runs) as an async iterator."""
        ...

    async def listener(self) -> WakeRouter:
        """This process's wake-up listener on the running loop (one per store and loop)."""
        ...
