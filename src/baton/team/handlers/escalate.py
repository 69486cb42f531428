"""A TASK that needs a human (``needs_attention`` or ``failed``), and the human's retry of it."""

from __future__ import annotations

from dataclasses import dataclass

from baton.team import steps
from baton.team.attention import Escalations
from baton.team.book import TaskBook
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts
from baton.team.records import FRESH_ATTEMPT
from baton.team.slots import Slot
from baton.team.states import TaskState

__all__ = ["Escalate", "RetryTask"]


@dataclass(frozen=True, slots=True)
class Escalate:
    """``Attention`` (``failed=False``) or ``Fail`` (``failed=True``): record, request, ISSUE."""

    escalations: Escalations
    failed: bool = False

    async def __call__(
        self, step: steps.Attention | steps.Fail, facts: Facts, slot: Slot | None
    ) -> Outcome:
        await self.escalations.escalate_locked(facts.task.task_id, step.reason, failed=self.failed)
        return Then.STOP


@dataclass(frozen=True, slots=True)
class RetryTask:
    """The human asked to retry a TASK that needed attention: claimed again, counters fresh."""

    book: TaskBook
    human: str

    async def __call__(self, step: steps.Retry, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        await self.book.move_delivering(
            record,
            TaskState.CLAIMED,
            step.request_id,
            why=f"{self.human} asked to retry",
            attention_request=None,
            **FRESH_ATTEMPT,
        )
        return Then.DECIDE_AGAIN
