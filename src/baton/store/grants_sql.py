"""The ``grants`` table (a human's scoped "allow this again"): schema and every query.

SQL only; what a grant covers and when it answers lives in
:mod:`baton.requests.grants`. A grant is inserted in the transaction of the answer
that made it, and each use is counted in the transaction of the answer it gives
(:func:`use` changes nothing, and returns 0, for a grant revoked, expired or spent
meanwhile). Rows come back as plain tuples in :data:`COLUMNS` order.
"""

from __future__ import annotations

from typing import Final

from baton.store import table
from baton.store.migrations import Migration
from baton.store.tx import Columns, Row, Tx

__all__ = [
    "COLUMNS",
    "GRANTS_MIGRATIONS",
    "fetch",
    "insert",
    "list_rows",
    "live_for_kind",
    "of_request",
    "resolve_prefix",
    "revoke",
    "use",
]

GRANTS_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        "grants.0001_grants",
        """
        CREATE TABLE grants (
            grant_id     TEXT PRIMARY KEY,
            tool_kind    TEXT NOT NULL,
            subject      TEXT NOT NULL,
            scope        TEXT NOT NULL CHECK (scope IN
                             ('turn', 'task', 'role', 'run', 'project')),
            scope_key    TEXT NOT NULL,
            created_at   TEXT NOT NULL,
            expires_at   TEXT,
            uses_left    INTEGER,
            uses         INTEGER NOT NULL DEFAULT 0,
            request_id   TEXT NOT NULL,
            revoked_at   TEXT,
            last_used_at TEXT
        ) STRICT;
        CREATE INDEX grants_live ON grants (tool_kind) WHERE revoked_at IS NULL;
        """,
    ),
)
"""Part of every store (:data:`baton.store.schema.STORE_MIGRATIONS`)."""

COLUMNS: Final = (
    "grant_id",
    "tool_kind",
    "subject",
    "scope",
    "scope_key",
    "created_at",
    "expires_at",
    "uses_left",
    "uses",
    "request_id",
    "revoked_at",
    "last_used_at",
)
_SELECT: Final = f"SELECT {', '.join(COLUMNS)} FROM grants"  # noqa: S608 - fixed columns
_LIVE: Final = (
    "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) "
    "AND (uses_left IS NULL OR uses_left > 0)"
)


def insert(tx: Tx, values: Columns) -> None:
    names = [n for n in COLUMNS if n in values]
    tx.execute(
        f"INSERT INTO grants ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",  # noqa: S608
        [values[n] for n in names],
    )


def fetch(tx: Tx, grant_id: str) -> Row | None:
    return tx.one(f"{_SELECT} WHERE grant_id = ?", (grant_id,))


def of_request(tx: Tx, request_id: str) -> Row | None:
    """The grant made with the answer to ``request_id``, if any."""
    return tx.one(f"{_SELECT} WHERE request_id = ?", (request_id,))


def live_for_kind(tx: Tx, tool_kind: str, now: str) -> list[Row]:
    """Grants of ``tool_kind`` that may still answer at ``now``, oldest first."""
    return tx.all(
        f"{_SELECT} WHERE tool_kind = ? AND {_LIVE} ORDER BY created_at, grant_id",
        (tool_kind, now),
    )


_USE: Final = (
    "UPDATE grants SET uses = uses + 1, last_used_at = ?, "  # noqa: S608 - fixed text
    "uses_left = CASE WHEN uses_left IS NULL THEN NULL ELSE uses_left - 1 END "
    f"WHERE grant_id = ? AND {_LIVE}"
)


def use(tx: Tx, grant_id: str, now: str) -> int:
    """Count one use if the grant is still live at ``now``; returns rows changed (0 or 1)."""
    return tx.execute(_USE, (now, grant_id, now))


def revoke(tx: Tx, grant_id: str, now: str) -> int:
    """Revoke a grant not yet revoked; returns rows changed (0: unknown or already revoked)."""
    return tx.execute(
        "UPDATE grants SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL",
        (now, grant_id),
    )


def list_rows(tx: Tx, *, limit: int = 500) -> list[Row]:
    """The newest ``limit`` grants, newest first."""
    return tx.all(f"{_SELECT} ORDER BY created_at DESC, grant_id DESC LIMIT ?", (int(limit),))


def resolve_prefix(tx: Tx, prefix: str) -> list[str]:
    """``[prefix]`` when it is a full id, else up to two ids starting with it."""
    return table.resolve_prefix(tx, "grants", "grant_id", prefix)
