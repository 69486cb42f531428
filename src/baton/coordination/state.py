"""What the daemon knows beyond FCoP, as plain data: sessions, task progress, human asks.

FCoP is the truth for lifecycle state (where a TASK file is); this file holds
what FCoP has no place for and ``baton status`` / ``baton sessions`` show from
another process: per-session counters (turns, ``tool_calls_count``, usage with
its availability, files changed, the last report), per-task turn and reminder
counts, stalls, refusals, pending human reviews and questions, open circuit
breakers, and the spool offset. It is rewritten atomically (temp + rename,
0600) after each change, so a reader never sees half a file and a restart
keeps its counters. Losing it loses history, never work: the daemon re-derives
what to do from FCoP on start.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "STATE_VERSION",
    "CoordinationPaths",
    "CoordinationState",
    "HumanQuestion",
    "PendingReview",
    "Refusal",
    "SessionRecord",
    "Stall",
    "TaskRecord",
    "UsageRecord",
    "now_iso",
]

STATE_VERSION = 1
MAX_FILES_CHANGED = 200
MAX_LIST = 500
MAX_SETTLED_TASKS = 500
"""Settled (``done``) task notes kept in ``state.json``; FCoP keeps the full history.

Without a bound the file grows with every task and each save (several per task)
rewrites all of it: 4 MB and ~250 ms at 10,000 tasks, measured by the doorbell
benchmark."""

_R = TypeVar("_R")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True)
class CoordinationPaths:
    """Where coordination keeps its files inside baton's state directory."""

    state_dir: Path

    @property
    def root(self) -> Path:
        return self.state_dir / "coordination"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def bindings(self) -> Path:
        return self.root / "bindings"

    @property
    def spool(self) -> Path:
        return self.root / "spool.jsonl"

    @property
    def quarantine(self) -> Path:
        return self.state_dir / "quarantine"

    @property
    def refused(self) -> Path:
        return self.root / "refused.json"

    @property
    def authority_key(self) -> Path:
        return self.root / "authority.key"


@dataclass(slots=True)
class UsageRecord:
    """Token/cost totals. ``availability`` is ``unavailable`` until an agent reports any."""

    availability: str = "unavailable"
    reported_turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(slots=True)
class SessionRecord:
    """One role session (a role has one per concurrency slot)."""

    name: str
    role: str
    agent: str
    session_id: str | None = None
    status: str = "idle"
    """``idle`` (no session yet: no work, no wake), ``working``, ``ready``, ``failed``, ``closed``."""
    turns: int = 0
    tool_calls_count: int = 0
    unapproved_mutations: int = 0
    """Mutations without a recorded decision (the permission-integrity audit)."""
    approval: str | None = None
    """``asks``, ``read_only``, ``self_approves`` (an ``agent_approves`` bypass), ``unknown``."""
    zero_tool_streak: int = 0
    usage: UsageRecord = field(default_factory=UsageRecord)
    files_changed: list[str] = field(default_factory=list)
    current_task: str | None = None
    last_report_ref: str | None = None
    tasks_handled: int = 0
    started_at: str | None = None
    updated_at: str | None = None


@dataclass(slots=True)
class TaskRecord:
    """baton's progress notes on one TASK (FCoP holds its lifecycle stage)."""

    task_id: str
    role: str
    subject: str = ""
    status: str = "queued"
    """queued, working, waiting_children, reported, waiting_review, waiting_human,
    done, revising, stalled, paused."""
    attempt_id: str | None = None
    turns: int = 0
    reminders: int = 0
    report_ref: str | None = None
    parent: str | None = None
    note: str = ""
    updated_at: str | None = None


@dataclass(slots=True)
class PendingReview:
    """A REPORT addressed to the human: a review the human has to decide."""

    key: str
    task_id: str
    attempt_id: str
    role: str
    subject: str
    report_id: str
    result: str
    body: str
    requested_at: str
    status: str = "pending"
    decided_by: str | None = None
    decision: str | None = None


@dataclass(slots=True)
class HumanQuestion:
    """An ``ask_human`` call, waiting for the human's answer."""

    request_id: str
    role: str
    task_id: str | None
    attempt_id: str | None
    question: str
    issue_id: str | None
    asked_at: str
    status: str = "pending"
    answer: str | None = None


@dataclass(slots=True)
class Stall:
    """A task baton stopped prompting for, and why; always paired with an ISSUE."""

    task_id: str
    role: str
    reason: str
    issue_id: str | None
    at: str


@dataclass(slots=True)
class Refusal:
    """An inbox entry the doorbell refused."""

    name: str
    reason: str
    message: str
    task_id: str | None
    issue_id: str | None
    quarantined_to: str | None
    at: str


def _load(cls: type[_R], raw: Any) -> _R:
    if not isinstance(raw, dict):
        raise ValueError(f"{cls.__name__}: expected an object")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {k: v for k, v in raw.items() if k in known}
    if cls is SessionRecord and isinstance(values.get("usage"), dict):
        values["usage"] = _load(UsageRecord, values["usage"])
    return cls(**values)


@dataclass(slots=True)
class CoordinationState:
    """Everything in ``state.json``."""

    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    pending_reviews: dict[str, PendingReview] = field(default_factory=dict)
    questions: dict[str, HumanQuestion] = field(default_factory=dict)
    human_tasks: dict[str, str] = field(default_factory=dict)
    """TASKs addressed to the human: id -> subject."""
    stalls: list[Stall] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    breakers: dict[str, float] = field(default_factory=dict)
    """Role -> wall-clock time (epoch seconds) its zero-tool-call breaker closes."""
    spool_offset: int = 0
    updated_at: str | None = None
    daemon: str = "stopped"

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, raw: Any) -> CoordinationState:
        if not isinstance(raw, dict) or raw.get("version") != STATE_VERSION:
            return cls()
        try:
            return cls(
                sessions={k: _load(SessionRecord, v) for k, v in raw.get("sessions", {}).items()},
                tasks={k: _load(TaskRecord, v) for k, v in raw.get("tasks", {}).items()},
                pending_reviews={
                    k: _load(PendingReview, v) for k, v in raw.get("pending_reviews", {}).items()
                },
                questions={k: _load(HumanQuestion, v) for k, v in raw.get("questions", {}).items()},
                human_tasks=dict(raw.get("human_tasks", {})),
                stalls=[_load(Stall, v) for v in raw.get("stalls", [])],
                refusals=[_load(Refusal, v) for v in raw.get("refusals", [])],
                breakers={str(k): float(v) for k, v in raw.get("breakers", {}).items()},
                spool_offset=int(raw.get("spool_offset", 0)),
                updated_at=raw.get("updated_at"),
                daemon=str(raw.get("daemon", "stopped")),
            )
        except (TypeError, ValueError):
            return cls()

    @classmethod
    def load(cls, path: Path) -> CoordinationState:
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return cls()

    def save(self, path: Path) -> None:
        self.updated_at = now_iso()
        del self.stalls[:-MAX_LIST]
        del self.refusals[:-MAX_LIST]
        settled = [k for k, t in self.tasks.items() if t.status == "done"]
        for key in settled[: max(0, len(settled) - MAX_SETTLED_TASKS)]:
            del self.tasks[key]
        data = json.dumps(self.to_json(), indent=1, sort_keys=True).encode() + b"\n"
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".state.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(data)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
