"""The records the port hands back: frozen dataclasses instead of Core's plain dicts.

``fcop.Project`` answers with ``dict`` results whose keys churn between
releases; these are what baton's code reads instead, built from Core's fields
in one place (:func:`task_info`, :func:`report_info`, :func:`review_info`,
:func:`transition_info`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "STAGES",
    "TASK_FILE_RE",
    "TASK_ID_RE",
    "CreatedTask",
    "FcopDict",
    "FcopMapping",
    "InboxEntry",
    "ReportInfo",
    "ReviewInfo",
    "Stage",
    "TaskInfo",
    "TransitionInfo",
    "inbox_entry",
    "report_info",
    "review_info",
    "task_info",
    "transition_info",
]

FcopDict = dict[str, Any]
"""What ``fcop`` reads and answers, unchanged: its result dicts, requests, receipts, facts and
an envelope's front matter. JSON-shaped and untyped in fcop itself (no stubs; keys churn
between releases), so it stays a dict at this edge, and only here: the port turns it into the
records below (:func:`task_info`, :func:`transition_info`), and baton's O(1) writer
(:mod:`baton.fcop_port.lifecycle`) passes it through byte-compatibly, as fcop would."""

FcopMapping = Mapping[str, Any]
"""A read-only :data:`FcopDict` (what a function only reads)."""

Stage = Literal["inbox", "active", "review", "done", "archive"]
STAGES: tuple[Stage, ...] = ("inbox", "active", "review", "done", "archive")
TASK_ID_RE = re.compile(r"TASK-[A-Za-z0-9][A-Za-z0-9._-]*\Z")
"""Core's TASK id grammar (``fcop.v4.encoding.ID_RE`` restricted to TASK)."""
TASK_FILE_RE = re.compile(r"(TASK-[A-Za-z0-9][A-Za-z0-9._-]*)\.md\Z")


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One TASK as Core validated it, plus where it is now (the path is the state)."""

    task_id: str
    subject: str
    sender: str
    recipient: str
    stage: str
    body: str
    priority: str = "P2"
    parent: str | None = None
    branch_of: str | None = None
    created_at: str = ""
    operation_id: str | None = None
    attempt_id: str | None = None
    """The current attempt (from the last entry-to-active transition); None in the inbox."""
    last_transition: Mapping[str, Any] = field(default_factory=dict)
    claims: int = 0
    """How many ``claim_task`` transitions the TASK has (exactly one after T2)."""
    path: Path = Path()
    references: tuple[str, ...] = ()
    """Its weak relations; those naming sibling TASKs are prerequisites (:mod:`~baton.workflow.ordering`)."""


@dataclass(frozen=True, slots=True)
class CreatedTask:
    task_id: str
    existing: bool
    """True when the ``operation_id`` had already created this TASK (idempotent redelivery)."""
    operation_id: str
    path: Path


@dataclass(frozen=True, slots=True)
class TransitionInfo:
    task_id: str
    from_stage: str
    to_stage: str
    attempt_id: str
    receipt_ref: str
    existing: bool
    evidence_ref: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReportInfo:
    report_id: str
    subject_ref: str
    attempt_id: str
    sender: str
    recipient: str
    result: str
    report_kind: str
    body: str
    created_at: str
    references: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReviewInfo:
    review_id: str
    subject_ref: str
    review_kind: str
    decision: str
    sender: str
    recipient: str
    attempt_id: str | None
    references: tuple[str, ...]
    body: str
    created_at: str


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """An ``lstat`` view of one inbox directory entry, before anything reads it."""

    name: str
    path: Path
    task_id: str | None
    """The id the name claims (None when the name is not ``TASK-<id>.md``)."""
    is_symlink: bool
    is_regular: bool
    size: int
    ctime_ns: int = 0
    """When the name appeared (Core hard-links the finished file into place)."""
    mtime_ns: int = 0
    ino: int = 0
    dev: int = 0


def task_info(fields: FcopMapping, path: Path, body: str) -> TaskInfo:
    """A :class:`TaskInfo` from Core's ``read_task`` fields, the file's path and its body."""
    transitions = fields.get("transitions") or []
    return TaskInfo(
        task_id=fields["task_id"],
        subject=str(fields.get("subject", "")),
        sender=str(fields.get("sender", "")),
        recipient=str(fields.get("recipient", "")),
        stage=path.parent.name,
        body=body,
        priority=str(fields.get("priority") or "P2"),
        parent=fields.get("parent"),
        branch_of=fields.get("branch_of"),
        created_at=str(fields.get("created_at", "")),
        operation_id=fields.get("operation_id"),
        attempt_id=_current_attempt(transitions) if path.parent.name != "inbox" else None,
        last_transition=dict(transitions[-1]) if transitions else {},
        claims=_entry_claims(transitions),
        path=path,
        references=tuple(r for r in fields.get("references") or () if isinstance(r, str)),
    )


def inbox_entry(path: Path, info: os.stat_result) -> InboxEntry:
    """An :class:`InboxEntry` from a TASK file's path and its ``lstat``."""
    match = TASK_FILE_RE.fullmatch(path.name)
    return InboxEntry(
        name=path.name,
        path=path,
        task_id=match.group(1) if match else None,
        is_symlink=stat.S_ISLNK(info.st_mode),
        is_regular=stat.S_ISREG(info.st_mode),
        size=info.st_size,
        ctime_ns=info.st_ctime_ns,
        mtime_ns=info.st_mtime_ns,
        ino=info.st_ino,
        dev=info.st_dev,
    )


def report_info(fields: FcopMapping, body: str) -> ReportInfo:
    """A :class:`ReportInfo` from a REPORT's fields (as Core validated or wrote them) and body."""
    return ReportInfo(
        report_id=fields["report_id"],
        subject_ref=fields["subject_ref"],
        attempt_id=fields["attempt_id"],
        sender=fields["sender"],
        recipient=fields["recipient"],
        result=str(fields.get("result", "")),
        report_kind=str(fields.get("report_kind", "final")),
        body=body,
        created_at=str(fields.get("created_at", "")),
        references=tuple(fields.get("references") or ()),
    )


def review_info(fields: FcopMapping, body: str) -> ReviewInfo:
    """A :class:`ReviewInfo` from a REVIEW's fields (as Core validated them) and body."""
    return ReviewInfo(
        review_id=fields["review_id"],
        subject_ref=str(fields.get("subject_ref", "")),
        review_kind=str(fields.get("review_kind", "")),
        decision=str(fields.get("decision", "")),
        sender=str(fields.get("sender", "")),
        recipient=str(fields.get("recipient", "")),
        attempt_id=fields.get("attempt_id"),
        references=tuple(fields.get("references") or ()),
        body=body,
        created_at=str(fields.get("created_at", "")),
    )


def transition_info(result: FcopMapping) -> TransitionInfo:
    """A :class:`TransitionInfo` from Core's ``transition`` result."""
    return TransitionInfo(
        task_id=result["task_id"],
        from_stage=result["from_stage"],
        to_stage=result["to_stage"],
        attempt_id=result["attempt_id"],
        receipt_ref=result.get("receipt_ref", ""),
        existing=bool(result.get("existing")),
    )


def _entry_claims(transitions: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for t in transitions if t.get("tool") == "claim_task")


def _current_attempt(transitions: Sequence[Mapping[str, Any]]) -> str | None:
    entry_tools = {"claim_task", "reject_task", "reopen_task"}
    for event in reversed(transitions):
        if event.get("to") == "active" and event.get("tool") in entry_tools:
            attempt = event.get("attempt_id")
            return attempt if isinstance(attempt, str) else None
    return None
