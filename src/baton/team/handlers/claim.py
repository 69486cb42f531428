"""Claiming a TASK (T2) for its role, and claiming one that can never run to report why."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from baton.fcop_errors import LifecycleConflict
from baton.fcop_port.port import FcopPort, TransitionInfo
from baton.team import steps
from baton.team.attention import SYSTEM_SENDER, Escalations
from baton.team.book import TaskBook
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts
from baton.team.records import FRESH_ATTEMPT
from baton.team.slots import Slot
from baton.team.states import TaskState
from baton.workflow.ordering import Unmet, not_run_report

__all__ = ["ClaimNotRun", "ClaimTask"]


async def _claim(port: FcopPort, escalations: Escalations, facts: Facts) -> TransitionInfo | None:
    """T2 by the TASK's role; a conflict (claimed elsewhere) makes it need attention."""
    assert facts.role is not None
    task_id = facts.task.task_id
    try:
        return await asyncio.to_thread(port.claim, task_id, actor=facts.role)
    except LifecycleConflict as exc:
        await escalations.escalate_locked(task_id, f"claimed elsewhere: {exc}")
        return None


@dataclass(frozen=True, slots=True)
class ClaimTask:
    port: FcopPort
    book: TaskBook
    escalations: Escalations

    async def __call__(self, step: steps.Claim, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        claim = await _claim(self.port, self.escalations, facts)
        if claim is None:
            return Then.STOP
        await self.book.move(
            record, TaskState.CLAIMED, attempt_id=claim.attempt_id, **FRESH_ATTEMPT
        )
        return Then.DECIDE_AGAIN


@dataclass(frozen=True, slots=True)
class ClaimNotRun:
    """Claim a TASK whose prerequisites can never finish and file baton's REPORT on it.

    The next step submits it like any report (T3): its sender's consolidation then sees
    a ``blocked`` child with the reasons, instead of work that ran without its inputs.
    """

    port: FcopPort
    book: TaskBook
    escalations: Escalations

    async def __call__(self, step: steps.NotRun, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        claim = await _claim(self.port, self.escalations, facts)
        if claim is None:
            return Then.STOP
        result, body = not_run_report(Unmet(step.reasons))
        await asyncio.to_thread(
            self.port.write_report,
            task_id=facts.task.task_id,
            attempt_id=claim.attempt_id,
            sender=SYSTEM_SENDER,
            recipient=facts.task.sender,
            result=result,
            body=body,
        )
        await self.book.move(
            record,
            TaskState.CLAIMED,
            why="not run: " + "; ".join(step.reasons),
            attempt_id=claim.attempt_id,
            **FRESH_ATTEMPT,
        )
        return Then.DECIDE_AGAIN
