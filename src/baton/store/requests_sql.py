"""The ``requests`` table (the human-request ledger): schema and every query.

SQL only; the rules (state table, validation, who may answer) live in
:mod:`baton.requests`. Rows come back as plain tuples in :data:`COLUMNS`
order and :mod:`baton.requests.ledger` turns them into records.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

from baton.errors import StoreError
from baton.store import table
from baton.store.migrations import Migration
from baton.store.tx import Columns, Row, Tx

__all__ = [
    "COLUMNS",
    "OPEN_STATES",
    "REQUESTS_MIGRATIONS",
    "fetch",
    "find_open_by_rpc_id",
    "find_reissued",
    "insert",
    "list_rows",
    "open_for_turn",
    "open_with_connection",
    "resolve_prefix",
    "update",
]

REQUESTS_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "requests.0001_ledger",
        """
        CREATE TABLE requests (
            request_id      TEXT PRIMARY KEY,
            kind            TEXT NOT NULL CHECK (kind IN
                                ('permission', 'question', 'plan', 'elicitation', 'review')),
            state           TEXT NOT NULL CHECK (state IN
                                ('pending', 'answered', 'delivered', 'cancelled', 'expired', 'rejected')),
            run_id          TEXT NOT NULL,
            session_id      TEXT,
            turn_id         TEXT,
            connection_id   TEXT,
            jsonrpc_id      TEXT,
            tool_call_id    TEXT,
            title           TEXT NOT NULL,
            document_json   TEXT,
            document_bytes  INTEGER NOT NULL,
            document_sha256 TEXT NOT NULL,
            revision        TEXT,
            answer_json     TEXT,
            decided_by      TEXT CHECK (decided_by IN ('human', 'policy', 'headless')),
            rule            TEXT,
            reason          TEXT,
            supersedes      TEXT REFERENCES requests (request_id),
            created_at      TEXT NOT NULL,
            updated_at      TEXT NOT NULL,
            answered_at     TEXT,
            delivered_at    TEXT
        ) STRICT;
        CREATE INDEX requests_open ON requests (created_at)
            WHERE state IN ('pending', 'answered');
        CREATE INDEX requests_turn ON requests (turn_id)
            WHERE state IN ('pending', 'answered');
        CREATE INDEX requests_connection ON requests (connection_id)
            WHERE state IN ('pending', 'answered');
        CREATE INDEX requests_session_tool ON requests (session_id, kind, tool_call_id);
        CREATE UNIQUE INDEX requests_open_rpc ON requests (connection_id, jsonrpc_id)
            WHERE state IN ('pending', 'answered') AND jsonrpc_id IS NOT NULL;
        """,
    ),
    Migration(
        "requests.0002_open_by_rpc_id",
        """
        CREATE INDEX requests_open_rpc_id ON requests (jsonrpc_id)
            WHERE state IN ('pending', 'answered') AND connection_id IS NULL;
        """,
    ),
    Migration(
        "requests.0003_expires_at",
        """
        ALTER TABLE requests ADD COLUMN expires_at TEXT;
        """,
    ),
)
"""``jsonrpc_id`` is JSON text (ids may be strings or numbers); ``document_json`` is
the canonical JSON of the document, byte-exact; ``supersedes`` links a request
the agent re-issued after ``session/load`` to the one it replaces. The partial
unique index refuses a second open request with the same JSON-RPC id on the same
connection: a duplicate delivery never creates a second interaction. ``expires_at``
is the deadline of whoever waits with a timeout (``baton run --wait-timeout``);
NULL when nobody does (the team loop's reviews wait for as long as it takes). Requests
with no connection (the team loop's reviews, questions, attention requests) are
found again by their ``jsonrpc_id`` key (``review:…``, ``ask:…``)."""

COLUMNS: Final = (
    "request_id",
    "kind",
    "state",
    "run_id",
    "session_id",
    "turn_id",
    "connection_id",
    "jsonrpc_id",
    "tool_call_id",
    "title",
    "document_json",
    "document_bytes",
    "document_sha256",
    "revision",
    "answer_json",
    "decided_by",
    "rule",
    "reason",
    "supersedes",
    "created_at",
    "updated_at",
    "answered_at",
    "delivered_at",
    "expires_at",
)
_KNOWN: Final = frozenset(COLUMNS)
_SELECT: Final = f"SELECT {', '.join(COLUMNS)} FROM requests"  # noqa: S608 - fixed columns
OPEN_STATES: Final = ("pending", "answered")
_INSERTION: Final = "rowid"
"""Insertion order breaks ``created_at`` ties (milliseconds). SQLite's implicit
rowid; the PostgreSQL backend's ``requests`` table has an identity column for it."""
_OPEN: Final = "state IN ('pending', 'answered')"


def _columns(names: Collection[str]) -> None:
    unknown = set(names) - _KNOWN
    if unknown:
        raise StoreError(f"unknown requests columns: {sorted(unknown)}")


def fetch(tx: Tx, request_id: str) -> Row | None:
    return tx.one(f"{_SELECT} WHERE request_id = ?", (request_id,))


def insert(tx: Tx, values: Columns) -> None:
    """Insert one row; :class:`~baton.store.tx.StoreConflict` for a duplicate id or open RPC id."""
    _columns(values)
    names = list(values)
    placeholders = ", ".join("?" for _ in names)
    tx.execute(
        f"INSERT INTO requests ({', '.join(names)}) VALUES ({placeholders})",  # noqa: S608
        [values[n] for n in names],
    )


def update(tx: Tx, request_id: str, expected_state: str, columns: Columns) -> int:
    """Set ``columns`` on the row if it is still in ``expected_state``; returns rows changed."""
    _columns(columns)
    assignments = ", ".join(f"{name} = ?" for name in columns)
    return tx.execute(
        f"UPDATE requests SET {assignments} WHERE request_id = ? AND state = ?",  # noqa: S608
        [*columns.values(), request_id, expected_state],
    )


def open_for_turn(tx: Tx, turn_id: str) -> list[Row]:
    return tx.all(
        f"{_SELECT} WHERE {_OPEN} AND turn_id = ? ORDER BY created_at, {_INSERTION}", (turn_id,)
    )


def open_with_connection(tx: Tx) -> list[Row]:
    return tx.all(
        f"{_SELECT} WHERE {_OPEN} AND connection_id IS NOT NULL ORDER BY created_at, {_INSERTION}"
    )


def find_open_by_rpc_id(tx: Tx, jsonrpc_id: str) -> Row | None:
    """The open connection-less request keyed by ``jsonrpc_id`` (JSON text), if any."""
    return tx.one(
        f"{_SELECT} WHERE {_OPEN} AND connection_id IS NULL AND jsonrpc_id = ? "
        f"ORDER BY created_at DESC, {_INSERTION} DESC LIMIT 1",
        (jsonrpc_id,),
    )


def resolve_prefix(tx: Tx, prefix: str) -> list[str]:
    """``[prefix]`` when it is a full id, else up to two ids starting with it."""
    return table.resolve_prefix(tx, "requests", "request_id", prefix)


def list_rows(
    tx: Tx,
    *,
    states: Sequence[str] | None,
    run_id: str | None,
    limit: int | None,
) -> list[Row]:
    """Rows in ``states`` (all when ``None``), newest ``limit``, returned oldest first."""
    clauses: list[str] = []
    params: list[Any] = []
    if states is not None:
        clauses.append(f"state IN ({', '.join('?' for _ in states)})")
        params += list(states)
    if run_id is not None:
        clauses.append("run_id = ?")
        params.append(run_id)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    tail = ""
    if limit is not None:
        tail = " LIMIT ?"
        params.append(int(limit))
    rows = tx.all(f"{_SELECT}{where} ORDER BY created_at DESC, {_INSERTION} DESC{tail}", params)
    return list(reversed(rows))


def find_reissued(tx: Tx, *, session_id: str, kind: str, tool_call_id: str) -> Row | None:
    return tx.one(
        f"{_SELECT} WHERE session_id = ? AND kind = ? AND tool_call_id = ? "
        f"AND state IN ('expired', 'cancelled') ORDER BY created_at DESC, {_INSERTION} DESC LIMIT 1",
        (session_id, kind, tool_call_id),
    )
