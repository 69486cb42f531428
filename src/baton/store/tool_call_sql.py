"""Role tool calls of agents on worker hosts, kept until delivered; and where the hub is.

A role holder (a worker host's role actor) records each writing role tool call its agent
makes (a report, a task, a question, an issue, a review) here *before* it hands the call
to the coordinator's hub, under an idempotency key derived from the call's task, attempt,
epoch, turn and place in the turn. The hub delivers a call once, whichever way it arrives
(the holder's own request, or the next coordinator reading what is still open), and
keeps the agent's answer with it. The rules (which moves, who may accept a call) live in
:mod:`baton.role_tools.delivery` and :mod:`baton.cluster.delivery`; this module only reads
and writes rows.

``cluster_hubs`` names, per project, where the coordinator's hub listens now, so a holder
whose coordinator restarted (on another port) finds the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from baton.store.migrations import Migration
from baton.store.tx import Columns, Row, RowValues, Tx

__all__ = [
    "TOOL_CALL_COLUMNS",
    "TOOL_CALL_MIGRATIONS",
    "TOOL_CALL_TOPIC",
    "calls_of_turn",
    "get_call",
    "hub_url",
    "insert_call",
    "move_call",
    "open_calls",
    "put_hub",
    "rows_as_dicts",
]

TOOL_CALL_TOPIC: Final = "cluster.tool_call"
"""Rung with every change of a call (a holder waiting for its delivery wakes on it)."""

TOOL_CALL_COLUMNS: Final = (
    "call_key",
    "project",
    "slot",
    "epoch",
    "turn",
    "seq",
    "tool",
    "arguments",
    "task_id",
    "attempt_id",
    "state",
    "answer",
    "reason",
    "created_at",
    "updated_at",
)

TOOL_CALL_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "cluster.0004_tool_calls",
        # turn: the SHA-256 of the holder's prompt; seq: the call's place in that turn.
        # arguments/answer: JSON. state: pending -> accepted -> delivered, or -> refused.
        """
        CREATE TABLE cluster_tool_calls (
            call_key   TEXT PRIMARY KEY,
            project    TEXT NOT NULL,
            slot       TEXT NOT NULL,
            epoch      INTEGER NOT NULL CHECK (epoch >= 1),
            turn       TEXT NOT NULL,
            seq        INTEGER NOT NULL CHECK (seq >= 1),
            tool       TEXT NOT NULL,
            arguments  TEXT NOT NULL,
            task_id    TEXT,
            attempt_id TEXT,
            state      TEXT NOT NULL
                CHECK (state IN ('pending', 'accepted', 'delivered', 'refused')),
            answer     TEXT,
            reason     TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX cluster_tool_calls_by_slot ON cluster_tool_calls (project, slot, state);
        CREATE TABLE cluster_hubs (
            project    TEXT PRIMARY KEY,
            url        TEXT NOT NULL,
            run_id     TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        """,
    ),
)
"""Part of the cluster store only (:data:`baton.store.schema.CLUSTER_MIGRATIONS`)."""

_SELECT: Final = f"SELECT {', '.join(TOOL_CALL_COLUMNS)} FROM cluster_tool_calls"  # noqa: S608


def insert_call(tx: Tx, row: Columns) -> bool:
    """Record a call once: False (nothing written) when its key is known already."""
    if tx.one("SELECT 1 FROM cluster_tool_calls WHERE call_key = ?", (row["call_key"],)):
        return False
    columns = [c for c in TOOL_CALL_COLUMNS if c in row]
    marks = ", ".join("?" for _ in columns)
    tx.execute(
        f"INSERT INTO cluster_tool_calls ({', '.join(columns)}) VALUES ({marks})",  # noqa: S608
        [row[c] for c in columns],
    )
    tx.wake(TOOL_CALL_TOPIC)
    return True


def get_call(tx: Tx, call_key: str) -> Row | None:
    return tx.one(f"{_SELECT} WHERE call_key = ?", (call_key,))


def move_call(
    tx: Tx,
    call_key: str,
    *,
    expect: str,
    state: str,
    answer: str | None,
    reason: str | None,
    updated_at: str,
) -> bool:
    """Compare-and-set the call's state (``expect`` → ``state``); False when it moved."""
    changed = tx.execute(
        "UPDATE cluster_tool_calls SET state = ?, answer = COALESCE(?, answer),"
        " reason = COALESCE(?, reason), updated_at = ? WHERE call_key = ? AND state = ?",
        (state, answer, reason, updated_at, call_key, expect),
    )
    if changed:
        tx.wake(TOOL_CALL_TOPIC)
    return changed == 1


def open_calls(tx: Tx, project: str, slot: str) -> list[Row]:
    """The slot's calls not delivered yet (pending or accepted), oldest first."""
    return tx.all(
        f"{_SELECT} WHERE project = ? AND slot = ? AND state IN ('pending', 'accepted')"
        " ORDER BY created_at, seq",
        (project, slot),
    )


def calls_of_turn(tx: Tx, project: str, slot: str, epoch: int, turn: str) -> list[Row]:
    """Every call of one holder's turn, in the order it made them."""
    return tx.all(
        f"{_SELECT} WHERE project = ? AND slot = ? AND epoch = ? AND turn = ? ORDER BY seq",
        (project, slot, epoch, turn),
    )


def put_hub(tx: Tx, project: str, url: str, run_id: str, *, updated_at: str) -> None:
    """Where the project's hub listens now (the coordinator, each time it starts serving)."""
    tx.execute("DELETE FROM cluster_hubs WHERE project = ?", (project,))
    tx.execute(
        "INSERT INTO cluster_hubs (project, url, run_id, updated_at) VALUES (?, ?, ?, ?)",
        (project, url, run_id, updated_at),
    )


def hub_url(tx: Tx, project: str) -> str | None:
    row = tx.one("SELECT url FROM cluster_hubs WHERE project = ?", (project,))
    return None if row is None else str(row[0])


def rows_as_dicts(rows: Sequence[Row]) -> list[RowValues]:
    return [dict(zip(TOOL_CALL_COLUMNS, row, strict=True)) for row in rows]
