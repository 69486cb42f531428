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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from baton.coordination.doorbell import Doorbell, DoorbellEvent, TaskArrived, TaskRefused
from baton.coordination.errors import CoordinationError
from baton.coordination.fcop_port import FcopPort
from baton.coordination.fcop_recovery import (
    Unresolved,
    clean_temporaries,
    resolve_two_stages,
    tasks_in_two_stages,
    validate_workspace,
)
from baton.coordination.team import TeamConfig
from baton.errors import BatonError
from baton.events.model import Payload, TeamRecovery, TeamRefusal
from baton.lifeline import process_start_ticks
from baton.requests.ledger import Ledger
from baton.requests.model import ElicitationRequest, StringField
from baton.requests.model import ElicitationSchema as _Schema
from baton.store import requests_sql, team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.contract import RoleSessionFactory
from baton.team.executor import BreakerTripped, Executor, Job, ReviewSummary
from baton.team.records import (
    DaemonRecord,
    OutboxEntry,
    QuestionRecord,
    RefusalRecord,
    RoleRecord,
    SlotRecord,
    TaskRecord,
    TurnRecord,
)
from baton.team.slots import Slot, Slots
from baton.team.states import TaskState, TurnState

__all__ = ["DaemonBusy", "RunSummary", "TeamLoop"]

log = logging.getLogger("baton.team.loop")

_TERMINAL = frozenset({TaskState.SETTLED})
_LIVE_STATES = tuple(
    s.value for s in TaskState if s not in _TERMINAL and s is not TaskState.REFUSED
)


