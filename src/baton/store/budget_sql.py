"""The usage ledger's rows and the budgets' stored decisions (``baton.budgets``).

``usage_ledger``
    one row per ``usage.counted`` event, keyed by that event's ``(run_id, seq)`` and
    inserted in the same transaction as the event (:func:`charge`): spend is the sum
    of these rows, so a restart recomputes it from what was stored, and no counter
    exists that could drift from the events. The window check runs in that same
    transaction, under the store's write lock (SQLite's ``BEGIN IMMEDIATE``, the
    PostgreSQL advisory lock on a cluster), so two runs sharing a window see each
    other's spend and cannot both go past it unseen.
``budget_limits``
    limits a human raised (``baton budget raise``): they replace the configured ones
    for that scope and dimension.
``budget_marks``
    which thresholds were announced (once each, until a raise or a window reset
    clears them), so a notice is never repeated by a restart or a second run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from baton.budgets.limits import BudgetConfig, ScopeKind
from baton.budgets.rules import ScopeKey, ScopeStanding, Spend, effective
from baton.events.model import UsageCounted
from baton.store.migrations import Migration
from baton.store.tx import Tx

__all__ = [
    "BUDGET_MIGRATIONS",
    "BUDGET_TOPIC",
    "LedgerRow",
    "active_credentials",
    "charge",
    "clear_marks",
    "credentials_of",
    "last_running_total",
    "latest_runs",
    "mark",
    "raise_limit",
    "raised",
    "raised_all",
    "spend",
    "spend_by",
    "standings",
    "window_entries",
]

BUDGET_TOPIC: Final = "budget"
"""Rung when a limit is raised: a running team loop looks at what it parked."""

BUDGET_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "budget.0001_usage_ledger",
        """
        CREATE TABLE usage_ledger (
            run_id            TEXT NOT NULL,
            seq               INTEGER NOT NULL,
            at                REAL NOT NULL,
            session_id        TEXT,
            turn_id           TEXT,
            entry             TEXT NOT NULL,
            profile           TEXT NOT NULL,
            credential        TEXT NOT NULL,
            task_id           TEXT,
            tree              TEXT,
            role              TEXT,
            tokens            INTEGER,
            cost_usd          REAL,
            turns             INTEGER NOT NULL DEFAULT 0,
            tool_calls        INTEGER NOT NULL DEFAULT 0,
            seconds           REAL NOT NULL DEFAULT 0,
            tokens_provenance TEXT,
            cost_provenance   TEXT,
            cumulative_cost   REAL,
            PRIMARY KEY (run_id, seq)
        );
        CREATE INDEX usage_ledger_by_tree ON usage_ledger (tree);
        CREATE INDEX usage_ledger_by_task ON usage_ledger (task_id);
        CREATE INDEX usage_ledger_by_role ON usage_ledger (role, at);
        CREATE INDEX usage_ledger_by_credential ON usage_ledger (credential, at);
        CREATE INDEX usage_ledger_by_session ON usage_ledger (session_id, at);
        CREATE TABLE budget_limits (
            scope      TEXT NOT NULL,
            key        TEXT NOT NULL,
            dimension  TEXT NOT NULL,
            value      REAL NOT NULL,
            previous   REAL,
            raised_at  TEXT NOT NULL,
            raised_by  TEXT NOT NULL,
            PRIMARY KEY (scope, key, dimension)
        );
        CREATE TABLE budget_marks (
            scope      TEXT NOT NULL,
            key        TEXT NOT NULL,
            dimension  TEXT NOT NULL,
            level      TEXT NOT NULL,
            marked_at  TEXT NOT NULL,
            PRIMARY KEY (scope, key, dimension, level)
        );
        """,
    ),
)

_COLUMN: Final[dict[ScopeKind, str]] = {
    "run": "run_id",
    "task": "tree",
    "role": "role",
    "window": "credential",
}
"""The ledger column that names each kind of scope."""

_SUMS: Final = (
    "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0), COALESCE(SUM(turns), 0),"
    " COALESCE(SUM(tool_calls), 0), COALESCE(SUM(seconds), 0),"
    " COALESCE(SUM(CASE WHEN tokens_provenance = 'unavailable' THEN 1 ELSE 0 END), 0),"
    " COALESCE(MAX(CASE WHEN cost_provenance = 'estimated' THEN 1 ELSE 0 END), 0)"
    " FROM usage_ledger"
)


def _spend(row: Sequence[object] | None) -> Spend:
    if row is None:
        return Spend()
    tokens, cost, turns, tools, seconds, unmetered, estimated = row
    return Spend(
        tokens=int(tokens or 0),  # type: ignore[call-overload]
        cost_usd=float(cost or 0.0),  # type: ignore[arg-type]
        turns=int(turns or 0),  # type: ignore[call-overload]
        tool_calls=int(tools or 0),  # type: ignore[call-overload]
        minutes=float(seconds or 0.0) / 60.0,  # type: ignore[arg-type]
        unmetered=int(unmetered or 0),  # type: ignore[call-overload]
        estimated=bool(estimated),
    )


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """Where a ``usage.counted`` event sits in the log (its row's key and clock)."""

    run_id: str
    seq: int
    at: float
    session_id: str | None
    turn_id: str | None


def charge(tx: Tx, row: LedgerRow, entry: UsageCounted) -> None:
    """Insert the ledger row of one ``usage.counted`` event (same transaction as it)."""
    tx.execute(
        "INSERT INTO usage_ledger (run_id, seq, at, session_id, turn_id, entry, profile,"
        " credential, task_id, tree, role, tokens, cost_usd, turns, tool_calls, seconds,"
        " tokens_provenance, cost_provenance, cumulative_cost)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.run_id,
            row.seq,
            row.at,
            row.session_id,
            row.turn_id,
            entry.entry,
            entry.profile,
            entry.credential,
            entry.task_id,
            entry.tree,
            entry.role,
            entry.tokens,
            entry.cost_usd,
            entry.turns,
            entry.tool_calls,
            entry.seconds,
            entry.tokens_provenance,
            entry.cost_provenance,
            entry.cumulative_cost,
        ),
    )


