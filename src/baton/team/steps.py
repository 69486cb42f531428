"""What the executor can be told to do next with one TASK: the steps of ``next_step``.

:func:`baton.team.next_step.next_step` answers with exactly one :data:`Step`; the executor
(:mod:`baton.team.executor`) performs it and asks again, stopping at a step that waits.
Plain frozen data, no behaviour: the vocabulary between the pure decision and its I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from baton.budgets.rules import Breach
from baton.team.states import TaskState

__all__ = [
    "ApplyDecision",
    "ApplyHumanReview",
    "Attention",
    "Claim",
    "DeferClaim",
    "Dispatch",
    "Fail",
    "JobKind",
    "MergeTree",
    "NotRun",
    "Note",
    "NotifyParent",
    "OpenReview",
    "Park",
    "PrepareWorktree",
    "Queue",
    "Resolve",
    "Retry",
    "Settle",
    "Step",
    "Submit",
    "Unpark",
    "Wait",
]

JobKind = Literal["work", "revise", "resume", "retry", "remind", "consolidate", "answer", "review"]
"""Why a turn is dispatched (which prompt it gets)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to do until something changes (a turn, a child, a human)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Note:
    """Only baton's record moves (waiting for children, for a human); then wait."""

    to: TaskState
    reason: str


@dataclass(frozen=True, slots=True)
class Resolve:
    """Repair a TASK left in two FCoP stages (host-side rule, then ``fcop``'s validator)."""


@dataclass(frozen=True, slots=True)
class Queue:
    """Hand the TASK to a slot worker of ``role`` (the worker decides again)."""

    role: str
    review: bool = False
    """A review of this TASK's report by ``role`` (its sender), not the TASK's own work."""


@dataclass(frozen=True, slots=True)
class Claim:
    """T2 by the role (in a slot)."""


@dataclass(frozen=True, slots=True)
class PrepareWorktree:
    """Make the tree's branch and worktree before its first turn (``[team] isolation``)."""

    root: str


@dataclass(frozen=True, slots=True)
class MergeTree:
    """The human approved a tree's root: merge its branch into the base, then T4.

    A merge the base cannot take now (a conflict, the user's uncommitted edits in the
    files it changes) opens a fresh review saying why, instead of the approval."""

    request_id: str


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Persist a turn, then prompt the slot's session (in a slot)."""

    kind: JobKind


@dataclass(frozen=True, slots=True)
class Submit:
    """T3 with the REPORT head; first the children this leader report accepts (T4)."""

    report_id: str
    result: str
    accept: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OpenReview:
    """The human's review request, committed with the record (``in_review``)."""

    report_id: str
    result: str
    sender: str


@dataclass(frozen=True, slots=True)
class ApplyHumanReview:
    request_id: str
    approve: bool
    reason: str


@dataclass(frozen=True, slots=True)
class ApplyDecision:
    """A role's recorded acceptance/rejection REVIEW becomes T4/T5."""

    reviewer: str
    review_id: str
    approve: bool
    reason: str


@dataclass(frozen=True, slots=True)
class NotifyParent:
    parent: str


@dataclass(frozen=True, slots=True)
class Settle:
    """FCoP says done: baton's record is settled (and the parent re-evaluated)."""


@dataclass(frozen=True, slots=True)
class Attention:
    """baton cannot proceed without a human: record, inbox request, FCoP ISSUE."""

    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    """The agent's turns failed and no retry is left: like attention, state ``failed``."""

    reason: str


@dataclass(frozen=True, slots=True)
class NotRun:
    """Its prerequisites can never finish: claim it, file baton's ``blocked`` REPORT (then
    the usual submit), so the leader's consolidation reflects it."""

    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Park:
    """A budget limit is reached: ``needs_budget`` (needs attention: budget) with the spend
    and the limit, until a raise or the window lets the TASK go on (:class:`Unpark`)."""

    breach: Breach


@dataclass(frozen=True, slots=True)
class Unpark:
    """Its budget lets the parked TASK go on again (raised, or the window moved on)."""


@dataclass(frozen=True, slots=True)
class DeferClaim:
    """A budget's soft limit is reached: the TASK is not claimed until a raise or the
    window's reset (which wakes it)."""

    breach: Breach


@dataclass(frozen=True, slots=True)
class Retry:
    """The human asked to retry a task that needed attention."""

    request_id: str


Step = (
    Wait
    | Note
    | Resolve
    | Queue
    | Claim
    | PrepareWorktree
    | Dispatch
    | Submit
    | OpenReview
    | MergeTree
    | ApplyHumanReview
    | ApplyDecision
    | NotifyParent
    | Settle
    | Attention
    | Fail
    | NotRun
    | Retry
    | Park
    | Unpark
    | DeferClaim
)
