"""Plain rows of the ``runs`` and ``sessions`` tables, validated at construction.

Frozen dataclasses, not pydantic models: they never cross a trust boundary
(baton builds them), and reads on the CLI path should not pay for validation.
JSON columns (``meta``, ``state``) are dicts here and compact JSON text in SQLite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import TypeVar

from baton.errors import StoreError
from baton.jsontypes import JsonObject
from baton.store.run_states import RUN_STATUSES, TERMINAL_RUN_STATUSES, RunStatus
from baton.store.tx import Row

__all__ = [
    "RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "RunRecord",
    "RunStatus",
    "SessionRecord",
]

JsonColumn = JsonObject
"""A JSON object kept in a TEXT column (``meta``, ``state``): free-form by design,
what the run's or session's owner chose to keep (``Any``: JSON values)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One invocation of baton (a ``run``/``team`` command, a team loop job ...)."""

    run_id: str
    kind: str
    agent: str
    cwd: str
    status: RunStatus
    created_at: str
    ended_at: str | None = None
    meta: JsonColumn = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.run_id:
            raise ValueError("run_id must be non-empty")
        if self.status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {self.status!r}")


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """An agent session baton can resume; ``identity_key`` finds it again."""

    session_id: str
    agent: str
    agent_session_id: str
    cwd: str
    identity_key: str
    created_at: str
    updated_at: str
    role: str | None = None
    run_id: str | None = None
    state: JsonColumn = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.session_id:
            raise ValueError("session_id must be non-empty")


def dump_json_column(value: JsonColumn) -> str:
    """Compact JSON for a dict column; raises ``TypeError``/``ValueError`` if not JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_Record = TypeVar("_Record", RunRecord, SessionRecord)


def _from_row(cls: type[_Record], row: Row, json_column: str) -> _Record:
    """A record from a ``SELECT`` of all its table's columns, in table order (its fields')."""
    values = dict(zip((f.name for f in fields(cls)), row, strict=True))
    values[json_column] = json.loads(values[json_column])
    return cls(**values)


def _to_row(record: RunRecord | SessionRecord, json_column: str, label: str) -> Row:
    """Parameters for an ``INSERT`` of all the table's columns, in table order.

    Raises :class:`StoreError` naming ``label`` when the JSON column is not JSON, so a
    record that cannot be stored is refused before anything is queued.
    """
    try:
        text = dump_json_column(getattr(record, json_column))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{label}: {json_column} is not JSON: {exc}") from exc
    return tuple(text if f.name == json_column else getattr(record, f.name) for f in fields(record))


def run_from_row(row: Row) -> RunRecord:
    return _from_row(RunRecord, row, "meta")


def run_to_row(run: RunRecord) -> Row:
    return _to_row(run, "meta", f"run {run.run_id!r}")


def session_from_row(row: Row) -> SessionRecord:
    return _from_row(SessionRecord, row, "state")


def session_to_row(session: SessionRecord) -> Row:
    return _to_row(session, "state", f"session {session.session_id!r}")