def spend(tx: Tx, scope: ScopeKey, since: float | None = None) -> Spend:
    """What ``scope`` spent (in a window: since ``since``, seconds since the epoch)."""
    sql = f"{_SUMS} WHERE {_COLUMN[scope.kind]} = ?"
    params: list[object] = [scope.key]
    if since is not None:
        sql += " AND at > ?"
        params.append(since)
    return _spend(tx.one(sql, params))


def spend_by(tx: Tx, kind: ScopeKind | str, keys: Iterable[str] | None = None) -> dict[str, Spend]:
    """Spend of every ``kind`` (``run``, ``task``: by tree, ``task_id``: by TASK, ``role``,
    ``window``: every credential ever), optionally only ``keys``."""
    column = "task_id" if kind == "task_id" else _COLUMN[kind]  # type: ignore[index]
    wanted = list(keys) if keys is not None else None
    if wanted == []:
        return {}
    sql = f"{_SUMS.replace('SELECT ', f'SELECT {column}, ', 1)} WHERE {column} IS NOT NULL"
    params: list[object] = []
    if wanted is not None:
        sql += f" AND {column} IN ({', '.join('?' for _ in wanted)})"
        params.extend(wanted)
    sql += f" GROUP BY {column}"
    return {str(row[0]): _spend(row[1:]) for row in tx.all(sql, params)}


def window_entries(
    tx: Tx, credential: str, since: float, dimension: str
) -> list[tuple[float, float]]:
    """``(at, amount)`` of one dimension's spend of ``credential`` since ``since``."""
    column = {"minutes": "seconds"}.get(dimension, dimension)
    if column not in ("tokens", "cost_usd", "turns", "tool_calls", "seconds"):
        raise ValueError(f"not a budget dimension: {dimension!r}")
    scale = 60.0 if dimension == "minutes" else 1.0
    rows = tx.all(
        f"SELECT at, {column} FROM usage_ledger WHERE credential = ? AND at > ?"  # noqa: S608
        f" AND {column} IS NOT NULL AND {column} <> 0 ORDER BY at",  # a column from the list
        (credential, since),
    )
    return [(float(at), float(amount) / scale) for at, amount in rows]


def active_credentials(tx: Tx, since: float) -> list[str]:
    """The credentials that spent since ``since`` (the windows worth showing)."""
    rows = tx.all(
        "SELECT DISTINCT credential FROM usage_ledger WHERE at > ? ORDER BY credential", (since,)
    )
    return [str(row[0]) for row in rows]


