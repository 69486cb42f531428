"""FCoP says the TASK is done: baton's record is settled and what waited on it is woken."""

from __future__ import annotations

from dataclasses import dataclass

from baton.team import steps
from baton.team.book import TaskBook
from baton.team.handlers.dependents import Dependents
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.states import TaskState

__all__ = ["SettleTask"]


@dataclass(frozen=True, slots=True)
class SettleTask:
    book: TaskBook
    dependents: Dependents

    async def __call__(self, step: steps.Settle, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        await self.book.move_delivering(
            record, TaskState.SETTLED, record.review_request, why="done in FCoP"
        )
        await self.dependents.finished(facts.task.parent)
        return Then.STOP
