"""Doing what :func:`~baton.team.next_step.next_step` said, one TASK at a time.

:meth:`Executor.evaluate` gathers the facts (in a worker thread), asks
``next_step`` for the next step, hands it to that step's handler
(:func:`~baton.team.handlers.handler_table`), and repeats until the step is a wait.
Every change of baton's record is a walk through :data:`~baton.team.states.TASK`
committed with its ``team.task.changed`` events (and, where it belongs, the
human request) in one transaction, guarded by the record's version, so two
evaluations can never both apply a move. FCoP writes go through the port in
worker threads; nothing here blocks the event loop.

A turn (:class:`~baton.team.steps.Dispatch`) is three commits: ``dispatched``
(with the slot's new pointer, before the prompt is sent), ``running`` (the
session is up and the prompt handed over) and ``finished`` with its outcome; the
task's lock is not held while the agent works (:mod:`baton.team.turns`). A turn
still ``dispatched`` or ``running`` when its team loop is gone is ``interrupted``
and re-prompted with context (see :mod:`baton.team.next_step`).

No single TASK can stop the loop: an error in one TASK's step makes that TASK
``needs_attention`` (a record, an inbox request, an FCoP ISSUE); the others flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from baton.errors import ControlFlow
from baton.requests.ledger import StaleRecord
from baton.team.attention import Escalations
from baton.team.book import RecordMoved, TaskBook
from baton.team.facts import FactSource
from baton.team.handlers import HandlerTable, RunTurn, Then
from baton.team.next_step import Facts, TeamRules, next_step
from baton.team.slots import Slot
from baton.team.steps import Wait
from baton.team.turns import RoleTurn, TurnRunner

__all__ = ["BreakerTripped", "Executor"]

log = logging.getLogger("baton.team.executor")

MAX_STEPS = 40
"""Steps of one evaluation before baton calls it a loop (a bug) and asks a human."""


class BreakerTripped(ControlFlow):
    """A slot's role made ``zero_tool_limit`` turns in a row without a tool call."""

    def __init__(self, slot: Slot) -> None:
        super().__init__(slot.name)
        self.slot = slot


@dataclass(kw_only=True, eq=False)
class Executor:
    """Evaluates TASKs: facts → next step → its handler, until it waits."""

    facts: FactSource
    rules: TeamRules
    book: TaskBook
    handlers: HandlerTable
    turns: TurnRunner
    escalations: Escalations
    human: str
    zero_tool_limit: int
    after_turn: Callable[[], Awaitable[None]] | None = field(default=None, init=False)
    """Awaited after every turn, before the TASK is looked at again (intake's sweep:
    whatever the agent wrote under ``fcop/`` is judged before Core reads it)."""

    async def evaluate(
        self, task_id: str, *, slot: Slot | None = None, for_review: bool = False
    ) -> None:
        """Drive one TASK until it waits; a failure makes it ``needs_attention``."""
        try:
            await self._evaluate(task_id, slot, for_review)
        except (asyncio.CancelledError, BreakerTripped):
            raise
        except Exception as exc:  # one TASK's bug never stops the loop: a human looks at it
            log.exception("evaluating %s failed", task_id)
            with contextlib.suppress(Exception):
                await self.escalations.escalate(
                    task_id, f"baton could not proceed: {type(exc).__name__}: {exc}"
                )

    async def _evaluate(self, task_id: str, slot: Slot | None, for_review: bool) -> None:
        slot_role = slot.spec.name if slot is not None else None
        for _ in range(MAX_STEPS):
            turn: RoleTurn | None = None
            async with self.book.lock(task_id):
                facts = await asyncio.to_thread(
                    self.facts.gather,
                    task_id,
                    slot_role=slot_role,
                    for_review=for_review,
                    live=frozenset(self.turns.live),
                )
                if facts.record is None and facts.task.stage not in ("missing", "ambiguous"):
                    await self._first_seen(facts)
                    continue
                step = next_step(facts, self.rules)
                if isinstance(step, Wait):
                    return
                try:
                    outcome = await self.handlers.perform(step, facts, slot)
                except (RecordMoved, StaleRecord):
                    continue
                if outcome is Then.STOP:
                    return
                if isinstance(outcome, RunTurn):
                    turn = outcome.turn
            if turn is not None:
                await self.turns.run(turn)
                if self.after_turn is not None:
                    await self.after_turn()
                if turn.slot.record.zero_tool_streak >= self.zero_tool_limit:
                    raise BreakerTripped(turn.slot)
        await self.escalations.escalate(
            task_id, f"baton made {MAX_STEPS} steps without settling (a bug)"
        )

    async def _first_seen(self, facts: Facts) -> None:
        info = await asyncio.to_thread(self.facts.task, facts.task.task_id)
        if info is None:
            return
        human = info.recipient == self.human
        role = self.human if human else (facts.role or info.recipient)
        await self.book.seen(info, role, for_human=human)
