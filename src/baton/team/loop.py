"""``baton up``: the team loop that drives every TASK through :class:`~baton.team.executor.Executor`.

The loop, one direction::

    doorbell ──TaskArrived──► record (seen) ──► evaluate ──Queue──► role queue ──► slot worker
    store wake (outbox rows, answers) ───────────► evaluate          │ evaluate in the slot:
    human requests answered (any process) ───────► evaluate          │ claim, turns, submit...

Start-up order, so that recovery never races the work (issue 9): (1) take the
project (one ``baton up`` per project, checked in the store); (2) move any
pre-store side files into the store; (3) recover: turns left ``dispatched`` or
``running`` by a dead daemon become ``interrupted``, abandoned publication
temporaries are removed, TASKs in two FCoP stages are repaired by rule or marked
``needs_attention``; (4) open the slots (bindings written); (5) arm the
doorbell and re-evaluate every live TASK from FCoP; (6) drain the outbox and
wait again on every open human request; (7) only then start the slot workers.

Design points kept from the first loop: no work, no wake (a slot's session is
created on its first job); ``concurrency`` slots per role share one queue;
FCoP is the truth (every decision re-reads it); a per-role zero-tool-call
breaker parks a role's jobs for a cooldown. New: every state change is a store
transaction with its event, nothing is held in memory that a crash could lose,
and one TASK's failure never stops the loop (:meth:`Executor.evaluate`).

Length: one class, the daemon's event loop. Its tasks (doorbell router, store
waker, sweeper, slot workers, request watchers, timers) share the role queues,
the busy count that says "idle", the parked jobs of a tripped breaker and the
stop event; each is a short method here, and what they call is elsewhere
(decisions in :mod:`~baton.team.decide`, doing in :mod:`~baton.team.executor`,
start-up in :mod:`~baton.team.startup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.aiotasks import cancel_and_wait
from baton.events.model import TeamRefusal
from baton.fcop_port.port import FcopPort
from baton.fcop_port.recovery import (
    clean_temporaries,
)
from baton.inbox.doorbell import (
    Doorbell,
    DoorbellEvent,
    TaskArrived,
    TaskRefused,
    refusal_payload,
)
from baton.intake.stability import FileFacts
from baton.intake.sweep import Sweeper, SweepReport
from baton.requests.ledger import Ledger
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.contract import RoleSessionFactory
from baton.team.executor import BreakerTripped, Executor, Job, ReviewSummary
from baton.team.human import HumanSide
from baton.team.reconcile import HolderLookup
from baton.team.records import (
    RefusalRecord,
    RoleRecord,
    SlotRecord,
    TaskRecord,
)
from baton.team.slots import Slot, Slots
from baton.team.startup import DaemonBusy, Startup, utc_now
from baton.team.states import TaskState
from baton.team_config import TeamConfig

__all__ = ["DaemonBusy", "RunSummary", "TeamLoop"]

log = logging.getLogger("baton.team.loop")

_SETTLE_POLL_S = 0.25
"""How often the start-up sweep looks again at files still settling."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What ``run(until_idle=True)`` returns: why it is idle (or that it was stopped)."""

    done: tuple[str, ...]
    waiting_human: tuple[str, ...]
    stalled: tuple[str, ...]
    """``needs_attention`` or ``failed``: a human has to look."""
    blocked: tuple[str, ...]
    refused: int
    paused_roles: tuple[str, ...]
    interrupted: tuple[str, ...] = ()
    stopped: bool = False
    """The loop was asked to stop (a signal) before it was idle."""


