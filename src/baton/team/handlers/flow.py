"""Steps that only move the TASK along in the loop: note a state, queue it, wake its parent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from baton.team import steps
from baton.team.book import TaskBook
from baton.team.handlers.outcome import Outcome, Then
from baton.team.jobs import Job
from baton.team.next_step import Facts
from baton.team.slots import Slot

__all__ = ["NoteState", "QueueJob", "WakeParent"]


@dataclass(frozen=True, slots=True)
class NoteState:
    """Only baton's record moves (waiting for children, for a human)."""

    book: TaskBook

    async def __call__(self, step: steps.Note, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        if record.state is step.to:
            return Then.STOP
        await self.book.move(record, step.to, why=step.reason)
        # Decide again from the new state: a note can be a step on the way (a retried
        # TASK in review is noted in_review, then its review is queued), not only a wait.
        return Then.DECIDE_AGAIN


@dataclass(frozen=True, slots=True)
class QueueJob:
    """Hand the TASK to a slot worker of its role (that worker decides again)."""

    enqueue: Callable[[Job], None]

    async def __call__(self, step: steps.Queue, facts: Facts, slot: Slot | None) -> Outcome:
        self.enqueue(Job(facts.task.task_id, step.role, step.review))
        return Then.STOP


@dataclass(frozen=True, slots=True)
class WakeParent:
    """A child reported: its parent is evaluated again (its consolidation may be due)."""

    schedule: Callable[[str], None]

    async def __call__(self, step: steps.NotifyParent, facts: Facts, slot: Slot | None) -> Outcome:
        self.schedule(step.parent)
        return Then.STOP
