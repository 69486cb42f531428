"""The store's own tables (``CORE_MIGRATIONS``): runs and sessions, their SQL and rules.

Other tables have their repositories beside them (``requests_sql``, ``team_sql``,
…) and are written through :meth:`Store.write <baton.store.store.Store.write>`;
these are the log itself, so the store offers them as methods
(:class:`~baton.store.writer_store.WriterStore`) built on this SQL.
"""

from __future__ import annotations

from typing import Final

from baton.errors import StoreError
from baton.store.run_states import FINISH, TABLE, TERMINAL_RUN_STATUSES, RunState
from baton.store.tx import Tx

__all__ = [
    "INSERT_RUN",
    "SELECT_RUNS",
    "SELECT_SESSIONS",
    "UPSERT_SESSION",
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


def finish_run_tx(
    tx: Tx, run_id: str, status: str, ended_at: str, *, if_running: bool = False
) -> None:
    """Move a running run to a terminal ``status`` (:data:`baton.store.run_states.TABLE`);
    repeating the status it has is a no-op, another raises :class:`StoreError`.

    ``if_running`` is for a judge other than the run's owner (recovery: "its process is
    gone"): the owner may have finished the run between that look and this transaction,
    and its own ending stands."""
    if status not in TERMINAL_RUN_STATUSES:
        raise StoreError(f"{status!r} is not a terminal run status")
    current = tx.scalar("SELECT status FROM runs WHERE run_id = ?", (run_id,))
    if current is None:
        raise StoreError(f"unknown run {run_id!r}")
    if current == status or (if_running and current != RunState.RUNNING):
        return
    try:
        TABLE.next(RunState(current), FINISH[RunState(status)])
    except StoreError as exc:
        raise StoreError(f"run {run_id!r} already finished as {current!r}: {exc}") from None
    tx.execute(
        "UPDATE runs SET status = ?, ended_at = ? WHERE run_id = ?", (status, ended_at, run_id)
    )
