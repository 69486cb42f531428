"""A review decision applied in FCoP: the human's answer, or a role's recorded REVIEW (T4/T5)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort, TransitionInfo
from baton.team import steps
from baton.team.attention import Escalations
from baton.team.book import TaskBook
from baton.team.handlers.dependents import Dependents
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts
from baton.team.records import FRESH_ATTEMPT, RecordChanges
from baton.team.slots import Slot
from baton.team.states import TaskState

__all__ = ["ApplyHumanAnswer", "ApplyRoleDecision"]


async def _approve_or_send_back(
    port: FcopPort,
    escalations: Escalations,
    task_id: str,
    *,
    approve: bool,
    approver: str,
    reason: str,
    review_ref: str | None = None,
) -> TransitionInfo | None:
    """T4 (approve) or T5 (send back) in FCoP; on refusal the TASK needs attention (None)."""
    operation = port.approve if approve else port.reject
    try:
        return await asyncio.to_thread(
            operation, task_id, approver=approver, reason=reason, review_ref=review_ref
        )
    except CoordinationError as exc:
        await escalations.escalate_locked(task_id, f"{approver}'s decision failed: {exc}")
        return None


@dataclass(frozen=True, slots=True)
class ApplyHumanAnswer:
    """The human's answer to a review request: approve (T4) or send back (T5)."""

    port: FcopPort
    book: TaskBook
    escalations: Escalations
    dependents: Dependents
    human: str

    async def __call__(
        self, step: steps.ApplyHumanReview, facts: Facts, slot: Slot | None
    ) -> Outcome:
        record = facts.known_record
        info = await _approve_or_send_back(
            self.port,
            self.escalations,
            facts.task.task_id,
            approve=step.approve,
            approver=self.human,
            reason=step.reason,
        )
        if info is None:
            return Then.STOP
        changes: dict[str, RecordChanges] = {}
        if not step.approve:
            changes = {**FRESH_ATTEMPT, "attempt_id": info.attempt_id, "review_request": None}
        await self.book.move_delivering(
            record,
            TaskState.SETTLED if step.approve else TaskState.CLAIMED,
            step.request_id,
            why=f"{self.human} {'approved' if step.approve else 'sent it back'}",
            **changes,
        )
        if step.approve:
            await self.dependents.finished(facts.task.parent)
        return Then.DECIDE_AGAIN


@dataclass(frozen=True, slots=True)
class ApplyRoleDecision:
    """A role's recorded acceptance/rejection REVIEW becomes T4/T5."""

    port: FcopPort
    book: TaskBook
    escalations: Escalations
    dependents: Dependents

    async def __call__(self, step: steps.ApplyDecision, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        info = await _approve_or_send_back(
            self.port,
            self.escalations,
            facts.task.task_id,
            approve=step.approve,
            approver=step.reviewer,
            reason=step.reason,
            review_ref=step.review_id,
        )
        if info is None:
            return Then.STOP
        if step.approve:
            await self.book.move(record, TaskState.SETTLED, why=f"approved by {step.reviewer}")
            await self.dependents.finished(facts.task.parent)
        else:
            await self.book.move(
                record,
                TaskState.CLAIMED,
                why=f"sent back by {step.reviewer}",
                attempt_id=info.attempt_id,
                **FRESH_ATTEMPT,
            )
        return Then.DECIDE_AGAIN
