"""Submitting a TASK's report (T3), first accepting the children its leader consolidated (T4)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort
from baton.team import steps
from baton.team.attention import Escalations
from baton.team.book import TaskBook
from baton.team.handlers.dependents import Dependents
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts, TeamRules
from baton.team.slots import Slot
from baton.team.states import TaskState

__all__ = ["SubmitReport"]


@dataclass(frozen=True, slots=True)
class SubmitReport:
    port: FcopPort
    book: TaskBook
    escalations: Escalations
    dependents: Dependents
    rules: TeamRules

    async def __call__(self, step: steps.Submit, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.record
        assert record is not None and facts.role is not None
        task_id = facts.task.task_id
        for child in step.accept:
            reason = f"Accepted by {facts.role}: consolidated into {step.report_id} for {task_id}."
            try:
                await asyncio.to_thread(
                    self.port.approve, child, approver=facts.role, reason=reason
                )
            except CoordinationError as exc:
                await self.escalations.issue(child, f"could not accept {child}: {exc}")
                continue
            self.dependents.schedule(child)
        await asyncio.to_thread(
            self.port.submit, task_id, actor=facts.role, report_ref=step.report_id
        )
        await self.book.move(
            record,
            TaskState.IN_REVIEW,
            why=f"report {step.report_id} ({step.result}) submitted",
            report_ref=step.report_id,
            result=step.result,
        )
        if self.rules.child_acceptance == "on_consolidation":
            # reported = finished, for its siblings
            await self.dependents.release(facts.task.parent)
        return Then.DECIDE_AGAIN
