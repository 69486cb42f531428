"""A turn for the slot evaluating the TASK: committed ``dispatched``, then run outside the lock."""

from __future__ import annotations

from dataclasses import dataclass

from baton.team import steps
from baton.team.handlers.outcome import Outcome, RunTurn
from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.turns import TurnRunner

__all__ = ["DispatchTurn"]


@dataclass(frozen=True, slots=True)
class DispatchTurn:
    turns: TurnRunner

    async def __call__(self, step: steps.Dispatch, facts: Facts, slot: Slot | None) -> Outcome:
        # next_step answers Dispatch only to a slot worker (``Facts.own_slot`` /
        # ``reviewer_slot``); the coordinator is answered Queue instead.
        assert slot is not None, "a turn is dispatched only in a slot"
        return RunTurn(await self.turns.begin(facts, step.kind, slot))
