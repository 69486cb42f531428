"""``baton up``: the team loop that drives every TASK through :class:`~baton.team.executor.Executor`.

The loop, one direction::

    doorbell ──TaskArrived──► record (seen) ──► evaluate ──Queue──► role queue ──► slot worker
    store wake (outbox rows, answers) ───────────► evaluate          │ evaluate in the slot:
    human requests answered (any process) ───────► evaluate          │ claim, turns, submit...

Start-up order, so that recovery never races the work (issue 9): (1) take the
project (one ``baton up`` per project, :mod:`~baton.team.ownership`); (2) move any
pre-store side files into the store; (3) recover (:mod:`~baton.team.recovery`):
turns left ``dispatched`` or ``running`` by a dead loop become ``interrupted``,
abandoned publication temporaries are removed, TASKs in two FCoP stages are
repaired by rule or marked ``needs_attention``; (4) open the slots (bindings
written); (5) arm the doorbell and re-evaluate every live TASK from FCoP; (6) drain
the outbox and wait again on every open human request; (7) only then start the
slot workers.

Design points kept from the first loop: no work, no wake (a slot's session is
created on its first job); ``concurrency`` slots per role share one queue;
FCoP is the truth (every decision re-reads it); a per-role zero-tool-call
breaker parks a role's jobs for a cooldown. Every state change is a store
transaction with its event, nothing is held in memory that a crash could lose,
and one TASK's failure never stops the loop (:meth:`Executor.evaluate`).

:class:`TeamLoop` holds only what its tasks share: the role queues, the parked jobs
of a tripped breaker, the stop event and the :class:`~baton.team.activity.Activity`
that says "idle". Everything it does is a collaborator it builds and owns: the
executor and its step handlers, recovery, the outbox reader, the answer watch, the
intake sweeps, the doorbell's arrivals, the breaker, ownership of the project.

Length: the constructor is the team's composition root (about half the module: each
collaborator built with exactly what it uses); the rest is the loop's own tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from baton.aiotasks import cancel_and_wait
from baton.budgets.limits import BudgetConfig
from baton.events.sequencer import utc_now
from baton.fcop_port.port import FcopPort
from baton.fcop_port.recovery import (
    clean_temporaries,
)
from baton.inbox.doorbell import (
    Doorbell,
    DoorbellEvent,
)
from baton.intake.sweep import Sweeper
from baton.requests.ledger import Ledger
from baton.requests.notify import Notifier
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.activity import Activity
from baton.team.answers import AnswerWatch
from baton.team.arrivals import Arrivals
from baton.team.attention import Escalations
from baton.team.book import TaskBook
from baton.team.breaker import Breaker
from baton.team.budgets import BudgetWakeups, TeamBudgets
from baton.team.contract import RoleSessionFactory
from baton.team.drop import DropReport, TreeDropper
from baton.team.executor import BreakerTripped, Executor
from baton.team.facts import FactSource, policy_for
from baton.team.handlers import ReviewDocuments, ReviewSummary, StepParts, handler_table
from baton.team.jobs import Job
from baton.team.outbox import OutboxReader
from baton.team.ownership import Ownership, TeamLoopBusy
from baton.team.prompts import Prompts, recorded_in
from baton.team.reconcile import HolderLookup
from baton.team.records import RefusalRecord, SlotRecord
from baton.team.recovery import LIVE_STATES, Recovery
from baton.team.slots import Slot, Slots
from baton.team.summary import RunSummary, summarize
from baton.team.sweeps import LoopSweeps
from baton.team.turns import TurnRunner
from baton.team.workspaces import Workspaces
from baton.team_config import TeamConfig

__all__ = ["RunSummary", "TeamLoop", "TeamLoopBusy"]

log = logging.getLogger("baton.team.loop")


class TeamLoop:
    """Runs the team until stopped, or until idle."""

    def __init__(
        self,
        *,
        port: FcopPort,
        team: TeamConfig,
        factory: RoleSessionFactory,
        store: Store,
        journal: Journal,
        run_id: str,
        ledger: Ledger | None = None,
        state_dir: Path | None = None,
        review_summary: ReviewSummary | None = None,
        watch_group: Callable[[int], None] | None = None,
        doorbell_step_ms: int = 5,
        wall_clock: Callable[[], float] = time.time,
        sweep_interval: float = 5.0,
        holders: HolderLookup | None = None,
        notifier: Notifier | None = None,
        budgets: TeamBudgets | None = None,
    ) -> None:
        self.port = port
        self.port.human = team.human
        self.team = team
        self.store = store
        self.journal = journal
        self.run_id = run_id
        self.ledger = ledger or Ledger(store)
        self.wall_clock = wall_clock
        self.activity = Activity()
        self._queues: dict[str, asyncio.Queue[Job]] = {r: asyncio.Queue() for r in team.roles}
        self._queued: set[tuple[str, str, bool]] = set()
        self._stop = asyncio.Event()
        self._stopped_by: str | None = None

        self.slots = Slots(
            team=team,
            fcop_root=port.root,
            store_path=store.path,
            journal=journal,
            factory=factory,
            now=utc_now,
            watch=watch_group,
        )
        self.workspaces = Workspaces.open(
            port.root, team.isolation, store=store, journal=journal, now=utc_now
        )
        facts = FactSource(port, store, team, isolated=self.workspaces.enabled, budgets=budgets)
        prompts = Prompts(port=port, team=team, recorded=recorded_in(store))
        self.book = TaskBook(
            store=store, journal=journal, ledger=self.ledger, facts=facts, now=utc_now
        )
        self.answers = AnswerWatch(
            store=store,
            ledger=self.ledger,
            live_states=LIVE_STATES,
            schedule=self.schedule,
            notifier=notifier,
        )
        self.escalations = Escalations(
            book=self.book, port=port, team=team, run_id=run_id, watch_request=self.answers.watch
        )
        self.turns = TurnRunner(
            book=self.book,
            slots=self.slots,
            prompts=prompts,
            team=team,
            run_id=run_id,
            workspaces=self.workspaces,
        )
        self.budget_wakeups = BudgetWakeups(
            budgets=budgets or TeamBudgets(BudgetConfig(), run_id),
            store=store,
            journal=journal,
            wake_all=self._reevaluate_held,
            wall_clock=wall_clock,
        )
        rules = policy_for(team)
        handlers = handler_table(
            StepParts(
                port=port,
                book=self.book,
                journal=journal,
                ledger=self.ledger,
                escalations=self.escalations,
                turns=self.turns,
                rules=rules,
                run_id=run_id,
                review_summary=review_summary
                or ReviewDocuments(prompts, store, self.budget_wakeups.budgets.config),
                enqueue=self._enqueue,
                schedule=self.schedule,
                watch_request=self.answers.watch,
                workspaces=self.workspaces,
                held=self.budget_wakeups.held,
            )
        )
        self.executor = Executor(
            facts=facts,
            rules=rules,
            book=self.book,
            handlers=handlers,
            turns=self.turns,
            escalations=self.escalations,
            human=team.human,
            zero_tool_limit=team.zero_tool_limit,
        )
        self.ownership = Ownership(store=store, run_id=run_id)
        self.recovery = Recovery(
            port=port,
            team=team,
            store=store,
            journal=journal,
            book=self.book,
            turns=self.turns,
            escalations=self.escalations,
            slots=self.slots,
            activity=self.activity,
            evaluate=self._evaluate,
            schedule=self.schedule,
            state_dir=state_dir,
            holders=holders,
            workspaces=self.workspaces,
        )
        self.dropper = TreeDropper(
            book=self.book,
            ledger=self.ledger,
            escalations=self.escalations,
            slots=self.slots,
            turns=self.turns,
            workspaces=self.workspaces,
            human=team.human,
        )
        self.outbox = OutboxReader(
            store=store,
            journal=journal,
            ledger=self.ledger,
            run_id=run_id,
            slots=self.slots,
            turns=self.turns,
            answers=self.answers,
            activity=self.activity,
            schedule=self.schedule,
            dropper=self.dropper,
        )
        self.events: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
        quarantine = state_dir / "quarantine" if team.quarantine and state_dir else None
        self.doorbell = Doorbell(
            port,
            self._route,
            self.events,
            human=team.human,
            issue_sender="BATON",
            max_task_bytes=team.max_task_bytes,
            quarantine_dir=quarantine,
            refused={},
            step_ms=doorbell_step_ms,
        )
        lifecycle = port.lifecycle
        self.sweeper = Sweeper(
            port.root,
            worker=self.doorbell.worker,
            limits=self.doorbell.limits,
            watch=True,
            # A REPORT/REVIEW/TASK changed in place: the lifecycle's indexes read it again.
            on_change=lifecycle.forget if lifecycle is not None else None,
        )
        """Screens every file Core reads outside the inbox (issue 9 item 5); with its
        change feed a pass costs O(changes) (issue 15); closed when :meth:`run` ends."""
        self.sweeps = LoopSweeps(self.sweeper, self.doorbell, self.events, sweep_interval)
        self.arrivals = Arrivals(
            events=self.events,
            book=self.book,
            journal=journal,
            activity=self.activity,
            evaluate=self._evaluate,
            schedule=self.schedule,
        )
        self.breaker = Breaker(
            team=team,
            store=store,
            slots=self.slots,
            escalations=self.escalations,
            activity=self.activity,
            enqueue=self._enqueue,
            wall_clock=wall_clock,
        )
        self.executor.after_turn = self.sweeps.after_turn

    # ------------------------------------------------------------------ surface

    @property
    def dispatch_log(self) -> list[tuple[str, str, str]]:
        return self.turns.dispatch_log

    def stop(self, reason: str = "stopped") -> None:
        """Ask a running :meth:`run` to shut down (running turns are interrupted, recorded)."""
        self._stopped_by = reason
        self._stop.set()

    def schedule(self, task_id: str) -> None:
        """Re-evaluate ``task_id`` soon (a child changed, an answer came...)."""
        self.activity.spawn(self._evaluate(task_id), f"evaluate-{task_id}")

    # --------------------------------------------------------------------- run

    async def run(self, *, until_idle: bool = False) -> RunSummary:
        """Run the loop. ``until_idle``: return once nothing can progress without input.

        A :meth:`stop` asked before or during start-up holds: start-up ends at its next
        step and the loop shuts down as after a run (a Ctrl-C at start-up used to be
        lost, and ``baton up`` then waited forever for a doorbell that never armed).
        """
        if self._stopped_by is None:
            self._stop = asyncio.Event()
        await self.ownership.take()
        try:
            for step in (
                self.recovery.migrate,
                self._sweep_at_start,  # before recovery reads anything under fcop/
                self._warm,
                self.recovery.recover,
                self._open_slots,
            ):
                if self._stop.is_set():
                    break
                await step()
            else:
                await self._serve(until_idle)
        finally:
            await self.slots.close_all(self._stopped_by or "the team loop stopped")
            # Best effort at shutdown: each is retried by the next ``baton up``.
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.doorbell.worker.close)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.sweeper.close)  # waits out a pass in flight
            with contextlib.suppress(Exception):
                await asyncio.to_thread(clean_temporaries, self.port)
            await self.ownership.release()
        return await self.summary()

    async def _sweep_at_start(self) -> None:
        await self.sweeps.at_start(self._stop.is_set, self._pause)

    async def _pause(self, seconds: float) -> bool:
        return await self._unless_stopped(asyncio.sleep(seconds))

    async def _open_slots(self) -> None:
        await self.slots.open(await self.store.aread(_slot_records))
        self.doorbell.remember_refused(await self.store.aread(_refused_in_place))

    async def _serve(self, until_idle: bool) -> None:
        """The doorbell, router, outbox and sweeps, then one worker per slot, until stopped."""
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(self.doorbell.run(self._stop), name="doorbell")
            router = tg.create_task(self.arrivals.route(), name="router")
            listener = tg.create_task(self.outbox.listen(), name="store-wake")
            sweeps = tg.create_task(self.sweeps.every_interval(), name="sweep")
            budget = tg.create_task(self.budget_wakeups.listen(), name="budget-wake")
            workers: list[asyncio.Task[None]] = []
            try:
                if await self._unless_stopped(self.doorbell.ready.wait()):
                    for step in (
                        self.recovery.reevaluate_all,
                        self.outbox.drain,
                        self.answers.watch_open,
                        self.activity.settle_background,  # evaluations recovery scheduled
                    ):
                        if self._stop.is_set():
                            break
                        await step()
                    else:
                        workers = [
                            tg.create_task(self._worker(slot), name=slot.name)
                            for slot in self.slots.all()
                        ]
                        await self._unless_stopped(self._wait_idle() if until_idle else None)
            finally:
                self._stop.set()
            for task in (
                *workers,
                router,
                listener,
                sweeps,
                budget,
                *self.budget_wakeups.cancel(),
                *self.activity.background,
                *self.answers.waiting.values(),
                *self.breaker.timers,
            ):
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await asyncio.wait_for(asyncio.shield(watcher), timeout=30)

    async def _unless_stopped(self, work: Coroutine[Any, Any, Any] | None) -> bool:
        """Await ``work`` (``None``: nothing, only the stop) unless :meth:`stop` comes
        first; whether it finished."""
        stopper = asyncio.ensure_future(self._stop.wait())
        waiter = asyncio.ensure_future(work) if work is not None else None
        try:
            await asyncio.wait(
                {stopper, *([waiter] if waiter else [])}, return_when=asyncio.FIRST_COMPLETED
            )
            return waiter is not None and waiter.done() and not waiter.cancelled()
        finally:
            await cancel_and_wait([stopper, waiter])

    async def _warm(self) -> None:
        """Build the lifecycle's REPORT/REVIEW/children indexes in the background.

        Reading each file once is O(history) (seconds at 10,000 settled tasks); done here,
        beside recovery and the first dispatches, instead of inside the first look-up
        that needs it. Stops between folders when the loop stops.
        """
        lifecycle = self.port.lifecycle
        if lifecycle is None:
            return
        stop = self._stop

        async def warm() -> None:
            try:
                await asyncio.to_thread(lifecycle.warm, stop.is_set)
            except Exception:  # look-ups build the indexes themselves: only slower
                log.exception("building the lifecycle's indexes failed (look-ups build them)")

        self.activity.spawn(warm(), "warm-indexes")

    # ----------------------------------------------------------------- routing

    async def _reevaluate_held(self) -> None:
        """A limit was raised or a window reopened: what budgets held is decided again."""
        with self.activity.working():
            await self.recovery.reevaluate_all()

    def _route(self, recipient: str) -> str | None:
        spec = self.team.role_for(recipient)
        return spec.name if spec else None

    async def _evaluate(self, task_id: str) -> None:
        await self.executor.evaluate(task_id)

    def _enqueue(self, job: Job) -> None:
        key = (job.task_id, job.role, job.review)
        if key in self._queued or job.role not in self._queues:
            return
        self._queued.add(key)
        self.activity.begin()
        self._queues[job.role].put_nowait(job)

    # ------------------------------------------------------------------ workers

    async def _worker(self, slot: Slot) -> None:
        queue = self._queues[slot.spec.name]
        await self.recovery.adopt(slot)  # a turn a live holder kept across a restart, first
        while True:
            job = await queue.get()
            self._queued.discard((job.task_id, job.role, job.review))
            parked = False
            try:
                until = await asyncio.to_thread(self.breaker.open_until, slot.spec.name)
                if until > self.wall_clock():
                    self.breaker.park(slot.spec.name, job, until)
                    parked = True
                    continue
                slot.busy = True
                try:
                    await self.executor.evaluate(job.task_id, slot=slot, for_review=job.review)
                finally:
                    slot.busy = False
                await self.outbox.drain()
            except BreakerTripped:
                await self.breaker.trip(slot, job.task_id, job)
                parked = True
            except asyncio.CancelledError:
                raise
            except Exception:  # one job's failure never stops the slot's worker
                log.exception("%s: job %s failed", slot.name, job)
            finally:
                queue.task_done()
                if not parked:
                    self.activity.end()

    # ---------------------------------------------------------------- idleness

    def _idle(self) -> bool:
        return self.activity.busy <= 0 and self.events.empty()

    async def _wait_idle(self) -> None:
        while True:
            await self.activity.wait(self._idle)
            if self.doorbell.settling:
                await self.doorbell.wait_settled()  # a file still being written
                continue
            emitted = await self.doorbell.scan("rescan")
            drained = await self.outbox.drain()
            if emitted == 0 and drained == 0 and self._idle():
                return

    async def drop_now(self, task_id: str, reason: str) -> DropReport:
        """Drop ``task_id``'s tree while no ``baton up`` runs (``baton task drop``): this
        process takes the project for the drop, so no loop can start meanwhile."""
        await self.ownership.take()
        try:
            await self.slots.open(await self.store.aread(_slot_records))
            return await self.dropper.drop(task_id, reason)
        finally:
            await self.ownership.release()

    async def summary(self) -> RunSummary:
        """Where every TASK stands now (what ``--until-idle`` prints)."""
        return await summarize(
            self.store, now=self.wall_clock(), stopped=self._stopped_by is not None
        )


def _slot_records(tx: Tx) -> list[SlotRecord]:
    return [SlotRecord.from_row(r) for r in team_sql.all_slots(tx)]


def _refused_in_place(tx: Tx) -> dict[str, str | None]:
    return {
        r.name: r.issue_id
        for r in (RefusalRecord.from_row(row) for row in team_sql.refused_in_place(tx))
    }
