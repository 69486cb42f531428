"""Doing what :func:`~baton.team.decide.decide` said, one TASK at a time.

:meth:`Executor.evaluate` gathers the facts (in a worker thread), asks
``decide`` for the next step, performs it, and repeats until the step is a wait.
Every change of baton's record is a walk through :data:`~baton.team.states.TASK`
committed with its ``team.task.changed`` events (and, where it belongs, the
human request) in one transaction, guarded by the record's version, so two
evaluations can never both apply a move. FCoP writes go through the port in
worker threads; nothing here blocks the event loop.

A turn (:class:`~baton.team.steps.Dispatch`) is three commits: ``dispatched``
(with the slot's new pointer, before the prompt is sent), ``running`` (the
session is up and the prompt handed over) and ``finished`` with its outcome; the
task's lock is not held while the agent works. A turn still ``dispatched`` or
``running`` when its daemon is gone is ``interrupted`` and re-prompted with
context (see :mod:`baton.team.decide`).

No single TASK can stop the loop: an error in one TASK's step makes that TASK
``needs_attention`` (a record, an inbox request, an FCoP ISSUE); the others flow.

The executor is assembled: :class:`~baton.team.fcop_steps.FcopSteps` (the FCoP
steps), :class:`~baton.team.attention.TaskAttention` (needs attention, retry),
:class:`~baton.team.turns.RoleTurnDriver` (turns) over
:class:`~baton.team.book.TaskBook` (records); this module evaluates and dispatches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from baton.errors import ControlFlow
from baton.fcop_port.port import FcopPort
from baton.requests.ledger import Ledger, StaleRecord
from baton.store.journal import Journal
from baton.store.store import Store
from baton.team import decide as d
from baton.team import steps
from baton.team.book import RecordMoved
from baton.team.facts import FactSource, policy_for
from baton.team.fcop_steps import FcopSteps, ReviewSummary
from baton.team.prompts import Prompts
from baton.team.slots import Slot, Slots
from baton.team.turns import RoleTurn, RoleTurnDriver
from baton.team_config import TeamConfig

__all__ = ["BreakerTripped", "Executor", "Job", "ReviewSummary"]

log = logging.getLogger("baton.team.executor")

MAX_STEPS = 40
"""Steps of one evaluation before baton calls it a loop (a bug) and asks a human."""


@dataclass(frozen=True, slots=True)
class Job:
    """A TASK for a slot worker of ``role`` (its own work, or a review of it)."""

    task_id: str
    role: str
    review: bool = False


class BreakerTripped(ControlFlow):
    """A slot's role made ``zero_tool_limit`` turns in a row without a tool call."""

    def __init__(self, slot: Slot) -> None:
        super().__init__(slot.name)
        self.slot = slot


