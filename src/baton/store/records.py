"""Plain rows of the ``runs`` and ``sessions`` tables, validated at construction.

Frozen dataclasses, not pydantic models: they never cross a trust boundary
(baton builds them), and reads on the CLI path should not pay for validation.
JSON columns (``meta``, ``state``) are dicts here and compact JSON text in SQLite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from baton.store.run_states import RUN_STATUSES, TERMINAL_RUN_STATUSES, RunStatus

__all__ = [
    "RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "RunRecord",
    "RunStatus",
    "SessionRecord",
]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One invocation of baton (a ``run``/``team`` command, a daemon job ...)."""

    run_id: str
    kind: str
    agent: str
    cwd: str
    status: RunStatus
    created_at: str
    ended_at: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

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
    state: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.session_id:
            raise ValueError("session_id must be non-empty")


def dump_json_column(value: dict[str, Any]) -> str:
    """Compact JSON for a dict column; raises ``TypeError``/``ValueError`` if not JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def run_from_row(row: tuple[Any, ...]) -> RunRecord:
    """Build a record from a ``SELECT`` of all ``runs`` columns, in table order."""
    run_id, kind, agent, cwd, status, created_at, ended_at, meta = row
    return RunRecord(
        run_id=run_id,
        kind=kind,
        agent=agent,
        cwd=cwd,
        status=status,
        created_at=created_at,
        ended_at=ended_at,
        meta=json.loads(meta),
    )


def run_to_row(run: RunRecord) -> tuple[Any, ...]:
    """Parameters for an ``INSERT`` of all ``runs`` columns, in table order."""
    return (
        run.run_id,
        run.kind,
        run.agent,
        run.cwd,
        run.status,
        run.created_at,
        run.ended_at,
        dump_json_column(run.meta),
    )


def session_from_row(row: tuple[Any, ...]) -> SessionRecord:
    """Build a record from a ``SELECT`` of all ``sessions`` columns, in table order."""
    (
        session_id,
        agent,
        agent_session_id,
        cwd,
        identity_key,
        created_at,
        updated_at,
        role,
        run_id,
        state,
    ) = row
    return SessionRecord(
        session_id=session_id,
        agent=agent,
        agent_session_id=agent_session_id,
        cwd=cwd,
        identity_key=identity_key,
        created_at=created_at,
        updated_at=updated_at,
        role=role,
        run_id=run_id,
        state=json.loads(state),
    )


def session_to_row(session: SessionRecord) -> tuple[Any, ...]:
    """Parameters for an ``INSERT`` of all ``sessions`` columns, in table order."""
    return (
        session.session_id,
        session.agent,
        session.agent_session_id,
        session.cwd,
        session.identity_key,
        session.created_at,
        session.updated_at,
        session.role,
        session.run_id,
        dump_json_column(session.state),
    )
