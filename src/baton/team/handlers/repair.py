"""A TASK found in two FCoP stages during an evaluation (:mod:`baton.team.two_stages`)."""

from __future__ import annotations

from dataclasses import dataclass

from baton.fcop_port.port import FcopPort
from baton.store.journal import Journal
from baton.team import steps
from baton.team.attention import Escalations
from baton.team.book import RecordMoved
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.two_stages import repair_two_stages

__all__ = ["RepairTwoStages"]


@dataclass(frozen=True, slots=True)
class RepairTwoStages:
    port: FcopPort
    journal: Journal
    escalations: Escalations

    async def __call__(self, step: steps.Resolve, facts: Facts, slot: Slot | None) -> Outcome:
        task_id = facts.task.task_id
        escalate = self.escalations.escalate_locked
        if not await repair_two_stages(self.port, self.journal, task_id, escalate):
            raise RecordMoved(task_id)  # it needs attention now: decide from that
        return Then.DECIDE_AGAIN
