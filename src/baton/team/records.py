"""The team tables' rows as frozen records, and back (``baton.store.team_sql`` holds the SQL).

Frozen on purpose: a change is a new record (``dataclasses.replace``) moved by a
table in :mod:`baton.team.states` and committed with its event, never an
attribute set somewhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from baton.role_tools.binding import Binding
from baton.store import team_sql
from baton.store.tx import Row, RowValues
from baton.team.states import DispatchState, OwnerState, QuestionState, SlotState, TaskState

__all__ = [
    "FRESH_ATTEMPT",
    "OutboxEntry",
    "OwnerRecord",
    "QuestionRecord",
    "RecordChanges",
    "RefusalRecord",
    "RoleRecord",
    "SlotRecord",
    "TaskRecord",
    "TurnRecord",
    "UsageTotals",
]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R")

RecordChanges = Any
"""The value of one field a change sets on a team record (a :class:`TaskRecord` walk, a
:class:`SlotRecord` commit). ``Any`` because the
field decides the type; ``dataclasses.replace`` (and mypy's dataclass plugin at each
literal call) checks it."""


FRESH_ATTEMPT: Final[Mapping[str, RecordChanges]] = MappingProxyType(
    {"turns": 0, "reminders": 0, "resumes": 0}
)
"""A :class:`TaskRecord`'s per-attempt counters as a new attempt starts them (a claim, a
send-back after review, a human's retry)."""


def _values(columns: Sequence[str], row: Row) -> RowValues:
    return dict(zip(columns, row, strict=True))


