"""``baton up``: the coordination loop, against a :class:`RoleSession` protocol.

The loop, one direction::

    doorbell ──TaskArrived──► router ──Job──► role queue ──► slot (session + binding)
        claim (T2) → point the binding → prompt (header + body) → after the turn:
          REPORT for this attempt?  yes → submit (T3) → ring the reviewer
                                    no  → delegated children still open? wait
                                          else one reminder turn, then ISSUE + stall
          reviewer = the TASK's sender:
            the human  → a pending review (record + hook; the lead wires the ledger)
            the leader → on_consolidation: when every child of the parent has
                         reported, a consolidation prompt; the leader's report
                         accepts the children (T4, leader authority), then T3
                         explicit: a review prompt per report; ``review_report``
                         decisions (spool) become T4/T5

Design points, and why:

* **No work, no wake.** A slot's session is created by the factory on its
  first job, never before; an idle role costs nothing.
* **Concurrency** is the number of slots per role, each with its own session
  and binding, all pulling from the role's one queue: with ``concurrency = 1``
  two tasks for a role run one after the other, never together.
* **FCoP is the truth.** After every turn the daemon asks FCoP (is there a
  REPORT head for this attempt? which children are still open?) instead of
  trusting what the agent said. On start it re-derives work from
  ``active/`` and ``review/`` (O(active + review)): an active TASK is resumed,
  never re-claimed; one whose REPORT was written before a crash is submitted
  without another prompt.
* **Runaway stops.** A per-task turn limit, one reminder turn, and a per-role
  zero-tool-call circuit breaker (N consecutive turns without a tool call
  open it for a cooldown; queued jobs are parked, not lost). Each stop files
  an FCoP ISSUE and a visible :class:`~baton.coordination.state.Stall`.
* **All fcop calls run in worker threads** (Core fsyncs and takes file
  locks); the event loop only schedules.

The lead provides the real :data:`RoleSessionFactory` on top of
``baton.runner`` (an ACP session whose ``session/new``/``load`` carries
:func:`~baton.coordination.mcp_server.mcp_config` for the binding); tests use
an in-memory fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from baton.coordination.binding import (
    Binding,
    CurrentTask,
    SpoolRecord,
    read_spool,
    write_binding,
    write_pointer,
)
from baton.coordination.doorbell import Doorbell, DoorbellEvent, TaskArrived, TaskRefused
from baton.coordination.errors import (
    CoordinationError,
    FcopProtocolError,
    LifecycleConflict,
    TaskNotFound,
)
from baton.coordination.fcop_port import FcopPort, ReportInfo, TaskInfo, TransitionInfo
from baton.coordination.header import (
    ChildReport,
    PromptContext,
    answer_prompt,
    consolidation_prompt,
    reminder_prompt,
    review_prompt,
    revision_prompt,
    task_prompt,
)
from baton.coordination.state import (
    MAX_FILES_CHANGED,
    CoordinationPaths,
    CoordinationState,
    HumanQuestion,
    PendingReview,
    Refusal,
    SessionRecord,
    Stall,
    TaskRecord,
    now_iso,
)
from baton.coordination.team import RoleSpec, TeamConfig

__all__ = [
    "Daemon",
    "HumanSink",
    "Job",
    "RecordingHumanSink",
    "RoleSession",
    "RoleSessionFactory",
    "RunSummary",
    "TurnResult",
    "Usage",
]

log = logging.getLogger("baton.coordination.daemon")

_T = TypeVar("_T")
SYSTEM_SENDER = "BATON"


# ------------------------------------------------------------------ the contract


@dataclass(frozen=True, slots=True)
class Usage:
    """What the agent reported for one turn (None fields: not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    thinking_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The one terminal outcome of ``session/prompt``, as the daemon needs it."""

    status: Literal["completed", "failed", "cancelled"]
    stop_reason: str | None = None
    tool_calls: int = 0
    """Tool calls the agent made during the turn (all kinds, not only baton's MCP)."""
    usage: Usage | None = None
    """None when the agent reported no usage (recorded as ``unavailable``, never zero)."""
    files_changed: tuple[str, ...] = ()
    error: str | None = None
    unapproved_mutations: int = 0
    """Mutations no recorded decision allowed (``security.unapproved_mutation``)."""
    approval: str | None = None
    """Who approves in the session's effective mode (``asks``, ``self_approves`` …)."""


class RoleSession(Protocol):
    """One long-lived agent session working for one role slot."""

    async def prompt(self, text: str) -> TurnResult:
        """Run one turn; return its outcome (raise only for a dead session)."""
        ...

    async def close(self) -> None: ...


RoleSessionFactory = Callable[[RoleSpec, Binding], Awaitable[RoleSession]]
"""Create (or resume) the session for a role slot whose MCP server uses ``Binding``."""


class HumanSink(Protocol):
    """Where human-facing requests go; the lead wires this to ``baton.requests``."""

    async def review_requested(self, review: PendingReview) -> None: ...

    async def question_asked(self, question: HumanQuestion) -> None: ...

    async def task_for_human(self, task_id: str, subject: str, sender: str) -> None: ...


class RecordingHumanSink:
    """The default sink: keeps what it is told (tests, and until the ledger is wired)."""

    def __init__(self) -> None:
        self.reviews: list[PendingReview] = []
        self.questions: list[HumanQuestion] = []
        self.tasks: list[tuple[str, str, str]] = []
        self.changed = asyncio.Event()

    async def review_requested(self, review: PendingReview) -> None:
        self.reviews.append(review)
        self.changed.set()

    async def question_asked(self, question: HumanQuestion) -> None:
        self.questions.append(question)
        self.changed.set()

    async def task_for_human(self, task_id: str, subject: str, sender: str) -> None:
        self.tasks.append((task_id, subject, sender))
        self.changed.set()


JobKind = Literal["work", "settle", "consolidate", "review", "revise", "answer"]


@dataclass(frozen=True, slots=True)
class Job:
    kind: JobKind
    task_id: str
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What ``run(until_idle=True)`` returns: why it is idle."""

    done: tuple[str, ...]
    waiting_human: tuple[str, ...]
    stalled: tuple[str, ...]
    blocked: tuple[str, ...]
    refused: int
    paused_roles: tuple[str, ...]


class _BreakerOpen(Exception):
    pass


# ------------------------------------------------------------------------ slots


class _Slot:
    """One concurrent worker of a role: its binding, pointer and (lazy) session."""

    def __init__(self, spec: RoleSpec, name: str, binding: Binding) -> None:
        self.spec = spec
        self.name = name
        self.binding = binding
        self.session: RoleSession | None = None
        self.seq = 0

    def point(self, task_id: str | None, attempt_id: str | None) -> None:
        self.seq += 1
        write_pointer(self.binding.pointer_path, CurrentTask(task_id, attempt_id, self.seq))


# ----------------------------------------------------------------------- daemon


class Daemon:
    """Runs the team until stopped, or until idle."""

    def __init__(
        self,
        *,
        port: FcopPort,
        team: TeamConfig,
        factory: RoleSessionFactory,
        state_dir: Path,
        human_sink: HumanSink | None = None,
        doorbell_step_ms: int = 5,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.port = port
        self.port.human = team.human  # the reviewer policy's human is the team's
        self.team = team
        self.factory = factory
        self.paths = CoordinationPaths(state_dir)
        self.human_sink: HumanSink = human_sink or RecordingHumanSink()
        self.wall_clock = wall_clock
        self.state = CoordinationState.load(self.paths.state_file)
        self.events: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
        self.doorbell = Doorbell(
            port,
            self._route,
            self.events,
            human=team.human,
            issue_sender=SYSTEM_SENDER,
            max_task_bytes=team.max_task_bytes,
            quarantine_dir=self.paths.quarantine if team.quarantine else None,
            refused_ledger=self.paths.refused,
            step_ms=doorbell_step_ms,
        )
        self._queues: dict[str, asyncio.Queue[Job]] = {r: asyncio.Queue() for r in team.roles}
        self._slots: dict[str, list[_Slot]] = {}
        self._queued: set[tuple[str, str]] = set()
        self._parked: dict[str, list[Job]] = {}
        self._busy = 0
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        self._timers: set[asyncio.Task[None]] = set()
        self.dispatch_log: list[tuple[str, str, str]] = []
        """(slot, job kind, task id) in dispatch order; tests and traces read it."""
        self.prompt_started: Callable[[str, str, float], None] | None = None
        """Hook: (slot name, task id, monotonic time) just before ``session.prompt``."""

    # ------------------------------------------------------------------ helpers

    async def _io(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _route(self, recipient: str) -> str | None:
        spec = self.team.role_for(recipient)
        return spec.name if spec else None

    def _save(self) -> None:
        self.state.save(self.paths.state_file)

    def _task_record(self, task: TaskInfo, role: str) -> TaskRecord:
        record = self.state.tasks.get(task.task_id)
        if record is None:
            record = TaskRecord(
                task_id=task.task_id, role=role, subject=task.subject, parent=task.parent
            )
            self.state.tasks[task.task_id] = record
        return record

    def _note(self, task_id: str, **changes: Any) -> None:
        record = self.state.tasks.get(task_id)
        if record is None:
            return
        for key, value in changes.items():
            setattr(record, key, value)
        record.updated_at = now_iso()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _enqueue(self, role: str, job: Job) -> bool:
        key = (job.kind, job.task_id)
        if key in self._queued or role not in self._queues:
            return False
        self._queued.add(key)
        self._busy += 1
        self._queues[role].put_nowait(job)
        return True

    def stop(self) -> None:
        """Ask a running ``run()`` to finish (in-flight turns complete first)."""
        self._stop.set()

    # --------------------------------------------------------------------- run

    async def run(self, *, until_idle: bool = False) -> RunSummary:
        """Run the loop. ``until_idle``: return once nothing can progress without input."""
        self.paths.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._stop = asyncio.Event()
        self.doorbell.ready.clear()
        self._make_slots()
        self.state.daemon = "running"
        self._save()
        try:
            async with asyncio.TaskGroup() as tg:
                watcher = tg.create_task(self.doorbell.run(self._stop), name="doorbell")
                workers = [tg.create_task(self._router(), name="router")]
                for slots in self._slots.values():
                    workers += [tg.create_task(self._worker(s), name=s.name) for s in slots]
                try:
                    await self._recover()
                    if until_idle:
                        await self._wait_idle()
                    else:
                        await self._stop.wait()
                finally:
                    # Also on cancellation: the watcher thread exits on this flag.
                    self._stop.set()
                for task in workers:
                    task.cancel()
                for timer in list(self._timers):
                    timer.cancel()
                await asyncio.wait_for(asyncio.shield(watcher), timeout=30)
        finally:
            for slots in self._slots.values():
                for slot in slots:
                    await self._close_session(slot, status="closed")
            self.state.daemon = "stopped"
            self._save()
        return self.summary()

    def _make_slots(self) -> None:
        if self._slots:
            return
        for spec in self.team.roles.values():
            slots = []
            for i in range(spec.concurrency):
                name = spec.name if i == 0 else f"{spec.name}-{i + 1}"
                binding = write_binding(
                    Binding(
                        fcop_root=self.port.root,
                        role=spec.name,
                        session_name=name,
                        leader=self.team.leader,
                        human=self.team.human,
                        team_roles=self.team.role_names,
                        allowed_tools=spec.tools,
                        pointer_path=self.paths.bindings / f"{name}.current.json",
                        spool_path=self.paths.spool,
                        aliases=spec.aliases,
                    ),
                    self.paths.bindings / f"{name}.json",
                )
                slots.append(_Slot(spec, name, binding))
                record = self.state.sessions.get(name)
                if record is None:
                    self.state.sessions[name] = SessionRecord(
                        name=name, role=spec.name, agent=spec.agent
                    )
                else:
                    record.status = "idle"
                    record.agent = spec.agent
            self._slots[spec.name] = slots

    async def _wait_idle(self) -> None:
        await self.doorbell.ready.wait()
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self._busy == 0 and self.events.empty())
            # Catch what the kernel has not delivered yet, and the spool.
            emitted = await self.doorbell.scan("rescan")
            await self._drain_spool()
            if emitted == 0 and self._busy == 0 and self.events.empty():
                return

    def summary(self) -> RunSummary:
        tasks = self.state.tasks.values()
        waiting = [r.task_id for r in self.state.pending_reviews.values() if r.status == "pending"]
        waiting += [
            q.task_id or q.request_id
            for q in self.state.questions.values()
            if q.status == "pending"
        ]
        waiting += list(self.state.human_tasks)
        now = self.wall_clock()
        return RunSummary(
            done=tuple(sorted(r.task_id for r in tasks if r.status == "done")),
            waiting_human=tuple(sorted(set(waiting))),
            stalled=tuple(sorted(r.task_id for r in tasks if r.status == "stalled")),
            blocked=tuple(
                sorted(r.task_id for r in tasks if r.status in ("waiting_children", "paused"))
            ),
            refused=len(self.state.refusals),
            paused_roles=tuple(
                sorted(r for r, until in self.state.breakers.items() if until > now)
            ),
        )

    # ------------------------------------------------------------------ router

    async def _router(self) -> None:
        while True:
            event = await self.events.get()
            self._busy += 1
            try:
                await self._on_event(event)
            except Exception:
                log.exception("routing %r failed", event)
            finally:
                self._busy -= 1
                await self._notify()

    async def _on_event(self, event: DoorbellEvent) -> None:
        if isinstance(event, TaskRefused):
            self.state.refusals.append(
                Refusal(
                    name=event.name,
                    reason=event.reason,
                    message=event.message,
                    task_id=event.task_id,
                    issue_id=event.issue_id,
                    quarantined_to=str(event.quarantined_to) if event.quarantined_to else None,
                    at=now_iso(),
                )
            )
            self._save()
            return
        assert isinstance(event, TaskArrived)
        if event.for_human:
            if event.task_id not in self.state.human_tasks:
                self.state.human_tasks[event.task_id] = event.subject
                self._save()
                await self.human_sink.task_for_human(event.task_id, event.subject, event.sender)
            return
        record = self.state.tasks.get(event.task_id)
        if record is None:
            self.state.tasks[event.task_id] = TaskRecord(
                task_id=event.task_id,
                role=event.role,
                subject=event.subject,
                parent=event.parent,
                updated_at=now_iso(),
            )
        self._enqueue(event.role, Job("work", event.task_id))

    # ------------------------------------------------------------------ workers

    async def _worker(self, slot: _Slot) -> None:
        queue = self._queues[slot.spec.name]
        while True:
            job = await queue.get()
            parked = False
            try:
                if self._breaker_open(slot.spec.name):
                    parked = self._park(slot.spec.name, job)
                else:
                    self.dispatch_log.append((slot.name, job.kind, job.task_id))
                    await self._run_job(slot, job)
            except _BreakerOpen:
                parked = self._park(slot.spec.name, job)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("%s: job %s %s failed", slot.name, job.kind, job.task_id)
                await self._stall(job.task_id, slot.spec.name, f"baton error: {exc}")
            finally:
                queue.task_done()
                self._queued.discard((job.kind, job.task_id))
                if not parked:
                    self._busy -= 1
                self._save()
                await self._notify()

    async def _ensure_session(self, slot: _Slot) -> RoleSession:
        if slot.session is None:
            record = self.state.sessions[slot.name]
            slot.session = await self.factory(slot.spec, slot.binding)
            record.session_id = getattr(slot.session, "session_id", None)
            record.status = "ready"
            record.started_at = record.started_at or now_iso()
        return slot.session

    async def _close_session(self, slot: _Slot, *, status: str) -> None:
        session, slot.session = slot.session, None
        record = self.state.sessions.get(slot.name)
        if record is not None and (session is not None or record.status != "idle"):
            record.status = status
        if session is not None:
            try:
                await session.close()
            except Exception:
                log.exception("closing %s failed", slot.name)

    def _context(self, slot: _Slot, task: TaskInfo, attempt: str) -> PromptContext:
        return PromptContext(
            role=slot.spec.name,
            team=self.team.name,
            leader=self.team.leader,
            human=self.team.human,
            team_roles=self.team.role_names,
            tools=tuple(t for t in slot.binding.allowed_tools),
            task_id=task.task_id,
            attempt_id=attempt,
            subject=task.subject,
            sender=task.sender,
            body=task.body,
            parent=task.parent,
        )

    async def _run_job(self, slot: _Slot, job: Job) -> None:
        try:
            task = await self._io(self.port.read_task, job.task_id)
        except TaskNotFound:
            log.warning("%s: %s vanished before %s", slot.name, job.task_id, job.kind)
            return
        role = slot.spec.name
        record = self._task_record(task, role)
        if job.kind == "review":
            await self._review_job(slot, task)
            return
        fresh_claim = False
        if job.kind == "work":
            if task.stage == "inbox":
                try:
                    claim = await self._io(self.port.claim, task.task_id, actor=role)
                except LifecycleConflict as exc:
                    log.warning("%s: %s was claimed elsewhere: %s", slot.name, task.task_id, exc)
                    self._note(task.task_id, status="claimed_elsewhere", note=str(exc))
                    return
                task = replace(task, stage="active", attempt_id=claim.attempt_id)
                fresh_claim = True
            elif task.stage != "active":
                return  # already past this role's work
        if task.stage != "active" or task.attempt_id is None:
            return
        attempt = task.attempt_id
        self._note(task.task_id, attempt_id=attempt, status="working")
        ctx = self._context(slot, task, attempt)
        if job.kind == "settle":
            prompt = None
        elif job.kind == "work":
            # A restart may find the REPORT already written: submit, don't re-prompt. A
            # claim made just now opened a new attempt, which cannot have a report yet.
            head = None
            if not fresh_claim:
                head = await self._io(self.port.find_report_head, task.task_id, attempt)
            prompt = None if head is not None else task_prompt(ctx)
        elif job.kind == "revise":
            prompt = revision_prompt(
                ctx,
                reviewer=job.data.get("reviewer", "the reviewer"),
                reason=job.data.get("reason", ""),
            )
        elif job.kind == "consolidate":
            children = await self._child_reports(task)
            if any(c.stage in ("inbox", "active") for c in children):
                self._note(task.task_id, status="waiting_children")
                return
            prompt = consolidation_prompt(ctx, children)
        else:  # answer
            prompt = answer_prompt(
                ctx, question=job.data.get("question", ""), answer=job.data.get("answer", "")
            )
            question = self.state.questions.get(job.data.get("request_id", ""))
            if question is not None:
                question.status = "delivered"
        if job.kind in ("work", "revise", "consolidate") and prompt is not None:
            open_question = self._open_question(task.task_id, attempt)
            if open_question is not None and open_question.status == "pending":
                self._note(task.task_id, status="waiting_human")
                return
        record.status = "working"
        await self._drive(slot, task, attempt, prompt, job)

    async def _drive(
        self, slot: _Slot, task: TaskInfo, attempt: str, prompt: str | None, job: Job
    ) -> None:
        """Prompt, then settle; one reminder without a report; then stall."""
        slot.point(task.task_id, attempt)
        session_record = self.state.sessions[slot.name]
        session_record.current_task = task.task_id
        session_record.tasks_handled += 1
        reminders_left = self.team.reminder_turns
        ctx = self._context(slot, task, attempt)
        result: TurnResult | None = None
        while True:
            if prompt is not None:
                if self.state.tasks[task.task_id].turns >= self.team.turn_limit:
                    await self._stall(
                        task.task_id,
                        slot.spec.name,
                        f"turn limit ({self.team.turn_limit}) reached without a settled report",
                    )
                    return
                result = await self._turn(slot, task.task_id, prompt)
            outcome = await self._after_turn(slot, task.task_id, attempt, job)
            if outcome != "no_report":
                return
            if result is not None and result.status != "completed":
                await self._stall(
                    task.task_id,
                    slot.spec.name,
                    f"the agent's turn {result.status}"
                    + (f": {result.error}" if result.error else "")
                    + " and no report was filed",
                )
                return
            if reminders_left <= 0:
                await self._stall(
                    task.task_id,
                    slot.spec.name,
                    "the agent ended its turn without a report, also after the reminder",
                )
                return
            reminders_left -= 1
            self.state.tasks[task.task_id].reminders += 1
            prompt = reminder_prompt(ctx, turns_left=reminders_left)

    async def _turn(self, slot: _Slot, task_id: str, prompt: str) -> TurnResult:
        record = self.state.sessions[slot.name]
        try:
            session = await self._ensure_session(slot)
        except Exception as exc:
            log.exception("%s: session could not start", slot.name)
            record.status = "failed"
            return TurnResult("failed", error=f"session start failed: {exc}")
        record.status = "working"
        record.turns += 1
        self.state.tasks[task_id].turns += 1
        self._save()
        if self.prompt_started is not None:
            self.prompt_started(slot.name, task_id, time.monotonic())
        try:
            result = await session.prompt(prompt)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("%s: prompt failed", slot.name)
            result = TurnResult("failed", error=f"{type(exc).__name__}: {exc}")
            await self._close_session(slot, status="failed")
        self._record_turn(record, result)
        self._save()
        if record.zero_tool_streak >= self.team.zero_tool_limit:
            await self._open_breaker(slot, task_id)
            raise _BreakerOpen
        return result

    def _record_turn(self, record: SessionRecord, result: TurnResult) -> None:
        record.tool_calls_count += result.tool_calls
        record.unapproved_mutations += result.unapproved_mutations
        if result.approval is not None:
            record.approval = result.approval
        if result.status == "completed" and result.tool_calls == 0:
            record.zero_tool_streak += 1
        else:
            record.zero_tool_streak = 0
        if result.usage is not None:
            usage = record.usage
            usage.availability = "reported"
            usage.reported_turns += 1
            usage.input_tokens += result.usage.input_tokens or 0
            usage.output_tokens += result.usage.output_tokens or 0
            usage.thinking_tokens += result.usage.thinking_tokens or 0
            usage.cost_usd += result.usage.cost_usd or 0.0
        for path in result.files_changed:
            if path not in record.files_changed and len(record.files_changed) < MAX_FILES_CHANGED:
                record.files_changed.append(path)
        if record.status == "working":
            record.status = "ready"
        record.updated_at = now_iso()

    # ------------------------------------------------------------ after a turn

    async def _after_turn(
        self, slot: _Slot, task_id: str, attempt: str, job: Job
    ) -> Literal["reported", "waiting_children", "waiting_human", "moved", "no_report"]:
        await self._drain_spool()
        task = await self._io(self.port.read_task, task_id)
        if task.stage != "active" or task.attempt_id != attempt:
            return "moved"
        head = await self._io(self.port.find_report_head, task_id, attempt)
        if head is None:
            open_children = await self._io(self.port.children, task_id, ("inbox", "active"))
            if open_children:
                self._note(task_id, status="waiting_children")
                return "waiting_children"
            finished = await self._io(self.port.children, task_id, ("review", "done", "archive"))
            if job.kind != "consolidate" and finished:
                # Delegated work already finished during this turn.
                self._note(task_id, status="waiting_children")
                await self._maybe_consolidate(task_id)
                return "waiting_children"
            if self._open_question(task_id, attempt) is not None:
                # It asked the human and stopped: wait for the answer, no reminder.
                self._note(task_id, status="waiting_human")
                return "waiting_human"
            return "no_report"
        await self._submit(slot, task, head)
        return "reported"

    async def _submit(self, slot: _Slot, task: TaskInfo, head: ReportInfo) -> None:
        role = slot.spec.name
        if self.team.child_acceptance == "on_consolidation":
            await self._accept_children(role, task, head)
        try:
            await self._io(self.port.submit, task.task_id, actor=role, report_ref=head.report_id)
        except FcopProtocolError as exc:
            await self._stall(task.task_id, role, f"submit (T3) failed: {exc}")
            return
        self.state.sessions[slot.name].last_report_ref = head.report_id
        self._note(task.task_id, status="reported", report_ref=head.report_id)
        submitted = replace(task, stage="review")
        await self._ring_reviewer(submitted, head)

    async def _accept_children(self, leader: str, parent: TaskInfo, head: ReportInfo) -> None:
        """``on_consolidation``: the leader's report accepts the children it consolidated."""
        children = await self._io(self.port.children, parent.task_id, ("review",))
        for child in children:
            if child.sender != leader:
                continue
            reason = (
                f"Accepted by {leader}: consolidated into {head.report_id} for {parent.task_id}."
            )
            try:
                await self._io(self.port.approve, child.task_id, approver=leader, reason=reason)
            except CoordinationError as exc:
                await self._issue(child.task_id, f"could not accept {child.task_id}: {exc}")
                continue
            self._note(child.task_id, status="done")

    async def _ring_reviewer(self, task: TaskInfo, head: ReportInfo) -> None:
        reviewer = task.sender
        if reviewer == self.team.human:
            await self._request_human_review(task, head)
            return
        spec = self.team.role_for(reviewer)
        if spec is None:
            await self._issue(
                task.task_id,
                f"{task.task_id} was reported but its sender {reviewer!r} is neither a role "
                f"nor {self.team.human}: nobody can review it",
            )
            return
        self._note(task.task_id, status="waiting_review")
        if self.team.child_acceptance == "explicit" or task.parent is None:
            self._enqueue(spec.name, Job("review", task.task_id))
        else:
            await self._maybe_consolidate(task.parent)

    async def _maybe_consolidate(self, parent_id: str) -> None:
        """Ring the parent's role once no delegated child is still being worked on."""
        try:
            parent = await self._io(self.port.read_task, parent_id)
        except TaskNotFound:
            return
        if parent.stage != "active" or parent.attempt_id is None:
            return
        spec = self.team.role_for(parent.recipient)
        if spec is None:
            return
        busy = (
            ("inbox", "active", "review")
            if self.team.child_acceptance == "explicit"
            else (
                "inbox",
                "active",
            )
        )
        if await self._io(self.port.children, parent_id, busy):
            return
        if await self._io(self.port.find_report_head, parent_id, parent.attempt_id):
            self._enqueue(spec.name, Job("settle", parent_id))
            return
        self._task_record(parent, spec.name)
        self._enqueue(spec.name, Job("consolidate", parent_id))

    async def _child_reports(self, parent: TaskInfo) -> list[ChildReport]:
        children = await self._io(self.port.children, parent.task_id)
        out = []
        for child in children:
            head = None
            if child.attempt_id is not None:
                head = await self._io(self.port.find_report_head, child.task_id, child.attempt_id)
            out.append(
                ChildReport(
                    task_id=child.task_id,
                    role=child.recipient,
                    subject=child.subject,
                    stage=child.stage,
                    report_id=head.report_id if head else None,
                    result=head.result if head else None,
                    body=head.body if head else "(no report)",
                )
            )
        return out

    # ------------------------------------------------------------------ reviews

    async def _review_job(self, slot: _Slot, child: TaskInfo) -> None:
        """``explicit`` acceptance: prompt the reviewer with one report."""
        if child.stage != "review" or child.attempt_id is None:
            return
        decided = await self._io(
            self.port.find_decision, child.task_id, child.attempt_id, reviewer=slot.spec.name
        )
        if decided is not None:
            await self._apply_decision(
                slot.spec.name,
                child.task_id,
                decided.review_id,
                decided.review_kind == "acceptance",
                decided.body,
            )
            return
        head = await self._io(self.port.find_report_head, child.task_id, child.attempt_id)
        if head is None:
            return
        anchor = child
        if child.parent is not None:
            with contextlib.suppress(TaskNotFound):
                anchor = await self._io(self.port.read_task, child.parent)
        attempt = anchor.attempt_id or child.attempt_id
        slot.point(anchor.task_id, attempt)
        ctx = self._context(slot, anchor, attempt)
        report = ChildReport(
            task_id=child.task_id,
            role=child.recipient,
            subject=child.subject,
            stage=child.stage,
            report_id=head.report_id,
            result=head.result,
            body=head.body,
        )
        self._task_record(anchor, slot.spec.name)
        for turn in range(1 + self.team.reminder_turns):
            prompt = review_prompt(ctx, report)
            if turn:
                prompt = "[baton] Reminder: no review decision was recorded.\n\n" + prompt
            result = await self._turn(slot, anchor.task_id, prompt)
            await self._drain_spool()
            now = await self._io(self.port.read_task, child.task_id)
            if now.stage != "review" or now.attempt_id != child.attempt_id:
                return
            if result.status != "completed":
                break
        await self._stall(
            child.task_id, slot.spec.name, f"{slot.spec.name} did not review {head.report_id}"
        )

    async def _apply_decision(
        self, reviewer: str, task_id: str, review_id: str | None, approve: bool, reason: str
    ) -> TransitionInfo | None:
        try:
            if approve:
                info = await self._io(
                    self.port.approve,
                    task_id,
                    approver=reviewer,
                    reason=reason,
                    review_ref=review_id,
                )
            else:
                info = await self._io(
                    self.port.reject,
                    task_id,
                    approver=reviewer,
                    reason=reason,
                    review_ref=review_id,
                )
        except CoordinationError as exc:
            await self._issue(task_id, f"{reviewer}'s decision on {task_id} failed: {exc}")
            return None
        task = await self._io(self.port.read_task, task_id)
        if approve:
            self._note(task_id, status="done")
            if task.parent:
                await self._maybe_consolidate(task.parent)
        else:
            spec = self.team.role_for(task.recipient)
            self._note(task_id, status="revising", attempt_id=info.attempt_id)
            if spec is not None:
                self._enqueue(
                    spec.name,
                    Job("revise", task_id, {"reviewer": reviewer, "reason": reason}),
                )
        return info

    async def human_review(
        self,
        task_id: str,
        decision: Literal["approve", "reject"],
        reason: str = "",
        *,
        approver: str | None = None,
    ) -> TransitionInfo | None:
        """Apply a human's decision on a REPORT in review (T4 or T5 with human authority)."""
        who = approver or self.team.human
        info = await self._apply_decision(who, task_id, None, decision == "approve", reason)
        for review in self.state.pending_reviews.values():
            if review.task_id == task_id and review.status == "pending" and info is not None:
                review.status = "decided"
                review.decision = decision
                review.decided_by = who
        self._save()
        await self._notify()
        return info

    def _enqueue_answer(self, question: HumanQuestion) -> None:
        spec = self.team.role_for(question.role)
        if spec is not None and question.task_id is not None:
            self._enqueue(
                spec.name,
                Job(
                    "answer",
                    question.task_id,
                    {
                        "request_id": question.request_id,
                        "question": question.question,
                        "answer": question.answer or "",
                    },
                ),
            )

    async def human_answer(self, request_id: str, answer: str) -> bool:
        """Deliver the human's answer to an ``ask_human`` question as a new turn."""
        question = self.state.questions.get(request_id)
        if question is None or question.status != "pending" or question.task_id is None:
            return False
        question.status = "answered"
        question.answer = answer
        self._enqueue_answer(question)
        self._save()
        await self._notify()
        return True

    def _open_question(self, task_id: str, attempt: str) -> HumanQuestion | None:
        for question in self.state.questions.values():
            if (
                question.task_id == task_id
                and question.attempt_id == attempt
                and question.status in ("pending", "answered")
            ):
                return question
        return None

    async def _request_human_review(self, task: TaskInfo, head: ReportInfo) -> None:
        key = f"{task.task_id}:{head.attempt_id}"
        if key in self.state.pending_reviews:
            return
        review = PendingReview(
            key=key,
            task_id=task.task_id,
            attempt_id=head.attempt_id,
            role=head.sender,
            subject=task.subject,
            report_id=head.report_id,
            result=head.result,
            body=head.body,
            requested_at=now_iso(),
        )
        self.state.pending_reviews[key] = review
        self._note(task.task_id, status="waiting_human")
        self._save()
        await self.human_sink.review_requested(review)

    # -------------------------------------------------------------------- spool

    async def _drain_spool(self) -> None:
        records, offset = await self._io(read_spool, self.paths.spool, self.state.spool_offset)
        if offset == self.state.spool_offset:
            return
        self.state.spool_offset = offset
        for record in records:
            try:
                await self._on_spool(record)
            except Exception:
                log.exception("spool record %r failed", record)
        self._save()

    async def _on_spool(self, record: SpoolRecord) -> None:
        if record.kind == "ask_human":
            request_id = str(record.data.get("request_id", ""))
            if not request_id or request_id in self.state.questions:
                return
            question = HumanQuestion(
                request_id=request_id,
                role=record.role,
                task_id=record.task_id,
                attempt_id=record.attempt_id,
                question=str(record.data.get("question", "")),
                issue_id=record.data.get("issue_id"),
                asked_at=record.at or now_iso(),
            )
            self.state.questions[request_id] = question
            await self.human_sink.question_asked(question)
        elif record.kind == "review" and record.task_id is not None:
            task = await self._io(self.port.read_task, record.task_id)
            if task.stage != "review" or task.attempt_id != record.attempt_id:
                return
            await self._apply_decision(
                record.role,
                record.task_id,
                str(record.data.get("review_id")),
                record.data.get("decision") == "approve",
                str(record.data.get("reason", "")),
            )
        else:
            log.warning("unknown spool record kind %r", record.kind)

    async def _revise_job(self, task: TaskInfo) -> Job:
        """After a restart, a rejected TASK resumes with its reviewer's reason."""
        refs = task.last_transition.get("evidence_ref") or []
        reviews = [r for r in refs if isinstance(r, str) and r.startswith("REVIEW-")]
        try:
            review = await self._io(self.port.read_review, reviews[0]) if reviews else None
        except CoordinationError:
            review = None
        if review is None:
            return Job("work", task.task_id)
        return Job("revise", task.task_id, {"reviewer": review.sender, "reason": review.body})

    # ----------------------------------------------------------- stalls, issues

    async def _issue(self, task_id: str | None, message: str) -> str | None:
        log.warning("%s", message)
        try:
            return await self._io(
                self.port.write_issue,
                sender=SYSTEM_SENDER,
                recipient=self.team.human,
                severity="error",
                body=message,
                subject_ref=task_id,
            )
        except CoordinationError:
            log.exception("could not file an ISSUE: %s", message)
            return None

    async def _stall(self, task_id: str, role: str, reason: str) -> None:
        issue = await self._issue(task_id, f"{task_id} ({role}) stalled: {reason}")
        self.state.stalls.append(
            Stall(task_id=task_id, role=role, reason=reason, issue_id=issue, at=now_iso())
        )
        self._note(task_id, status="stalled", note=reason)
        self._save()

    # ----------------------------------------------------------- circuit breaker

    def _breaker_open(self, role: str) -> bool:
        until = self.state.breakers.get(role)
        if until is None:
            return False
        if until <= self.wall_clock():
            del self.state.breakers[role]
            return False
        return True

    async def _open_breaker(self, slot: _Slot, task_id: str) -> None:
        role = slot.spec.name
        until = self.wall_clock() + self.team.zero_tool_cooldown
        self.state.breakers[role] = until
        self.state.sessions[slot.name].zero_tool_streak = 0
        await self._issue(
            task_id,
            f"{role}: {self.team.zero_tool_limit} turns in a row without a single tool call; "
            f"pausing {role} for {self.team.zero_tool_cooldown:.0f}s (zero-tool-call breaker)",
        )
        self._note(task_id, status="paused", note="zero-tool-call circuit breaker open")

    def _park(self, role: str, job: Job) -> bool:
        """Hold a job while ``role``'s breaker is open; it no longer counts as busy."""
        self._parked.setdefault(role, []).append(job)
        self._note(job.task_id, status="paused")
        self._busy -= 1
        if len(self._parked[role]) == 1:
            delay = max(0.0, self.state.breakers.get(role, 0.0) - self.wall_clock())
            timer = asyncio.get_running_loop().create_task(self._unpark(role, delay))
            self._timers.add(timer)
            timer.add_done_callback(self._timers.discard)
        return True

    async def _unpark(self, role: str, delay: float) -> None:
        await asyncio.sleep(delay)
        for job in self._parked.pop(role, []):
            self._queued.discard((job.kind, job.task_id))
            self._enqueue(role, job)
        await self._notify()

    # ------------------------------------------------------------------ restart

    async def _recover(self) -> None:
        """Re-derive work from FCoP: resume active TASKs, re-ring pending reviews."""
        for task in await self._io(self.port.list_stage, "active"):
            spec = self.team.role_for(task.recipient)
            if spec is None or task.attempt_id is None:
                continue
            self._task_record(task, spec.name)
            head = await self._io(self.port.find_report_head, task.task_id, task.attempt_id)
            if head is not None:
                self._enqueue(spec.name, Job("settle", task.task_id))
                continue
            children = await self._io(self.port.children, task.task_id)
            question = self._open_question(task.task_id, task.attempt_id)
            if any(c.stage in ("inbox", "active") for c in children):
                self._note(task.task_id, status="waiting_children")
            elif children:
                await self._maybe_consolidate(task.task_id)
            elif question is not None and question.status == "answered":
                self._enqueue_answer(question)
            elif question is not None:
                self._note(task.task_id, status="waiting_human")
            elif task.last_transition.get("tool") == "reject_task":
                self._enqueue(spec.name, await self._revise_job(task))
            else:
                self._enqueue(spec.name, Job("work", task.task_id))
        for task in await self._io(self.port.list_stage, "review"):
            if task.attempt_id is None:
                continue
            head = await self._io(self.port.find_report_head, task.task_id, task.attempt_id)
            if head is None:
                continue
            if task.sender == self.team.human:
                await self._request_human_review(task, head)
                continue
            spec = self.team.role_for(task.sender)
            if spec is None:
                continue
            decided = await self._io(
                self.port.find_decision, task.task_id, task.attempt_id, reviewer=spec.name
            )
            if decided is not None:
                await self._apply_decision(
                    spec.name,
                    task.task_id,
                    decided.review_id,
                    decided.review_kind == "acceptance",
                    decided.body,
                )
            elif self.team.child_acceptance == "explicit" or task.parent is None:
                self._enqueue(spec.name, Job("review", task.task_id))
            else:
                await self._maybe_consolidate(task.parent)
        await self._drain_spool()
        self._save()
        await self._notify()
