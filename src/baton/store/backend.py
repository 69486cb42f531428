"""What differs between the store's two backends: a dialect and a connection, nothing else.

The writer thread, its batching, start-up and close, the reads, runs, sessions and
subscriptions are written once (:mod:`baton.store.writer_store`,
:mod:`baton.store.batch_writer`); a backend only says how to talk to its database:

* :class:`WriterConnection`: the writer thread's one connection. How a batch takes
  the store-wide write lock (SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock
  after ``BEGIN``), how events are inserted (SQLite: one multi-row statement, which can
  also be its own transaction; PostgreSQL: ``executemany``), how a migration statement
  is spelled, and how wake-up topics travel inside the transaction (PostgreSQL's
  ``NOTIFY``; nothing on SQLite).
* :class:`Backend`: opening that connection, consistent read snapshots on connections
  of their own, this process's doorbell listener and how topics are rung after COMMIT
  (SQLite's FIFOs; nothing more on PostgreSQL, whose ``NOTIFY`` already went out at
  COMMIT).

The SQL both speak is the same (:mod:`baton.store.tx`): ``SAVEPOINT``, ``RELEASE
SAVEPOINT``, ``ROLLBACK TO SAVEPOINT``, ``COMMIT`` and ``ROLLBACK`` are run as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from baton.store.event_rows import EventRow
from baton.store.tx import Params, Row, Tx
from baton.store.wake import WakeRouter

__all__ = ["Backend", "WriterConnection"]

T = TypeVar("T")


class WriterConnection(Protocol):
    """The writer thread's one connection (used by that thread only)."""

    @property
    def in_transaction(self) -> bool:
        """A transaction is open (false again once the driver ended it itself: a lost batch)."""
        ...

    def begin(self) -> None:
        """Open a transaction holding the store-wide write lock (waits as long as it takes)."""
        ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def execute(self, sql: str) -> None:
        """A statement without parameters: savepoints, DDL (already in this dialect)."""
        ...

    def tx(self) -> Tx:
        """The repositories' handle on this connection's current transaction."""
        ...

    def insert_events(self, rows: Sequence[EventRow]) -> None:
        """Insert event rows inside the open transaction."""
        ...

    def insert_events_alone(self, rows: Sequence[EventRow]) -> bool:
        """Insert ``rows`` as a transaction of their own, if this backend does that in one
        statement (the flood case); False, having done nothing, when it cannot."""
        ...

    def notify(self, topics: Sequence[str]) -> None:
        """Hand wake-up topics to the database inside the transaction (or do nothing)."""
        ...

    def ddl(self, statement: str) -> str:
        """One migration statement (written for SQLite) in this backend's dialect."""
        ...

    def create_if_missing(self, statement: str) -> None:
        """Run a ``CREATE ... IF NOT EXISTS`` that openers on several hosts may race on."""
        ...

    def commit_token(self) -> object | None:
        """What names the open transaction once its COMMIT is under way (PostgreSQL: its
        transaction id), so a COMMIT cut short can be asked about; None: nothing to ask
        (SQLite: a COMMIT that failed did not commit)."""
        ...

    def was_committed(self, token: object) -> bool:
        """On a new connection: whether the transaction ``token`` names committed."""
        ...

    def close(self) -> None: ...


class Backend(Protocol):
    """One database the store lives in: its writer connection, its reads, its doorbell."""

    @property
    def label(self) -> str:
        """Where the store lives, fit for messages (a path; a DSN without its password)."""
        ...

    @property
    def path(self) -> Path | None:
        """The store's file (``None``: no file, nothing may start a per-slot server on it)."""
        ...

    def connect_writer(self) -> WriterConnection:
        """Open the writer's connection (on the writer thread)."""
        ...

    def read(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` on a read-only snapshot of its own (blocking)."""
        ...

    def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        """One query's rows, as one short read."""
        ...

    async def listen(self) -> WakeRouter:
        """Start this process's doorbell listener on the running loop."""
        ...

    def ring(self, topics: Sequence[str], local: WakeRouter | None) -> None:
        """After a COMMIT: wake ``local`` (this process's listener) and every other one."""
        ...

    def transient(self, exc: BaseException) -> str | None:
        """Why ``exc`` means the store is out for now (a lost connection, a database
        shutting down, a full disk, a lock held too long), or None: a real failure."""
        ...

    def close(self) -> None:
        """Close the read connections (the writer closes its own)."""
        ...