def _fields(record: DataclassInstance, *, leave_out: str = "") -> RowValues:
    """A record's fields by name: the start of its row (each ``row()`` converts the rest)."""
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name != leave_out}


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """baton's progress on one TASK (FCoP holds its lifecycle stage)."""

    task_id: str
    role: str
    state: TaskState
    created_at: str
    updated_at: str
    for_human: bool = False
    sender: str = ""
    recipient: str = ""
    subject: str = ""
    parent: str | None = None
    job: str | None = None
    """The kind of the last dispatched turn (work, resume, remind, consolidate, ...)."""
    attempt_id: str | None = None
    dispatches: int = 0
    """Turns ever dispatched for this TASK (the turn table's per-task counter)."""
    turns: int = 0
    """Turns in the current attempt (``turn_limit`` counts these)."""
    reminders: int = 0
    resumes: int = 0
    """Re-prompts of the current attempt after an interruption or a failed turn."""
    report_ref: str | None = None
    result: str | None = None
    reason: str | None = None
    issue_id: str | None = None
    review_request: str | None = None
    attention_request: str | None = None
    workspace: str | None = None
    """Room for the per-task git worktree (next issue); unused yet."""
    budget: dict[str, Any] | None = None
    """Room for the per-task budget (next issue); unused yet."""
    version: int = 1
    files_changed: tuple[str, ...] = ()
    """Files the agents reported writing on this TASK (bounded; its review lists them)."""

    def row(self) -> RowValues:
        values = _fields(self)
        values["state"] = self.state.value
        values["for_human"] = int(self.for_human)
        values["budget"] = json.dumps(self.budget) if self.budget is not None else None
        values["files_changed"] = json.dumps(list(self.files_changed))
        return values

    @classmethod
    def from_row(cls, row: Row) -> TaskRecord:
        values = _values(team_sql.TASK_COLUMNS, row)
        values["state"] = TaskState(values["state"])
        values["for_human"] = bool(values["for_human"])
        values["budget"] = json.loads(values["budget"]) if values["budget"] else None
        values["files_changed"] = tuple(json.loads(values["files_changed"] or "[]"))
        return cls(**values)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One dispatch of a prompt to a slot, and how it ended."""

    task_id: str
    dispatch: int
    slot: str
    role: str
    kind: str
    state: DispatchState
    started_at: str
    attempt_id: str | None = None
    anchor: str | None = None
    """The TASK the slot's pointer named (a review turn points at the parent)."""
    outcome: str | None = None
    """``completed``, ``failed`` or ``cancelled`` once finished."""
    stop_reason: str | None = None
    tool_calls: int = 0
    error: str | None = None
    run_id: str | None = None
    """The team loop run that dispatched it."""
    ended_at: str | None = None
    cancelled_by: str | None = None
    """Who asked baton to cancel the turn while it ran (the human, from the dashboard)."""
    prompt_sha256: str | None = None
    """The digest of the prompt it sent (:func:`baton.team.reconcile.prompt_digest`)."""

    def row(self) -> RowValues:
        values = _fields(self)
        values["state"] = self.state.value
        return values

    @classmethod
    def from_row(cls, row: Row) -> TurnRecord:
        values = _values(team_sql.TURN_COLUMNS, row)
        values["state"] = DispatchState(values["state"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Token/cost totals; ``availability`` stays ``unavailable`` until an agent reports any."""

    availability: str = "unavailable"
    reported_turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cost_usd: float = 0.0

    def to_json(self) -> dict[str, str | int | float]:
        return _fields(self)

    @classmethod
    def from_json(cls, raw: object) -> UsageTotals:
        if not isinstance(raw, dict):
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """One role slot: its session, its binding and pointer, its counters."""

    slot: str
    role: str
    agent: str
    state: SlotState
    binding: Binding
    updated_at: str
    agent_session_id: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    pointer_seq: int = 0
    turns: int = 0
    tool_calls: int = 0
    zero_tool_streak: int = 0
    unapproved_mutations: int = 0
    """Mutations without a recorded decision (the permission-integrity audit)."""
    approval: str | None = None
    """``asks``, ``read_only``, ``self_approves`` (an ``agent_approves`` bypass), ``unknown``."""
    usage: UsageTotals = field(default_factory=UsageTotals)
    files_changed: tuple[str, ...] = ()
    last_report_ref: str | None = None
    tasks_handled: int = 0
    started_at: str | None = None

    def row(self) -> RowValues:
        values = _fields(self)
        values["state"] = self.state.value
        values["binding"] = json.dumps(self.binding.to_json(), sort_keys=True)
        values["usage"] = json.dumps(self.usage.to_json(), sort_keys=True)
        values["files_changed"] = json.dumps(list(self.files_changed))
        return values

    @classmethod
    def from_row(cls, row: Row) -> SlotRecord:
        values = _values(team_sql.SLOT_COLUMNS, row)
        values["state"] = SlotState(values["state"])
        values["binding"] = Binding.from_json(json.loads(values["binding"]))
        values["usage"] = UsageTotals.from_json(json.loads(values["usage"]))
        values["files_changed"] = tuple(json.loads(values["files_changed"]))
        return cls(**values)


@dataclass(frozen=True, slots=True)
class RoleRecord:
    role: str
    updated_at: str
    breaker_until: float | None = None
    """Wall-clock time (epoch seconds) the zero-tool-call breaker closes again."""

    def row(self) -> RowValues:
        return _fields(self)

    @classmethod
    def from_row(cls, row: Row) -> RoleRecord:
        return cls(**_values(team_sql.ROLE_COLUMNS, row))


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """The ``baton up`` that owns the project (moved by :data:`~baton.team.states.OWNER`)."""

    pid: int
    start_ticks: int
    host: str
    boot: str
    run_id: str
    state: OwnerState
    started_at: str
    updated_at: str

    def row(self) -> RowValues:
        values = _fields(self)
        return {"id": 1, **values, "state": self.state.value}

    @classmethod
    def from_row(cls, row: Row) -> OwnerRecord:
        values = _values(team_sql.OWNER_COLUMNS, row)
        del values["id"]
        values["state"] = OwnerState(values["state"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    id: int
    kind: str
    slot: str
    role: str
    task_id: str | None
    attempt_id: str | None
    data: dict[str, Any]
    created_at: str
    consumed_at: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> OutboxEntry:
        values = _values(team_sql.OUTBOX_COLUMNS, row)
        try:
            data = json.loads(values["data"])
        except ValueError:
            data = {}
        values["data"] = data if isinstance(data, dict) else {}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """An ``ask_human`` question and the ledger request that carries it."""

    ask_id: str
    role: str
    question: str
    state: QuestionState
    """Moved by :data:`~baton.team.states.QUESTION` (``pending`` → ``delivered``)."""
    asked_at: str
    updated_at: str
    request_id: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    issue_id: str | None = None
    answer: str | None = None

    def row(self) -> RowValues:
        return {**_fields(self), "state": self.state.value}

    @classmethod
    def from_row(cls, row: Row) -> QuestionRecord:
        values = _values(team_sql.QUESTION_COLUMNS, row)
        values["state"] = QuestionState(values["state"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    """An inbox entry the doorbell refused."""

    name: str
    reason: str
    message: str
    at: str
    task_id: str | None = None
    recipient: str | None = None
    issue_id: str | None = None
    quarantined_to: str | None = None
    in_place: bool = False
    cleared: bool = False
    id: int | None = None

    def row(self) -> RowValues:
        values = _fields(self, leave_out="id")
        values["in_place"] = int(self.in_place)
        values["cleared"] = int(self.cleared)
        return values

    @classmethod
    def from_row(cls, row: Row) -> RefusalRecord:
        values = _values(team_sql.REFUSAL_COLUMNS, row)
        values["in_place"] = bool(values["in_place"])
        values["cleared"] = bool(values["cleared"])
        return cls(**values)
