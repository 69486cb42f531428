"""Filtered, paged reads of runs and decided requests (the dashboard's history).

Keyset paging (``created_at, id`` strictly before the cursor), so a page is as
cheap at the thousandth run as at the first and stays stable while new runs
arrive. Filters are exact matches on columns, or on the role sessions of a run;
dates compare as ISO strings, which is how every baton timestamp is written.
Read-only: safe from any process while others write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from baton.store.core_tables import SELECT_RUNS
from baton.store.records import RunRecord, run_from_row
from baton.store.store import Store
from baton.store.tx import SqlValue, Tx

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


@dataclass
class _Page:
    """One history page's ``WHERE``: its clauses and their bound values, built from a filter."""

    where: list[str] = field(default_factory=list)
    params: list[SqlValue] = field(default_factory=list)

    def add(self, clause: str, *values: SqlValue) -> None:
        self.where.append(clause)
        self.params += values

    def equal(self, f: RunFilter | DecisionFilter, columns: tuple[str, ...]) -> None:
        """``column = value`` for each of ``columns`` the filter gives a value."""
        for column in columns:
            value = getattr(f, column)
            if value:
                self.add(f"{column} = ?", value)

    def sql(
        self, select: str, key: str, f: RunFilter | DecisionFilter, limit: int
    ) -> tuple[str, list[SqlValue]]:
        """``select`` newest first by ``(created_at, key)``, within ``f``'s dates and
        strictly before its cursor, at most ``limit`` rows."""
        if f.since:
            self.add("created_at >= ?", f.since)
        if f.until:
            self.add("created_at < ?", f.until)
        if f.before:
            created, ident = f.before
            self.add(f"(created_at < ? OR (created_at = ? AND {key} < ?))", created, created, ident)
        where = " WHERE " + " AND ".join(self.where) if self.where else ""
        order = f" ORDER BY created_at DESC, {key} DESC LIMIT ?"
        return select + where + order, [*self.params, limit]


def runs_page(store: Store, f: RunFilter, limit: int) -> list[RunRecord]:
    """Runs matching ``f``, newest first, at most ``limit``."""
    page = _Page()
    page.equal(f, ("status", "agent", "kind"))
    if f.role:
        # A role session's row names the last run it worked in; older runs are found by
        # their session.started events, read per candidate run through the primary key.
        page.add(
            "(run_id IN (SELECT run_id FROM sessions WHERE role = ?) OR EXISTS ("
            "SELECT 1 FROM events e WHERE e.run_id = runs.run_id AND e.type = 'session.started'"
            " AND e.session_id IN (SELECT agent_session_id FROM sessions WHERE role = ?)))",
            f.role,
            f.role,
        )
    sql, params = page.sql(SELECT_RUNS, "run_id", f, limit)

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
    page = _Page()
    page.equal(f, ("state", "kind", "decided_by", "run_id"))
    if f.role:
        page.add(
            "(session_id IN (SELECT agent_session_id FROM sessions WHERE role = ?)"
            " OR json_extract(document_json, '$.role') = ?)",
            f.role,
            f.role,
        )
    if f.agent:
        page.add(
            "(session_id IN (SELECT agent_session_id FROM sessions WHERE agent = ?)"
            " OR run_id IN (SELECT run_id FROM runs WHERE agent = ?))",
            f.agent,
            f.agent,
        )
    sql, params = page.sql("SELECT request_id FROM requests", "request_id", f, limit)

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