class TeamLoop(Startup, HumanSide):
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
    ) -> None:
        self.port = port
        self.holders = holders
        self.port.human = team.human
        self.team = team
        self.store = store
        self.journal = journal
        self.run_id = run_id
        self.ledger = ledger or Ledger(store)
        self.state_dir = state_dir
        self.wall_clock = wall_clock
        self.slots = Slots(
            team=team,
            fcop_root=port.root,
            store_path=store.path,
            journal=journal,
            factory=factory,
            now=utc_now,
            watch=watch_group,
        )
        extra = {"review_summary": review_summary} if review_summary is not None else {}
        self.executor = Executor(
            port=port,
            store=store,
            journal=journal,
            ledger=self.ledger,
            team=team,
            slots=self.slots,
            run_id=run_id,
            now=utc_now,
            enqueue=self._enqueue,
            schedule=self.schedule,
            watch_request=self._watch_request,
            **extra,
        )
        self.events: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
        self._doorbell_step_ms = doorbell_step_ms
        self.doorbell = self._make_doorbell({})
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
        self.sweep_interval = sweep_interval
        self._swept: set[tuple[str, FileFacts]] = set()
        self._sweeping = asyncio.Lock()
        self.executor.after_turn = self._sweep_after_turn
        self._queues: dict[str, asyncio.Queue[Job]] = {r: asyncio.Queue() for r in team.roles}
        self._queued: set[tuple[str, str, bool]] = set()
        self._parked: dict[str, list[Job]] = {}
        self._busy = 0
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        self._stopped_by: str | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._waiting: dict[str, asyncio.Task[None]] = {}
        self._timers: set[asyncio.Task[None]] = set()
        self._outbox_lock = asyncio.Lock()

    def _make_doorbell(self, refused: dict[str, str | None]) -> Doorbell:
        quarantine = (
            self.state_dir / "quarantine" if self.team.quarantine and self.state_dir else None
        )
        return Doorbell(
            self.port,
            self._route,
            self.events,
            human=self.team.human,
            issue_sender="BATON",
            max_task_bytes=self.team.max_task_bytes,
            quarantine_dir=quarantine,
            refused=refused,
            step_ms=self._doorbell_step_ms,
        )

    # ------------------------------------------------------------------ surface

    @property
    def dispatch_log(self) -> list[tuple[str, str, str]]:
        return self.executor.dispatch_log

    def stop(self, reason: str = "stopped") -> None:
        """Ask a running :meth:`run` to shut down (running turns are interrupted, recorded)."""
        self._stopped_by = reason
        self._stop.set()

    def schedule(self, task_id: str) -> None:
        """Re-evaluate ``task_id`` soon (a child changed, an answer came...)."""
        self._spawn(self._evaluate(task_id), f"evaluate-{task_id}")

    # --------------------------------------------------------------------- run

    async def run(self, *, until_idle: bool = False) -> RunSummary:
        """Run the loop. ``until_idle``: return once nothing can progress without input.

        A :meth:`stop` asked before or during start-up holds: start-up ends at its next
        step and the loop shuts down as after a run (a Ctrl-C at start-up used to be
        lost, and ``baton up`` then waited forever for a doorbell that never armed).
        """
        if self._stopped_by is None:
            self._stop = asyncio.Event()
        await self._take_project()
        try:
            for step in (
                self._migrate,
                self._sweep_at_start,
                self._warm,
                self._recover,
                self._open_slots,
            ):
                if self._stop.is_set():
                    break
                await step()  # the sweep comes before recovery reads anything under fcop/
            else:
                await self._serve(until_idle)
        finally:
            await self.slots.close_all(self._stopped_by or "the daemon stopped")
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.doorbell.worker.close)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.sweeper.close)  # waits out a pass in flight
            with contextlib.suppress(Exception):
                await asyncio.to_thread(clean_temporaries, self.port)
            await self._release_project()
        return await self.summary()

    async def _open_slots(self) -> None:
        await self.slots.open(await self.store.aread(_slot_records))
        self.doorbell.remember_refused(await self.store.aread(_refused_in_place))

    async def _serve(self, until_idle: bool) -> None:
        """The doorbell, router, waker and sweeper, then one worker per slot, until stopped."""
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(self.doorbell.run(self._stop), name="doorbell")
            router = tg.create_task(self._router(), name="router")
            waker = tg.create_task(self._waker(), name="store-wake")
            sweeper = tg.create_task(self._sweep_loop(), name="sweep")
            workers: list[asyncio.Task[None]] = []
            try:
                if await self._unless_stopped(self.doorbell.ready.wait()):
                    for step in (
                        self._reevaluate_all,
                        self._drain_outbox,
                        self._watch_open_requests,
                        self._settle_background,
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
                waker,
                sweeper,
                *self._background,
                *self._waiting.values(),
                *self._timers,
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

    # ----------------------------------------------------------------- routing

    def _route(self, recipient: str) -> str | None:
        spec = self.team.role_for(recipient)
        return spec.name if spec else None

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._background.add(task)
        self._busy += 1

        def done(t: asyncio.Task[None]) -> None:
            self._background.discard(t)
            self._busy -= 1
            self._kick()

        task.add_done_callback(done)

    def _kick(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(notify())

    async def _evaluate(self, task_id: str) -> None:
        await self.executor.evaluate(task_id)

    def _enqueue(self, job: Job) -> None:
        key = (job.task_id, job.role, job.review)
        if key in self._queued or job.role not in self._queues:
            return
        self._queued.add(key)
        self._busy += 1
        self._queues[job.role].put_nowait(job)

    async def _router(self) -> None:
        while True:
            event = await self.events.get()
            self._busy += 1
            try:
                await self._on_doorbell(event)
            except Exception:
                log.exception("routing %r failed", event)
            finally:
                self._busy -= 1
                self._kick()

    async def _on_doorbell(self, event: DoorbellEvent) -> None:
        if isinstance(event, TaskRefused):
            await self._refused(event)
            return
        assert isinstance(event, TaskArrived)
        record = await asyncio.to_thread(self.executor.facts.record, event.task_id)
        if record is None:
            info = await asyncio.to_thread(self.executor.facts.task, event.task_id)
            if info is None:
                return
            await self.executor.seen(info, event.role, for_human=event.for_human)
        if not event.for_human:
            await self.executor.evaluate(event.task_id)

    async def _refused(self, event: TaskRefused) -> None:
        """Every refusal is a stored row and a ``team.refusal`` event (the doorbell filed the ISSUE)."""
        if event.reason == "state_ambiguous" and event.task_id:
            self.schedule(event.task_id)  # two stages: repaired by rule, not refused
            return
        refusal = RefusalRecord(
            name=event.name,
            reason=event.reason,
            message=event.message,
            at=utc_now(),
            task_id=event.task_id,
            recipient=event.recipient,
            issue_id=event.issue_id,
            quarantined_to=str(event.quarantined_to) if event.quarantined_to else None,
            in_place=event.quarantined_to is None and event.reason == "unknown_recipient",
        )
        payload = TeamRefusal(
            name=event.name,
            reason=event.reason,
            message=event.message,
            task_id=event.task_id,
            issue_id=event.issue_id,
            quarantined_to=refusal.quarantined_to,
        )

        def write(tx: Tx) -> None:
            team_sql.insert_refusal(tx, refusal.row())

        # team.refusal for the board, security.payload_rejected for the security surface.
        await self.journal.commit([payload, refusal_payload(event)], write)

    # ------------------------------------------------------------------- intake

    async def _sweep_at_start(self) -> None:
        """The sweep before recovery, until nothing in it is still settling.

        Recovery reads every open TASK and its REPORTs through Core; a file written
        moments before ``baton up`` started (inside the settle window) is not judged by
        the first pass, so recovery would read it unjudged: a hostile one then makes its
        TASK need attention instead of being quarantined. So wait for such files (the
        settle window, ~1 s; a file that never stops changing is refused as ``unstable``
        after ``max_settle_s``) and sweep again.
        """
        while True:
            report = await self._sweep()
            if not report.settling or self._stop.is_set():
                return
            await self._unless_stopped(asyncio.sleep(_SETTLE_POLL_S))

    async def _sweep(self, *, after_turn: bool = False) -> SweepReport:
        """Screen what Core reads outside the inbox; refuse (quarantine, ISSUE) what fails.

        At start (before recovery), every ``sweep_interval`` and after every turn (an
        agent may have written anything under ``fcop/``); a pass over unchanged files
        opens none of them, and with the sweeper's change feed lists and stats
        none either (the feed is read in the pass itself, so the after-turn pass sees
        every write the agent made). Each finding goes through the doorbell (quarantine and
        ISSUE) and the router (the refusal row and its events), like an inbox refusal.
        """
        async with self._sweeping:
            # After a turn, what the agent wrote is complete: judge it now, not in 1 s.
            report = await asyncio.to_thread(
                self.sweeper.sweep, require_stable=False if after_turn else None
            )
            for finding in report.refused:
                key = (finding.origin, finding.facts)
                if key in self._swept:
                    continue  # left in place (quarantine off): said once
                self._swept.add(key)
                event = await asyncio.to_thread(self.doorbell.refuse_file, finding)
                if event.quarantined_to is not None:
                    self.sweeper.forget(finding.origin)
                await self.events.put(event)
            return report

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
            except Exception:
                log.exception("building the lifecycle's indexes failed (look-ups build them)")

        self._spawn(warm(), "warm-indexes")

    async def _sweep_after_turn(self) -> None:
        try:
            await self._sweep(after_turn=True)
        except Exception:
            log.exception("intake sweep after a turn failed")

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self._sweep()
            except Exception:
                log.exception("intake sweep failed")

    # ------------------------------------------------------------------ workers

    def _breaker_until(self, role: str) -> float:
        row = self.store.read_tx(lambda tx: team_sql.ROLES.get(tx, role))
        if row is None:
            return 0.0
        return RoleRecord.from_row(row).breaker_until or 0.0

    async def _worker(self, slot: Slot) -> None:
        queue = self._queues[slot.spec.name]
        await self._adopt(slot)  # a turn a live holder kept across a restart, first
        while True:
            job = await queue.get()
            self._queued.discard((job.task_id, job.role, job.review))
            parked = False
            try:
                until = await asyncio.to_thread(self._breaker_until, slot.spec.name)
                if until > self.wall_clock():
                    parked = self._park(slot.spec.name, job, until)
                    continue
                slot.busy = True
                try:
                    await self.executor.evaluate(job.task_id, slot=slot, for_review=job.review)
                finally:
                    slot.busy = False
                await self._drain_outbox()
            except BreakerTripped:
                await self._open_breaker(slot, job.task_id)
                parked = self._park(
                    slot.spec.name, job, self.wall_clock() + self.team.zero_tool_cooldown
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: job %s failed", slot.name, job)
            finally:
                queue.task_done()
                if not parked:
                    self._busy -= 1
                self._kick()

    async def _open_breaker(self, slot: Slot, task_id: str) -> None:
        role = slot.spec.name
        until = self.wall_clock() + self.team.zero_tool_cooldown
        record = RoleRecord(role=role, updated_at=utc_now(), breaker_until=until)

        def write(tx: Tx) -> None:
            team_sql.ROLES.upsert(tx, record.row())

        await self.slots.commit(slot, None, also=write, zero_tool_streak=0)
        await self.executor._issue(
            task_id,
            f"{role}: {self.team.zero_tool_limit} turns in a row without a single tool call; "
            f"pausing {role} for {self.team.zero_tool_cooldown:.0f}s (zero-tool-call breaker)",
        )

    def _park(self, role: str, job: Job, until: float) -> bool:
        """Hold a job while ``role``'s breaker is open; it no longer counts as busy."""
        jobs = self._parked.setdefault(role, [])
        jobs.append(job)
        self._busy -= 1
        if len(jobs) == 1:
            delay = max(0.0, until - self.wall_clock())
            timer = asyncio.get_running_loop().create_task(self._unpark(role, delay))
            self._timers.add(timer)
            timer.add_done_callback(self._timers.discard)
        return True

    async def _unpark(self, role: str, delay: float) -> None:
        await asyncio.sleep(delay)
        for job in self._parked.pop(role, []):
            self._enqueue(job)
        self._kick()

    # ---------------------------------------------------------------- idleness

    async def _wait_idle(self) -> None:
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self._busy <= 0 and self.events.empty())
            if self.doorbell.settling:
                await self.doorbell.wait_settled()  # a file still being written
                continue
            emitted = await self.doorbell.scan("rescan")
            drained = await self._drain_outbox()
            if emitted == 0 and drained == 0 and self._busy <= 0 and self.events.empty():
                return

    async def summary(self) -> RunSummary:
        def read(tx: Tx) -> tuple[list[TaskRecord], int, list[RoleRecord]]:
            tasks = [TaskRecord.from_row(r) for r in team_sql.all_tasks(tx)]
            return (
                tasks,
                team_sql.count_refusals(tx),
                [RoleRecord.from_row(r) for r in team_sql.all_roles(tx)],
            )

        tasks, refused, roles = await self.store.aread(read)

        def ids(*states: TaskState) -> tuple[str, ...]:
            return tuple(sorted(t.task_id for t in tasks if t.state in states))

        waiting = {
            t.task_id
            for t in tasks
            if t.state in (TaskState.IN_REVIEW, TaskState.WAITING_HUMAN)
            and (t.state is TaskState.WAITING_HUMAN or t.review_request is not None)
        }
        waiting |= {t.task_id for t in tasks if t.for_human and t.state is TaskState.SEEN}
        now = self.wall_clock()
        return RunSummary(
            done=ids(TaskState.SETTLED),
            waiting_human=tuple(sorted(waiting)),
            stalled=ids(TaskState.NEEDS_ATTENTION, TaskState.FAILED),
            blocked=ids(TaskState.WAITING_CHILDREN, TaskState.WAITING_PREREQUISITES),
            refused=refused,
            paused_roles=tuple(sorted(r.role for r in roles if (r.breaker_until or 0) > now)),
            interrupted=ids(TaskState.INTERRUPTED),
            stopped=self._stopped_by is not None,
        )


def _slot_records(tx: Tx) -> list[SlotRecord]:
    return [SlotRecord.from_row(r) for r in team_sql.all_slots(tx)]


def _refused_in_place(tx: Tx) -> dict[str, str | None]:
    return {
        r.name: r.issue_id
        for r in (RefusalRecord.from_row(row) for row in team_sql.refused_in_place(tx))
    }
