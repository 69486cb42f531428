"""The store's own tables (``CORE_MIGRATIONS``): runs, sessions, and a run's events read back.

Other tables have their repositories beside them (``requests_sql``, ``team_sql``,
…) and are written through :meth:`Store.write <baton.store.store.Store.write>`;
these three are the log itself, so :class:`~baton.store.store.Store` offers
them as methods.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.event_rows import paged_event_json, parse_event
from baton.store.records import (
    TERMINAL_RUN_STATUSES,
    RunRecord,
    SessionRecord,
    run_from_row,
    run_to_row,
    session_from_row,
    session_to_row,
)
from baton.store.snapshot_reads import SnapshotReads
from baton.store.tx import Tx

__all__ = [
    "INSERT_RUN",
    "SELECT_RUNS",
    "SELECT_SESSIONS",
    "UPSERT_SESSION",
    "CoreTables",
    "TableReads",
    "finish_run_tx",
]

# Column lists match records.run_to_row/run_from_row and session_to_row/session_from_row.
SELECT_RUNS: Final = "SELECT run_id, kind, agent, cwd, status, created_at, ended_at, meta FROM runs"
INSERT_RUN: Final = (
    "INSERT INTO runs (run_id, kind, agent, cwd, status, created_at, ended_at, meta)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_SESSIONS: Final = (
    "SELECT session_id, agent, agent_session_id, cwd, identity_key,"
    " created_at, updated_at, role, run_id, state FROM sessions"
)
UPSERT_SESSION: Final = (
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


class TableReads:
    """The core tables read back, over one hook, ``_fetch_all(sql, params)``: the SQLite store
    reads on its read-only pool, the PostgreSQL store in a read transaction."""

    if TYPE_CHECKING:

        def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

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

        Reads in pages, each on a briefly checked-out connection, so an
        abandoned iterator holds no connection or snapshot.
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


class CoreTables(SnapshotReads, TableReads):
    """Runs, sessions and events: written on the writer thread, read from the pool."""

    def create_run(self, run: RunRecord) -> None:
        """Insert a new run row; returns once committed."""
        try:
            row = run_to_row(run)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"run {run.run_id!r}: meta is not JSON: {exc}") from exc

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT_RUN, row)

        try:
            self._write_and_wait(insert)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot create run {run.run_id!r}: {exc}") from exc
        with self._lock:
            self._last_seq.setdefault(run.run_id, 0)

    def finish_run(
        self, run_id: str, status: str, ended_at: str, *, if_running: bool = False
    ) -> None:
        """Move a running run to a terminal status; repeating the same status is a no-op.
        ``if_running``: a run already finished is left as it is (see :func:`finish_run_tx`)."""
        if status not in TERMINAL_RUN_STATUSES:
            raise StoreError(f"{status!r} is not a terminal run status")

        def update(conn: sqlite3.Connection) -> None:
            finish_run_tx(Tx(conn), run_id, status, ended_at, if_running=if_running)

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
            conn.execute(UPSERT_SESSION, row)

        try:
            self._write_and_wait(upsert)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot save session {session.session_id!r}: {exc}") from exc


def finish_run_tx(
    tx: Tx, run_id: str, status: str, ended_at: str, *, if_running: bool = False
) -> None:
    """The rule of :meth:`CoreTables.finish_run`, over any backend's :class:`Tx`.

    ``if_running`` is for a judge other than the run's owner (recovery: "its process is
    gone"): the owner may have finished the run between that look and this transaction,
    and its own ending stands."""
    if status not in TERMINAL_RUN_STATUSES:
        raise StoreError(f"{status!r} is not a terminal run status")
    current = tx.scalar("SELECT status FROM runs WHERE run_id = ?", (run_id,))
    if current is None:
        raise StoreError(f"unknown run {run_id!r}")
    if current == status or (if_running and current != "running"):
        return
    if current != "running":
        raise StoreError(f"run {run_id!r} already finished as {current!r}")
    tx.execute(
        "UPDATE runs SET status = ?, ended_at = ? WHERE run_id = ?", (status, ended_at, run_id)
    )
