"""Filtered, paged reads of runs and decided requests (the dashboard's history).

Keyset paging (``created_at, id`` strictly before the cursor), so a page is as
cheap at the thousandth run as at the first and stays stable while new runs
arrive. Filters are exact matches on columns, or on the role sessions of a run;
dates compare as ISO strings, which is how every baton timestamp is written.
Read-only: safe from any process while others write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.store.records import RunRecord, run_from_row
from baton.store.store import Store
from baton.store.tx import Tx

__all__ = [
    "DecisionFilter",
    "RunFilter",
    "decision_ids",
    "run_prompts",
    "run_tool_counts",
    "runs_page",
]


@dataclass(frozen=True, slots=True)
class RunFilter:
    status: str | None = None
    agent: str | None = None
    kind: str | None = None
    role: str | None = None
    """Runs in which a session of this role worked (team runs)."""
    since: str | None = None
    until: str | None = None
    before: tuple[str, str] | None = None
    """Paging cursor: (created_at, run_id) of the last row of the previous page."""


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    state: str | None = None
    kind: str | None = None
    decided_by: str | None = None
    role: str | None = None
    agent: str | None = None
    run_id: str | None = None
    since: str | None = None
    until: str | None = None
    before: tuple[str, str] | None = None
    """Paging cursor: (created_at, request_id)."""


def _range(where: list[str], params: list[Any], column: str, f: Any) -> None:
    if f.since:
        where.append(f"{column} >= ?")
        params.append(f.since)
    if f.until:
        where.append(f"{column} < ?")
        params.append(f.until)


def runs_page(store: Store, f: RunFilter, limit: int) -> list[RunRecord]:
    """Runs matching ``f``, newest first, at most ``limit``."""
    where: list[str] = []
    params: list[Any] = []
    for column in ("status", "agent", "kind"):
        value = getattr(f, column)
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    if f.role:
        # A role session's row names the last run it worked in; older runs are found by
        # their session.started events, read per candidate run through the primary key.
        where.append(
            "(run_id IN (SELECT run_id FROM sessions WHERE role = ?) OR EXISTS ("
            "SELECT 1 FROM events e WHERE e.run_id = runs.run_id AND e.type = 'session.started'"
            " AND e.session_id IN (SELECT agent_session_id FROM sessions WHERE role = ?)))"
        )
        params += [f.role, f.role]
    _range(where, params, "created_at", f)
    if f.before:
        where.append("(created_at < ? OR (created_at = ? AND run_id < ?))")
        params += [f.before[0], f.before[0], f.before[1]]
    sql = (
        "SELECT run_id, kind, agent, cwd, status, created_at, ended_at, meta FROM runs"  # noqa: S608
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY created_at DESC, run_id DESC LIMIT ?"
    )
    params.append(limit)

    def query(tx: Tx) -> list[RunRecord]:
        return [run_from_row(row) for row in tx.all(sql, params)]

    return store.read_tx(query)


def run_tool_counts(store: Store, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """Per run: finished tool calls by status and terminal turns by type (for honest statuses)."""
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    sql = (
        "SELECT run_id, type, json_extract(json, '$.payload.status'), COUNT(*) FROM events"  # noqa: S608
        f" WHERE run_id IN ({marks}) AND type IN ('tool.execution.completed',"
        " 'turn.completed', 'turn.failed', 'turn.cancelled') GROUP BY 1, 2, 3"
    )

    def query(tx: Tx) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {run_id: {} for run_id in run_ids}
        for run_id, kind, status, count in tx.all(sql, run_ids):
            key = f"tool.{status}" if kind == "tool.execution.completed" else kind
            out[run_id][key] = out[run_id].get(key, 0) + int(count)
        return out

    return store.read_tx(query)


def decision_ids(store: Store, f: DecisionFilter, limit: int) -> list[str]:
    """Ids of requests matching ``f``, newest first (read the records from the ledger)."""
    where: list[str] = []
    params: list[Any] = []
    for column in ("state", "kind", "decided_by", "run_id"):
        value = getattr(f, column)
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    if f.role:
        where.append(
            "(session_id IN (SELECT agent_session_id FROM sessions WHERE role = ?)"
            " OR json_extract(document_json, '$.role') = ?)"
        )
        params += [f.role, f.role]
    if f.agent:
        where.append(
            "(session_id IN (SELECT agent_session_id FROM sessions WHERE agent = ?)"
            " OR run_id IN (SELECT run_id FROM runs WHERE agent = ?))"
        )
        params += [f.agent, f.agent]
    _range(where, params, "created_at", f)
    if f.before:
        where.append("(created_at < ? OR (created_at = ? AND request_id < ?))")
        params += [f.before[0], f.before[0], f.before[1]]
    sql = (
        "SELECT request_id FROM requests"  # noqa: S608 - fixed columns, bound values
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY created_at DESC, request_id DESC LIMIT ?"
    )
    params.append(limit)

    def query(tx: Tx) -> list[str]:
        return [row[0] for row in tx.all(sql, params)]

    return store.read_tx(query)


def run_prompts(store: Store, run_ids: list[str]) -> dict[str, str]:
    """Per run: the preview of its first prompt (what the run was asked to do)."""
    if not run_ids:
        return {}
    marks = ",".join("?" * len(run_ids))
    # The first submitted turn per run, without SQLite's "bare column beside MIN()"
    # rule (PostgreSQL refuses it): the row whose seq is its run's smallest.
    sql = (
        "SELECT e.run_id, json_extract(e.json, '$.payload.prompt_preview') FROM events e"  # noqa: S608
        f" WHERE e.run_id IN ({marks}) AND e.type = 'turn.submitted' AND e.seq = ("
        "SELECT MIN(f.seq) FROM events f WHERE f.run_id = e.run_id AND f.type = 'turn.submitted')"
    )

    def query(tx: Tx) -> dict[str, str]:
        return {run_id: str(text or "") for run_id, text in tx.all(sql, run_ids)}

    return store.read_tx(query)