def latest_runs(tx: Tx, count: int) -> list[str]:
    """The ``count`` runs that spent last, newest first."""
    rows = tx.all(
        "SELECT run_id, MAX(at) FROM usage_ledger GROUP BY run_id ORDER BY MAX(at) DESC LIMIT ?",
        (count,),
    )
    return [str(row[0]) for row in rows]


def credentials_of(tx: Tx, role: str) -> list[str]:
    """The credentials a role's turns were charged to, most recent first."""
    rows = tx.all(
        "SELECT credential, MAX(at) FROM usage_ledger WHERE role = ?"
        " GROUP BY credential ORDER BY MAX(at) DESC",
        (role,),
    )
    return [str(row[0]) for row in rows]


def last_running_total(tx: Tx, session_id: str) -> tuple[float | None, bool]:
    """A session's last running total of dollars and whether it ever reported dollars
    (what a resumed session's ledger starts from)."""
    row = tx.one(
        "SELECT cumulative_cost FROM usage_ledger WHERE session_id = ?"
        " AND cumulative_cost IS NOT NULL ORDER BY at DESC, seq DESC LIMIT 1",
        (session_id,),
    )
    return (float(row[0]), True) if row is not None else (None, False)


def raised(tx: Tx, scope: ScopeKey) -> dict[str, float]:
    """The limits a human raised for ``scope``, by dimension."""
    rows = tx.all(
        "SELECT dimension, value FROM budget_limits WHERE scope = ? AND key = ?",
        (scope.kind, scope.key),
    )
    return {str(d): float(v) for d, v in rows}


def raised_all(tx: Tx) -> list[tuple[str, str, str, float, str, str]]:
    """Every raised limit: ``(scope, key, dimension, value, raised_at, raised_by)``."""
    rows = tx.all(
        "SELECT scope, key, dimension, value, raised_at, raised_by FROM budget_limits"
        " ORDER BY raised_at"
    )
    return [(str(a), str(b), str(c), float(d), str(e), str(f)) for a, b, c, d, e, f in rows]


def raise_limit(
    tx: Tx, scope: ScopeKey, dimension: str, value: float, previous: float | None, at: str, by: str
) -> None:
    """Store a raised limit (replacing an earlier raise) and clear its announced marks."""
    tx.execute(
        "INSERT INTO budget_limits (scope, key, dimension, value, previous, raised_at, raised_by)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key, dimension) DO UPDATE SET"
        " value = excluded.value, previous = excluded.previous,"
        " raised_at = excluded.raised_at, raised_by = excluded.raised_by",
        (scope.kind, scope.key, dimension, value, previous, at, by),
    )
    clear_marks(tx, scope, dimension)
    tx.wake(BUDGET_TOPIC)


def mark(tx: Tx, scope: ScopeKey, dimension: str, level: str, at: str) -> bool:
    """Record that a threshold was announced; ``False``: it already was."""
    return (
        tx.execute(
            "INSERT INTO budget_marks (scope, key, dimension, level, marked_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, key, dimension, level) DO NOTHING",
            (scope.kind, scope.key, dimension, level, at),
        )
        == 1
    )


def clear_marks(tx: Tx, scope: ScopeKey, dimension: str | None = None) -> int:
    """Forget announced thresholds (a raise, a window that reset): they may be said again."""
    if dimension is None:
        return tx.execute(
            "DELETE FROM budget_marks WHERE scope = ? AND key = ?", (scope.kind, scope.key)
        )
    return tx.execute(
        "DELETE FROM budget_marks WHERE scope = ? AND key = ? AND dimension = ?",
        (scope.kind, scope.key, dimension),
    )


def standings(
    tx: Tx, budget: BudgetConfig, scopes: Iterable[ScopeKey], now: float, *, every: bool = False
) -> list[ScopeStanding]:
    """Each scope's spend (a window's: its last ``budget.window``) and effective limits.

    Read inside the transaction that charges a spend, this is the check that cannot
    race: every other writer's rows are either committed before or wait for the lock.
    ``every``: also a window scope without a window configured (its whole spend)."""
    out = []
    for scope in scopes:
        limits = effective(budget.limits(scope.kind), raised(tx, scope))
        since = None
        if scope.kind == "window":
            if budget.window is None:
                if not every:
                    continue
            else:
                since = now - budget.window.seconds
        out.append(ScopeStanding(scope, spend(tx, scope, since), limits))
    return out
