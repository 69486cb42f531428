"""A TASK held by a budget: parked (``needs_budget``), let go on, or its claim deferred."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from baton.budgets.rules import Breach, raise_hint
from baton.team import steps
from baton.team.book import TaskBook
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.states import TaskState

__all__ = ["DeferForBudget", "ParkTask", "UnparkTask"]

Held = Callable[[Breach], Awaitable[None]]
"""Told what holds a TASK back (a window's reopening is then a wake-up)."""


@dataclass(frozen=True, slots=True)
class ParkTask:
    """``needs_budget`` with the spend and the limit, and ``budget.exceeded`` (parked) in the
    same transaction; the human is told how to raise it."""

    book: TaskBook
    held: Held

    async def __call__(self, step: steps.Park, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        breach = step.breach
        reason = f"budget: {breach.describe()} (raise it: {raise_hint(breach)})"
        event = breach.exceeded("parked", record.task_id)
        await self.book.move(
            record, TaskState.NEEDS_BUDGET, why=reason, reason=reason, extra=[event]
        )
        await self.held(breach)
        return Then.STOP


@dataclass(frozen=True, slots=True)
class UnparkTask:
    """No limit holds the parked TASK any more: claimed again, and decided from there."""

    book: TaskBook

    async def __call__(self, step: steps.Unpark, facts: Facts, slot: Slot | None) -> Outcome:
        record = facts.known_record
        await self.book.move(
            record, TaskState.CLAIMED, why="its budget lets it go on (raised, or its window)"
        )
        return Then.DECIDE_AGAIN


@dataclass(frozen=True, slots=True)
class DeferForBudget:
    """Not claimed while a budget is past its soft limit; a window's reopening wakes it."""

    held: Held

    async def __call__(self, step: steps.DeferClaim, facts: Facts, slot: Slot | None) -> Outcome:
        await self.held(step.breach)
        return Then.STOP