class DaemonBusy(BatonError):
    """Another ``baton up`` already runs this project."""


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


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


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
    ) -> None:
        self.port = port
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
            now=_utc_now,
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
            now=_utc_now,
            enqueue=self._enqueue,
            schedule=self.schedule,
            watch_request=self._watch_request,
            **extra,
        )
        self.events: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
        self._doorbell_step_ms = doorbell_step_ms
        self.doorbell = self._make_doorbell({})
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
        """Run the loop. ``until_idle``: return once nothing can progress without input."""
        self._stop = asyncio.Event()
        await self._take_project()
        try:
            await self._migrate()
            await self._recover()
            await self.slots.open(await self.store.aread(_slot_records))
            self.doorbell.remember_refused(await self.store.aread(_refused_in_place))
            async with asyncio.TaskGroup() as tg:
                watcher = tg.create_task(self.doorbell.run(self._stop), name="doorbell")
                router = tg.create_task(self._router(), name="router")
                waker = tg.create_task(self._waker(), name="store-wake")
                await self.doorbell.ready.wait()
                await self._reevaluate_all()
                await self._drain_outbox()
                await self._watch_open_requests()
                await self._settle_background()
                workers = [
                    tg.create_task(self._worker(slot), name=slot.name) for slot in self.slots.all()
                ]
                try:
                    if until_idle:
                        waiter = asyncio.create_task(self._wait_idle())
                        stopper = asyncio.create_task(self._stop.wait())
                        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                        for pending in (waiter, stopper):
                            pending.cancel()
                    else:
                        await self._stop.wait()
                finally:
                    self._stop.set()
                for task in (
                    *workers,
                    router,
                    waker,
                    *self._background,
                    *self._waiting.values(),
                    *self._timers,
                ):
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                await asyncio.wait_for(asyncio.shield(watcher), timeout=30)
        finally:
            await self.slots.close_all(self._stopped_by or "the daemon stopped")
            with contextlib.suppress(Exception):
                await asyncio.to_thread(clean_temporaries, self.port)
            await self._release_project()
        return await self.summary()

    # ------------------------------------------------------------- ownership

    async def _take_project(self) -> None:
        """Become the one ``baton up`` of this project (refused while another lives)."""
        pid = os.getpid()
        ticks = process_start_ticks(pid) or 0
        now = _utc_now()
        mine = DaemonRecord(
            pid=pid,
            start_ticks=ticks,
            host=socket.gethostname(),
            boot=_boot_id(),
            run_id=self.run_id,
            state="running",
            started_at=now,
            updated_at=now,
        )

        def take(tx: Tx) -> None:
            row = team_sql.DAEMON.get(tx, 1)
            if row is not None:
                other = DaemonRecord.from_row(row)
                alive = (
                    other.state == "running"
                    and other.host == mine.host
                    and other.boot == mine.boot
                    and other.pid != pid
                    and process_start_ticks(other.pid) == other.start_ticks
                )
                if alive:
                    raise DaemonBusy(
                        f"another `baton up` (pid {other.pid}, run {other.run_id}) runs this "
                        "project; stop it first"
                    )
            team_sql.DAEMON.upsert(tx, mine.row())

        await self.store.write(take)

    async def _release_project(self) -> None:
        pid = os.getpid()

        def release(tx: Tx) -> None:
            row = team_sql.DAEMON.get(tx, 1)
            if row is not None and DaemonRecord.from_row(row).pid == pid:
                team_sql.DAEMON.update(tx, 1, {"state": "stopped", "updated_at": _utc_now()})

        with contextlib.suppress(Exception):
            await self.store.write(release)

    # --------------------------------------------------------------- recovery

    async def _migrate(self) -> None:
        if self.state_dir is None:
            return
        from baton.team.migrate import migrate_legacy_state

        await migrate_legacy_state(self.state_dir, self.store, self.journal, self.team)

    async def _recover(self) -> None:
        """Interrupt the dead daemon's turns, clean temporaries, repair two-stage TASKs."""
        await self._interrupt_open_turns()
        for repair in await asyncio.to_thread(clean_temporaries, self.port):
            await self._recovery(repair.task_id, repair.rule, "cleaned", repair.detail, None)
        for task_id in await asyncio.to_thread(tasks_in_two_stages, self.port):
            try:
                repair = await asyncio.to_thread(resolve_two_stages, self.port, task_id)
            except Unresolved as exc:
                await self._recovery(task_id, exc.rule, "needs_attention", exc.detail, None)
                await self.executor._attention(task_id, f"left in two FCoP stages: {exc.detail}")
                continue
            verdict = await asyncio.to_thread(validate_workspace, self.port.root)
            await self._recovery(
                task_id, repair.rule, "resolved", repair.detail, bool(verdict.get("valid"))
            )

    async def _recovery(
        self,
        task_id: str | None,
        rule: str,
        outcome: Literal["resolved", "needs_attention", "cleaned"],
        detail: str,
        valid: bool | None,
    ) -> None:
        payload = TeamRecovery(
            task_id=task_id,
            rule=rule,
            outcome=outcome,
            detail=detail,
            valid=valid,
        )
        await self.journal.commit([payload], lambda tx: None)

    async def _interrupt_open_turns(self) -> None:
        """Turns a dead daemon left open did not finish: mark them (and their TASKs) interrupted."""

        def read(tx: Tx) -> list[tuple[TurnRecord, TaskRecord | None]]:
            out = []
            for row in team_sql.open_turns(tx):
                turn = TurnRecord.from_row(row)
                task_row = team_sql.TASKS.get(tx, turn.task_id)
                out.append((turn, TaskRecord.from_row(task_row) if task_row else None))
            return out

        now = _utc_now()
        for turn, record in await self.store.aread(read):
            payloads: list[Payload] = []
            task_after = None
            if record is not None and record.state in (
                TaskState.DISPATCHED,
                TaskState.TURN_RUNNING,
            ):
                task_after, payloads = self.executor._walk(
                    record, TaskState.INTERRUPTED, "its daemon stopped before the turn finished"
                )

            def write(
                tx: Tx,
                turn: TurnRecord = turn,
                record: TaskRecord | None = record,
                task_after: TaskRecord | None = task_after,
            ) -> None:
                team_sql.TURNS.update_turn(
                    tx,
                    turn.task_id,
                    turn.dispatch,
                    {"state": TurnState.INTERRUPTED.value, "ended_at": now},
                    state=turn.state.value,
                )
                if task_after is not None and record is not None:
                    team_sql.TASKS.update(
                        tx, record.task_id, task_after.row(), guard={"version": record.version}
                    )

            await self.journal.commit(payloads, write)

    async def _reevaluate_all(self) -> None:
        """Every TASK with work left: live records and FCoP's active and review stages."""

        def read(tx: Tx) -> list[str]:
            return [str(r[0]) for r in team_sql.tasks_in_states(tx, _LIVE_STATES)]

        ids = list(await self.store.aread(read))
        for stage in ("active", "review"):
            entries = await asyncio.to_thread(self.port._scan_stage, stage)
            ids += [e.task_id for e in entries if e.task_id]
        seen: set[str] = set()
        for task_id in ids:
            if task_id not in seen:
                seen.add(task_id)
                await self._evaluate(task_id)

    async def _settle_background(self) -> None:
        """Let evaluations scheduled during recovery run before the workers start."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

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
            at=_utc_now(),
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

        await self.journal.commit([payload], write)

    # ------------------------------------------------------------------ workers

    def _breaker_until(self, role: str) -> float:
        row = self.store.read_tx(lambda tx: team_sql.ROLES.get(tx, role))
        if row is None:
            return 0.0
        return RoleRecord.from_row(row).breaker_until or 0.0

    async def _worker(self, slot: Slot) -> None:
        queue = self._queues[slot.spec.name]
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
        record = RoleRecord(role=role, updated_at=_utc_now(), breaker_until=until)

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

    # ------------------------------------------------------------------- outbox

    async def _waker(self) -> None:
        """One store doorbell for the loop: outbox rows and answers from any process."""
        listener = await self.store.listener()
        event = listener.subscribe(team_sql.TEAM_TOPIC)
        try:
            while True:
                await event.wait()
                event.clear()
                self._busy += 1
                try:
                    await self._drain_outbox()
                finally:
                    self._busy -= 1
                    self._kick()
        finally:
            listener.unsubscribe(team_sql.TEAM_TOPIC, event)

    async def _drain_outbox(self) -> int:
        async with self._outbox_lock:
            rows = await self.store.aread(team_sql.open_outbox)
            for row in rows:
                entry = OutboxEntry.from_row(row)
                try:
                    await self._on_outbox(entry)
                except Exception:
                    log.exception("outbox entry %s failed", entry.id)
                    with contextlib.suppress(Exception):
                        await self.store.write(_consumer(entry.id, _utc_now()))
            return len(rows)

    async def _on_outbox(self, entry: OutboxEntry) -> None:
        now = _utc_now()
        if entry.kind == "ask_human":
            await self._ask_human(entry, now)
            return
        await self.store.write(lambda tx: team_sql.consume_outbox(tx, entry.id, now))
        if entry.task_id:
            self.schedule(entry.task_id)  # a review decision (its REVIEW is in FCoP)

    async def _ask_human(self, entry: OutboxEntry, now: str) -> None:
        ask_id = str(entry.data.get("request_id", ""))
        question_text = str(entry.data.get("question", ""))
        document = ElicitationRequest(
            message=f"{entry.role} asks: {question_text}",
            requested_schema=_Schema(
                title="Answer",
                fields=(StringField(name="answer", title="Your answer"),),
            ),
        )
        change = self.ledger.prepare_create(
            document,
            run_id=self.run_id,
            connection_id=None,
            jsonrpc_id=f"ask:{ask_id}",
            session_id=None,
            turn_id=None,
        )
        question = QuestionRecord(
            ask_id=ask_id,
            role=entry.role,
            question=question_text,
            state="pending",
            asked_at=entry.created_at,
            updated_at=now,
            request_id=change.records[0].request_id,
            task_id=entry.task_id,
            attempt_id=entry.attempt_id,
            issue_id=entry.data.get("issue_id"),
        )
        known = await self.store.aread(lambda tx: team_sql.QUESTIONS.get(tx, ask_id))

        def write(tx: Tx) -> None:
            if team_sql.consume_outbox(tx, entry.id, now) != 1:
                raise CoordinationError(f"outbox entry {entry.id} was consumed already")
            if known is None and ask_id:
                team_sql.QUESTIONS.insert(tx, question.row())
                change.apply(tx)

        await self.journal.commit(change.payloads if known is None and ask_id else (), write)
        if known is None and ask_id and entry.task_id:
            self._watch_request(question.request_id or "", entry.task_id)

    # --------------------------------------------------------- human requests

    def _watch_request(self, request_id: str, task_id: str) -> None:
        """Re-evaluate ``task_id`` when ``request_id`` leaves ``pending`` (any process answers)."""
        if not request_id or request_id in self._waiting:
            return

        async def wait() -> None:
            try:
                await self.ledger.wait_answer(request_id, None)
            finally:
                self._waiting.pop(request_id, None)
            self.schedule(task_id)

        self._waiting[request_id] = asyncio.get_running_loop().create_task(
            wait(), name=f"human-{request_id}"
        )

    async def _watch_open_requests(self) -> None:
        def read(tx: Tx) -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []
            for row in team_sql.tasks_in_states(tx, _LIVE_STATES):
                record = TaskRecord.from_row(row)
                for request_id in (record.review_request, record.attention_request):
                    if request_id:
                        out.append((request_id, record.task_id))
            for row in team_sql.questions_in_states(tx, ("pending",)):
                question = QuestionRecord.from_row(row)
                if question.request_id and question.task_id:
                    out.append((question.request_id, question.task_id))
            return out

        for request_id, task_id in await self.store.aread(read):
            state = await self.store.aread(_request_row(request_id))
            if state is not None and state[2] == "pending":
                self._watch_request(request_id, task_id)
            elif state is not None and state[2] == "answered":
                self.schedule(task_id)

    # ---------------------------------------------------------------- idleness

    async def _wait_idle(self) -> None:
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self._busy <= 0 and self.events.empty())
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
            blocked=ids(TaskState.WAITING_CHILDREN),
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


def _consumer(outbox_id: int, at: str) -> Callable[[Tx], int]:
    return lambda tx: team_sql.consume_outbox(tx, outbox_id, at)


def _request_row(request_id: str) -> Callable[[Tx], tuple[Any, ...] | None]:
    return lambda tx: requests_sql.fetch(tx, request_id)