class Executor(FcopSteps, RoleTurnDriver):
    """Evaluates TASKs: facts → decide → one step, until it waits."""

    def __init__(
        self,
        *,
        port: FcopPort,
        store: Store,
        journal: Journal,
        ledger: Ledger,
        team: TeamConfig,
        slots: Slots,
        run_id: str,
        now: Callable[[], str],
        enqueue: Callable[[Job], None],
        schedule: Callable[[str], None],
        watch_request: Callable[[str, str], None],
        review_summary: ReviewSummary | None = None,
    ) -> None:
        self.port = port
        self.store = store
        self.journal = journal
        self.ledger = ledger
        self.team = team
        self.policy = policy_for(team)
        self.slots = slots
        self.run_id = run_id
        self.now = now
        self.enqueue = enqueue
        self.schedule = schedule
        self.watch_request = watch_request
        self.review_summary: ReviewSummary = review_summary or self.review_document
        """Builds the text a human reviews (blocking reads: called in a worker thread)."""
        self.facts = FactSource(port, store, team)
        self.prompts = Prompts(port, team)
        self.live: set[tuple[str, int]] = set()
        """(task, dispatch) of the turns running in this daemon right now."""
        self._locks: dict[str, asyncio.Lock] = {}
        self.dispatch_log: list[tuple[str, str, str]] = []
        """(slot, turn kind, task id) in dispatch order; tests and traces read it."""
        self.prompt_started: Callable[[str, str, float], None] | None = None
        self.after_turn: Callable[[], Awaitable[None]] | None = None
        """Awaited after every turn, before the TASK is looked at again (intake's sweep:
        whatever the agent wrote under ``fcop/`` is judged before Core reads it)."""

    # ------------------------------------------------------------------ records

    # ------------------------------------------------------------------ evaluate

    async def evaluate(
        self, task_id: str, *, slot: Slot | None = None, for_review: bool = False
    ) -> None:
        """Drive one TASK until it waits; a failure makes it ``needs_attention``."""
        try:
            await self._evaluate(task_id, slot, for_review)
        except (asyncio.CancelledError, BreakerTripped):
            raise
        except Exception as exc:
            log.exception("evaluating %s failed", task_id)
            with contextlib.suppress(Exception):
                await self._attention(
                    task_id, f"baton could not proceed: {type(exc).__name__}: {exc}"
                )

    async def _evaluate(self, task_id: str, slot: Slot | None, for_review: bool) -> None:
        slot_role = slot.spec.name if slot is not None else None
        for _ in range(MAX_STEPS):
            turn: RoleTurn | None = None
            async with self._lock(task_id):
                facts = await asyncio.to_thread(
                    self.facts.gather,
                    task_id,
                    slot_role=slot_role,
                    for_review=for_review,
                    live=frozenset(self.live),
                )
                if facts.record is None and facts.task.stage not in ("missing", "ambiguous"):
                    await self._first_seen(facts)
                    continue
                step = d.decide(facts, self.policy)
                if isinstance(step, steps.Wait):
                    return
                try:
                    if isinstance(step, steps.Dispatch):
                        assert slot is not None
                        turn = await self.begin_turn(facts, step.kind, slot)
                    elif not await self._do(step, facts, slot):
                        return
                except (RecordMoved, StaleRecord):
                    continue
            if turn is not None:
                await self.run_turn(turn)
                if self.after_turn is not None:
                    await self.after_turn()
                assert slot is not None
                if slot.record.zero_tool_streak >= self.team.zero_tool_limit:
                    raise BreakerTripped(slot)
        await self._attention(task_id, f"baton made {MAX_STEPS} steps without settling (a bug)")

    async def _first_seen(self, facts: d.Facts) -> None:
        info = await asyncio.to_thread(self.facts.task, facts.task.task_id)
        if info is None:
            return
        human = info.recipient == self.team.human
        role = self.team.human if human else (facts.role or info.recipient)
        await self.seen(info, role, for_human=human)

    async def _do(self, step: steps.Step, facts: d.Facts, slot: Slot | None) -> bool:
        """Perform one non-turn step; True to keep evaluating this TASK."""
        record = facts.record
        task_id = facts.task.task_id
        if isinstance(step, steps.Queue):
            self.enqueue(Job(task_id, step.role, step.review))
            return False
        if isinstance(step, steps.Note):
            assert record is not None
            if record.state is step.to:
                return False
            await self.move(record, step.to, why=step.reason)
            # Decide again from the new state: a note can be a step on the way (a retried
            # TASK in review is noted in_review, then its review is queued), not only a wait.
            return True
        if isinstance(step, steps.Resolve):
            await self._resolve(task_id)
            return True
        if isinstance(step, steps.Claim):
            return await self._claim(facts)
        if isinstance(step, steps.Submit):
            return await self._submit(facts, step)
        if isinstance(step, steps.OpenReview):
            await self._open_review(facts, step)
            return False
        if isinstance(step, steps.ApplyHumanReview):
            return await self._apply_human_review(facts, step)
        if isinstance(step, steps.ApplyDecision):
            return await self._apply_decision(facts, step)
        if isinstance(step, steps.NotifyParent):
            self.schedule(step.parent)
            return False
        if isinstance(step, steps.Settle):
            await self._settle(facts)
            return False
        if isinstance(step, steps.Attention):
            await self._attention_locked(task_id, step.reason)
            return False
        if isinstance(step, steps.Fail):
            await self._attention_locked(task_id, step.reason, failed=True)
            return False
        if isinstance(step, steps.Retry):
            return await self._retry(facts, step)
        if isinstance(step, steps.NotRun):
            return await self._not_run(facts, step)
        raise AssertionError(f"unhandled step {step!r}")

    # ---------------------------------------------------------------------- turns
