"""Doing what :func:`~baton.team.decide.decide` said, one TASK at a time.

:meth:`Executor.evaluate` gathers the facts (in a worker thread), asks
``decide`` for the next step, performs it, and repeats until the step is a wait.
Every change of baton's record is a walk through :data:`~baton.team.states.TASK`
committed with its ``team.task.changed`` events (and, where it belongs, the
human request) in one transaction, guarded by the record's version, so two
evaluations can never both apply a move. FCoP writes go through the port in
worker threads; nothing here blocks the event loop.

A turn (:class:`~baton.team.decide.Dispatch`) is three commits: ``dispatched``
(with the slot's new pointer, before the prompt is sent), ``running`` (the
session is up and the prompt handed over) and ``finished`` with its outcome; the
task's lock is not held while the agent works. A turn still ``dispatched`` or
``running`` when its daemon is gone is ``interrupted`` and re-prompted with
context (see :mod:`baton.team.decide`).

No single TASK can stop the loop: an error in one TASK's step makes that TASK
``needs_attention`` (a record, an inbox request, an FCoP ISSUE); the others flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from baton.coordination.errors import CoordinationError, LifecycleConflict, TaskNotFound
from baton.coordination.fcop_port import FcopPort, TaskInfo
from baton.coordination.fcop_recovery import Unresolved, resolve_two_stages, validate_workspace
from baton.coordination.header import (
    ChildReport,
    PromptContext,
    answer_prompt,
    consolidation_prompt,
    reminder_prompt,
    resume_prompt,
    review_prompt,
    revision_prompt,
    task_prompt,
)
from baton.coordination.team import TeamConfig
from baton.events.model import Payload, TeamRecovery, TeamTaskChanged
from baton.requests.ledger import Change, Ledger, StaleRecord
from baton.requests.model import (
    ElicitationRequest,
    ElicitationSchema,
    ReviewRequest,
    StringField,
)
from baton.requests.states import Event as RequestEvent
from baton.store import requests_sql, team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import StoreConflict, Tx
from baton.team import decide as d
from baton.team.contract import TurnResult
from baton.team.facts import FactSource, policy_for
from baton.team.records import TaskRecord, TurnRecord
from baton.team.slots import Slot, Slots
from baton.team.states import TASK, TURN, SlotEvent, TaskEvent, TaskState, TurnEvent, TurnState

__all__ = ["BreakerTripped", "Executor", "Job", "ReviewSummary"]

log = logging.getLogger("baton.team.executor")

MAX_REASON = 2000
"""Characters of a reason kept in a record (it is a diagnosis, not the evidence)."""
MAX_STEPS = 40
"""Steps of one evaluation before baton calls it a loop (a bug) and asks a human."""
SYSTEM_SENDER = "BATON"

ReviewSummary = Callable[[TaskInfo, d.ReportView, str], str]
"""``(task, report head, report body) -> text`` of the review document a human reads."""


@dataclass(frozen=True, slots=True)
class Job:
    """A TASK for a slot worker of ``role`` (its own work, or a review of it)."""

    task_id: str
    role: str
    review: bool = False


@dataclass(slots=True)
class _Turn:
    record: TurnRecord
    task: TaskRecord
    slot: Slot
    prompt: str


class _Retry(Exception):
    """The record moved under us: gather again."""


class BreakerTripped(Exception):
    """A slot's role made ``zero_tool_limit`` turns in a row without a tool call."""

    def __init__(self, slot: Slot) -> None:
        super().__init__(slot.name)
        self.slot = slot


def _default_summary(task: TaskInfo, head: d.ReportView, body: str) -> str:
    return f"{head.sender}: {task.subject} — result {head.result}\n\n{body}"


class Executor:
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
        review_summary: ReviewSummary = _default_summary,
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
        self.review_summary = review_summary
        self.facts = FactSource(port, store, team)
        self.live: set[tuple[str, int]] = set()
        """(task, dispatch) of the turns running in this daemon right now."""
        self._locks: dict[str, asyncio.Lock] = {}
        self.dispatch_log: list[tuple[str, str, str]] = []
        """(slot, turn kind, task id) in dispatch order; tests and traces read it."""
        self.prompt_started: Callable[[str, str, float], None] | None = None

    # ------------------------------------------------------------------ records

    def _lock(self, task_id: str) -> asyncio.Lock:
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        return lock

    def _walk(
        self, before: TaskRecord | None, target: TaskState, why: str | None, **changes: Any
    ) -> tuple[TaskRecord, list[Payload]]:
        """``before`` walked to ``target`` through legal moves, one event per move."""
        assert before is not None
        events = TASK.path(before.state, target)
        payloads: list[Payload] = []
        state: TaskState = before.state
        for event in events:
            new = TASK.next(state, event)
            payloads.append(
                TeamTaskChanged(
                    task_id=before.task_id,
                    role=before.role,
                    from_state=state.value,
                    to_state=new.value,
                    event=event.value,
                    attempt_id=changes.get("attempt_id", before.attempt_id),
                    dispatch=changes.get("dispatches") if event is TaskEvent.DISPATCH else None,
                    reason=why,
                )
            )
            state = new
        after = dataclasses.replace(
            before, state=target, updated_at=self.now(), version=before.version + 1, **changes
        )
        return after, payloads

    async def _commit_record(
        self,
        before: TaskRecord,
        after: TaskRecord,
        payloads: Sequence[Payload],
        also: Callable[[Tx], None] | None = None,
    ) -> TaskRecord:
        def write(tx: Tx) -> None:
            changed = team_sql.TASKS.update(
                tx, before.task_id, after.row(), guard={"version": before.version}
            )
            if changed != 1:
                raise _Retry(f"{before.task_id} changed since it was read")
            if also is not None:
                also(tx)

        await self.journal.commit(payloads, write)
        return after

    async def move(
        self,
        record: TaskRecord,
        target: TaskState,
        *,
        why: str | None = None,
        also: Callable[[Tx], None] | None = None,
        extra: Sequence[Payload] = (),
        **changes: Any,
    ) -> TaskRecord:
        """Walk ``record`` to ``target`` and commit it with its events (and ``also``)."""
        after, payloads = self._walk(record, target, why, **changes)
        return await self._commit_record(record, after, [*payloads, *extra], also)

    async def seen(self, info: TaskInfo, role: str, *, for_human: bool = False) -> TaskRecord:
        """The record of a TASK baton meets for the first time (state ``seen``)."""
        now = self.now()
        record = TaskRecord(
            task_id=info.task_id,
            role=role,
            state=TaskState.SEEN,
            created_at=now,
            updated_at=now,
            for_human=for_human,
            sender=info.sender,
            recipient=info.recipient,
            subject=info.subject,
            parent=info.parent,
        )
        payload = TeamTaskChanged(
            task_id=info.task_id,
            role=role,
            from_state=None,
            to_state=TaskState.SEEN.value,
            event=TaskEvent.SEE.value,
        )

        def write(tx: Tx) -> None:
            team_sql.TASKS.insert(tx, record.row())

        try:
            await self.journal.commit([payload], write)
        except StoreConflict:
            existing = await asyncio.to_thread(self.facts.record, info.task_id)
            assert existing is not None
            return existing
        return record

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
            turn: _Turn | None = None
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
                if isinstance(step, d.Wait):
                    return
                try:
                    if isinstance(step, d.Dispatch):
                        assert slot is not None
                        turn = await self._begin_turn(facts, step.kind, slot)
                    elif not await self._do(step, facts, slot):
                        return
                except (_Retry, StaleRecord):
                    continue
            if turn is not None:
                await self._run_turn(turn)
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

    async def _do(self, step: d.Step, facts: d.Facts, slot: Slot | None) -> bool:
        """Perform one non-turn step; True to keep evaluating this TASK."""
        record = facts.record
        task_id = facts.task.task_id
        if isinstance(step, d.Queue):
            self.enqueue(Job(task_id, step.role, step.review))
            return False
        if isinstance(step, d.Note):
            assert record is not None
            if record.state is not step.to:
                await self.move(record, step.to, why=step.reason)
            return False
        if isinstance(step, d.Resolve):
            await self._resolve(task_id)
            return True
        if isinstance(step, d.Claim):
            return await self._claim(facts)
        if isinstance(step, d.Submit):
            return await self._submit(facts, step)
        if isinstance(step, d.OpenReview):
            await self._open_review(facts, step)
            return False
        if isinstance(step, d.ApplyHumanReview):
            return await self._apply_human_review(facts, step)
        if isinstance(step, d.ApplyDecision):
            return await self._apply_decision(facts, step)
        if isinstance(step, d.NotifyParent):
            self.schedule(step.parent)
            return False
        if isinstance(step, d.Settle):
            await self._settle(facts)
            return False
        if isinstance(step, d.Attention):
            await self._attention_locked(task_id, step.reason)
            return False
        if isinstance(step, d.Fail):
            await self._attention_locked(task_id, step.reason, failed=True)
            return False
        if isinstance(step, d.Retry):
            return await self._retry(facts, step)
        raise AssertionError(f"unhandled step {step!r}")

    # ----------------------------------------------------------------- FCoP steps

    async def _claim(self, facts: d.Facts) -> bool:
        record = facts.record
        assert record is not None and facts.role is not None
        try:
            claim = await asyncio.to_thread(self.port.claim, facts.task.task_id, actor=facts.role)
        except LifecycleConflict as exc:
            await self._attention_locked(facts.task.task_id, f"claimed elsewhere: {exc}")
            return False
        await self.move(
            record,
            TaskState.CLAIMED,
            attempt_id=claim.attempt_id,
            turns=0,
            reminders=0,
            resumes=0,
        )
        return True

    async def _submit(self, facts: d.Facts, step: d.Submit) -> bool:
        record = facts.record
        assert record is not None and facts.role is not None
        task_id = facts.task.task_id
        for child in step.accept:
            reason = f"Accepted by {facts.role}: consolidated into {step.report_id} for {task_id}."
            try:
                await asyncio.to_thread(
                    self.port.approve, child, approver=facts.role, reason=reason
                )
            except CoordinationError as exc:
                await self._issue(child, f"could not accept {child}: {exc}")
                continue
            self.schedule(child)
        await asyncio.to_thread(
            self.port.submit, task_id, actor=facts.role, report_ref=step.report_id
        )
        await self.move(
            record,
            TaskState.IN_REVIEW,
            why=f"report {step.report_id} ({step.result}) submitted",
            report_ref=step.report_id,
            result=step.result,
        )
        return True

    async def _open_review(self, facts: d.Facts, step: d.OpenReview) -> None:
        record = facts.record
        assert record is not None
        info = await asyncio.to_thread(self.port.read_task, facts.task.task_id)
        head = await asyncio.to_thread(
            self.port.find_report_head, info.task_id, info.attempt_id or ""
        )
        body = head.body if head is not None else ""
        document = ReviewRequest(
            task_id=info.task_id,
            report_ref=step.report_id,
            summary=self.review_summary(
                info, d.ReportView(step.report_id, step.result, step.sender), body
            ),
            role=step.sender,
        )
        change = self.ledger.prepare_create(
            document,
            run_id=self.run_id,
            connection_id=None,
            jsonrpc_id=f"review:{info.task_id}:{info.attempt_id}",
            session_id=None,
            turn_id=None,
        )
        request_id = change.records[0].request_id
        await self.move(
            record,
            TaskState.IN_REVIEW,
            why=f"waiting for {self.team.human}'s review",
            also=change.apply,
            extra=change.payloads,
            review_request=request_id,
            report_ref=step.report_id,
            result=step.result,
        )
        self.watch_request(request_id, info.task_id)

    def _deliver(self, request_id: str | None) -> Change | None:
        """The change marking an answered request delivered (the loop applied it)."""
        if request_id is None:
            return None
        row = self.store.read_tx(lambda tx: requests_sql.fetch(tx, request_id))
        if row is None:
            return None
        from baton.requests.records import record_from_row

        before = record_from_row(row)
        if before.state.value != "answered":
            return None
        after = self.ledger.moved(before, RequestEvent.DELIVER, delivered_at=self.now())
        return self.ledger.move_change([before], [after])

    async def _apply_human_review(self, facts: d.Facts, step: d.ApplyHumanReview) -> bool:
        record = facts.record
        assert record is not None
        task_id = facts.task.task_id
        operation = self.port.approve if step.approve else self.port.reject
        try:
            info = await asyncio.to_thread(
                operation, task_id, approver=self.team.human, reason=step.reason
            )
        except CoordinationError as exc:
            await self._attention_locked(task_id, f"{self.team.human}'s decision failed: {exc}")
            return False
        change = await asyncio.to_thread(self._deliver, step.request_id)
        target = TaskState.SETTLED if step.approve else TaskState.CLAIMED
        changes: dict[str, Any] = {}
        if not step.approve:
            changes = {
                "attempt_id": info.attempt_id,
                "turns": 0,
                "reminders": 0,
                "resumes": 0,
                "review_request": None,
            }
        await self.move(
            record,
            target,
            why=f"{self.team.human} {'approved' if step.approve else 'sent it back'}",
            also=change.apply if change else None,
            extra=change.payloads if change else (),
            **changes,
        )
        if step.approve and facts.task.parent:
            self.schedule(facts.task.parent)
        return True

    async def _apply_decision(self, facts: d.Facts, step: d.ApplyDecision) -> bool:
        record = facts.record
        assert record is not None
        task_id = facts.task.task_id
        operation = self.port.approve if step.approve else self.port.reject
        try:
            info = await asyncio.to_thread(
                operation,
                task_id,
                approver=step.reviewer,
                reason=step.reason,
                review_ref=step.review_id,
            )
        except CoordinationError as exc:
            await self._attention_locked(task_id, f"{step.reviewer}'s decision failed: {exc}")
            return False
        if step.approve:
            await self.move(record, TaskState.SETTLED, why=f"approved by {step.reviewer}")
            if facts.task.parent:
                self.schedule(facts.task.parent)
        else:
            await self.move(
                record,
                TaskState.CLAIMED,
                why=f"sent back by {step.reviewer}",
                attempt_id=info.attempt_id,
                turns=0,
                reminders=0,
                resumes=0,
            )
        return True

    async def _settle(self, facts: d.Facts) -> None:
        record = facts.record
        assert record is not None
        change = await asyncio.to_thread(self._deliver, record.review_request)
        await self.move(
            record,
            TaskState.SETTLED,
            why="done in FCoP",
            also=change.apply if change else None,
            extra=change.payloads if change else (),
        )
        if facts.task.parent:
            self.schedule(facts.task.parent)

    async def _resolve(self, task_id: str) -> None:
        try:
            repair = await asyncio.to_thread(resolve_two_stages, self.port, task_id)
        except Unresolved as exc:
            await self._recovery_event(task_id, exc.rule, "needs_attention", exc.detail, None)
            await self._attention_locked(task_id, f"left in two FCoP stages: {exc.detail}")
            raise _Retry(task_id) from None
        verdict = await asyncio.to_thread(validate_workspace, self.port.root)
        await self._recovery_event(
            task_id, repair.rule, "resolved", repair.detail, bool(verdict.get("valid"))
        )

    async def _recovery_event(
        self, task_id: str | None, rule: str, outcome: Any, detail: str, valid: bool | None
    ) -> None:
        payload = TeamRecovery(
            task_id=task_id, rule=rule, outcome=outcome, detail=detail, valid=valid
        )
        await self.journal.commit([payload], lambda tx: None)

    # ------------------------------------------------------------------ attention

    async def _issue(self, task_id: str | None, message: str) -> str | None:
        """An FCoP ISSUE to the human about ``task_id`` (about the workspace when FCoP
        refuses a relation to it, e.g. a TASK in two stages)."""
        log.warning("%s", message)
        for subject in (task_id, None) if task_id else (None,):
            try:
                return await asyncio.to_thread(
                    self.port.write_issue,
                    sender=SYSTEM_SENDER,
                    recipient=self.team.human,
                    severity="error",
                    body=message,
                    subject_ref=subject,
                )
            except CoordinationError:
                log.exception("could not file an ISSUE about %s: %s", subject, message)
        return None

    async def _attention(self, task_id: str, reason: str, *, failed: bool = False) -> None:
        """``needs_attention`` (or ``failed``) from outside an evaluation of ``task_id``."""
        async with self._lock(task_id):
            await self._attention_locked(task_id, reason, failed=failed)

    async def _attention_locked(self, task_id: str, reason: str, *, failed: bool = False) -> None:
        """``needs_attention`` (or ``failed``): record + inbox request + FCoP ISSUE, once."""
        reason = reason if len(reason) <= MAX_REASON else reason[:MAX_REASON] + " [...]"
        issue: str | None = None
        for _ in range(3):
            record = await asyncio.to_thread(self.facts.record, task_id)
            if record is None:
                info = await asyncio.to_thread(self.facts.task, task_id)
                if info is None:
                    log.warning("%s needs attention but is gone: %s", task_id, reason)
                    return
                spec = self.team.role_for(info.recipient)
                record = await self.seen(info, spec.name if spec else info.recipient)
            if record.state in (TaskState.NEEDS_ATTENTION, TaskState.FAILED):
                return
            if issue is None:
                issue = await self._issue(
                    task_id, f"{task_id} ({record.role}) needs attention: {reason}"
                )
            document = ElicitationRequest(
                message=(
                    f"{task_id} ({record.role}: {record.subject}) needs attention: {reason}. "
                    "Accept to have baton retry it; decline to leave it as it is."
                ),
                requested_schema=ElicitationSchema(
                    title="Retry?",
                    fields=(StringField(name="note", title="A note for the log"),),
                ),
            )
            change = self.ledger.prepare_create(
                document,
                run_id=self.run_id,
                connection_id=None,
                jsonrpc_id=f"attention:{task_id}:{record.version}",
                session_id=None,
                turn_id=None,
            )
            target = (
                TaskState.FAILED
                if failed and record.state is TaskState.TURN_FINISHED
                else TaskState.NEEDS_ATTENTION
            )
            try:
                await self.move(
                    record,
                    target,
                    why=reason,
                    reason=reason,
                    also=change.apply,
                    extra=change.payloads,
                    issue_id=issue,
                    attention_request=change.records[0].request_id,
                )
            except (_Retry, StaleRecord):
                continue
            self.watch_request(change.records[0].request_id, task_id)
            return

    async def _retry(self, facts: d.Facts, step: d.Retry) -> bool:
        record = facts.record
        assert record is not None
        change = await asyncio.to_thread(self._deliver, step.request_id)
        await self.move(
            record,
            TaskState.CLAIMED,
            why=f"{self.team.human} asked to retry",
            also=change.apply if change else None,
            extra=change.payloads if change else (),
            turns=0,
            reminders=0,
            resumes=0,
            attention_request=None,
        )
        return True

    # ---------------------------------------------------------------------- turns

    def _context(self, slot: Slot, task: TaskInfo, attempt: str) -> PromptContext:
        return PromptContext(
            role=slot.spec.name,
            team=self.team.name,
            leader=self.team.leader,
            human=self.team.human,
            team_roles=self.team.role_names,
            tools=tuple(slot.spec.tools),
            task_id=task.task_id,
            attempt_id=attempt,
            subject=task.subject,
            sender=task.sender,
            body=task.body,
            parent=task.parent,
        )

    def _child_reports(self, parent: str) -> list[ChildReport]:
        out = []
        for child in self.port.children(parent):
            head = None
            if child.attempt_id is not None and child.stage != "inbox":
                head = self.port.find_report_head(child.task_id, child.attempt_id)
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

    def _build_prompt(
        self, kind: d.JobKind, facts: d.Facts, slot: Slot, record: TaskRecord
    ) -> tuple[str, str, str | None]:
        """(prompt, anchor task, anchor attempt) — blocking reads; run in a thread."""
        task = self.port.read_task(facts.task.task_id)
        attempt = task.attempt_id or ""
        if kind == "review":
            head = self.port.find_report_head(task.task_id, attempt)
            if head is None:
                raise CoordinationError(f"{task.task_id} has no report to review")
            anchor = task
            if task.parent is not None:
                with contextlib.suppress(TaskNotFound):
                    anchor = self.port.read_task(task.parent)
            ctx = self._context(slot, anchor, anchor.attempt_id or attempt)
            child = ChildReport(
                task_id=task.task_id,
                role=task.recipient,
                subject=task.subject,
                stage=task.stage,
                report_id=head.report_id,
                result=head.result,
                body=head.body,
            )
            prompt = review_prompt(ctx, child)
            if facts.review_turns:
                prompt = "[baton] Reminder: no review decision was recorded.\n\n" + prompt
            return prompt, anchor.task_id, anchor.attempt_id
        ctx = self._context(slot, task, attempt)
        if kind == "work":
            return task_prompt(ctx), task.task_id, attempt
        if kind in ("resume", "retry"):
            why = (
                "baton stopped before the turn finished"
                if kind == "resume"
                else f"the turn {facts.last_turn.outcome if facts.last_turn else 'failed'}"
                + (
                    f" ({facts.last_turn.error})"
                    if facts.last_turn and facts.last_turn.error
                    else ""
                )
            )
            delegated = self._child_reports(task.task_id) if facts.children else []
            return resume_prompt(ctx, why=why, delegated=delegated), task.task_id, attempt
        if kind == "remind":
            left = self.team.reminder_turns - record.reminders - 1
            return reminder_prompt(ctx, turns_left=left), task.task_id, attempt
        if kind == "consolidate":
            return (
                consolidation_prompt(ctx, self._child_reports(task.task_id)),
                task.task_id,
                attempt,
            )
        if kind == "revise":
            refs = task.last_transition.get("evidence_ref") or []
            reviews = [r for r in refs if isinstance(r, str) and r.startswith("REVIEW-")]
            reviewer, reason = task.sender, ""
            if reviews:
                with contextlib.suppress(CoordinationError):
                    review = self.port.read_review(reviews[0])
                    reviewer, reason = review.sender, review.body
            return revision_prompt(ctx, reviewer=reviewer, reason=reason), task.task_id, attempt
        question = facts.question
        assert kind == "answer" and question is not None
        text = answer_prompt(ctx, question=question.question, answer=question.answer or "")
        return text, task.task_id, attempt

    async def _begin_turn(self, facts: d.Facts, kind: d.JobKind, slot: Slot) -> _Turn:
        """Commit ``dispatched``: the turn row, the record, the slot's pointer."""
        record = facts.record
        assert record is not None
        prompt, anchor, anchor_attempt = await asyncio.to_thread(
            self._build_prompt, kind, facts, slot, record
        )
        dispatch = record.dispatches + 1
        turn = TurnRecord(
            task_id=record.task_id,
            dispatch=dispatch,
            slot=slot.name,
            role=slot.spec.name,
            kind=kind,
            state=TURN.next(None, TurnEvent.DISPATCH),
            started_at=self.now(),
            attempt_id=facts.task.attempt_id,
            anchor=anchor,
            run_id=self.run_id,
        )
        question = facts.question if kind == "answer" else None
        changes: dict[str, Any] = {"dispatches": dispatch}
        if kind != "review":
            changes.update(
                job=kind,
                turns=record.turns + 1,
                reminders=record.reminders + (kind == "remind"),
                resumes=record.resumes + (kind in ("resume", "retry")),
            )
            after, payloads = self._walk(
                record, TaskState.DISPATCHED, f"{kind} turn on {slot.name}", **changes
            )
        else:
            after = dataclasses.replace(
                record, updated_at=self.now(), version=record.version + 1, **changes
            )
            payloads = []
        deliver = None
        if question is not None and question.request_id is not None:
            deliver = await asyncio.to_thread(self._deliver, question.request_id)

        def pointer_and_turn(tx: Tx) -> None:
            team_sql.TURNS.insert(tx, turn.row())
            if question is not None:
                team_sql.QUESTIONS.update(
                    tx,
                    question.ask_id,
                    {"state": "delivered", "answer": question.answer, "updated_at": self.now()},
                )
            if deliver is not None:
                deliver.apply(tx)

        task_before = record

        def write(tx: Tx) -> None:
            changed = team_sql.TASKS.update(
                tx, task_before.task_id, after.row(), guard={"version": task_before.version}
            )
            if changed != 1:
                raise _Retry(task_before.task_id)
            pointer_and_turn(tx)

        await self.slots.commit(
            slot,
            None,
            extra=[*payloads, *(deliver.payloads if deliver else ())],
            also=write,
            task_id=anchor,
            attempt_id=anchor_attempt,
            pointer_seq=slot.record.pointer_seq + 1,
            tasks_handled=slot.record.tasks_handled + 1,
        )
        self.live.add((turn.task_id, turn.dispatch))
        self.dispatch_log.append((slot.name, kind, turn.task_id))
        return _Turn(turn, after, slot, prompt)

    async def _run_turn(self, turn: _Turn) -> None:
        """Run a dispatched turn outside the task's lock; commit how it ended."""
        slot = turn.slot
        key = (turn.record.task_id, turn.record.dispatch)
        try:
            try:
                session = await self.slots.ensure_session(slot)
            except Exception as exc:
                await self._finish(turn, TurnResult("failed", error=f"session start failed: {exc}"))
                return
            await self._start(turn)
            if self.prompt_started is not None:
                self.prompt_started(slot.name, turn.record.task_id, time.monotonic())
            try:
                result = await session.prompt(turn.prompt)
            except asyncio.CancelledError:
                await asyncio.shield(self._interrupt(turn, "baton stopped during the turn"))
                raise
            except Exception as exc:
                log.exception("%s: prompt failed", slot.name)
                result = TurnResult("failed", error=f"{type(exc).__name__}: {exc}")
                await self.slots.drop_session(slot, reason=str(exc))
            await self._finish(turn, result)
        finally:
            self.live.discard(key)

    async def _turn_commit(
        self,
        turn: _Turn,
        turn_event: TurnEvent,
        task_target: TaskState | None,
        slot_event: SlotEvent | None,
        *,
        reason: str | None = None,
        turn_changes: dict[str, Any] | None = None,
        slot_changes: dict[str, Any] | None = None,
    ) -> None:
        before_turn = turn.record
        new_state = TURN.next(before_turn.state, turn_event)
        after_turn = dataclasses.replace(before_turn, state=new_state, **(turn_changes or {}))
        task_id = before_turn.task_id
        for _ in range(5):
            record = await asyncio.to_thread(self.facts.record, task_id)
            assert record is not None
            payloads: list[Payload] = []
            task_after: TaskRecord | None = None
            if task_target is not None and before_turn.kind != "review":
                task_after, payloads = self._walk(record, task_target, reason)

            def write(
                tx: Tx,
                record: TaskRecord = record,
                task_after: TaskRecord | None = task_after,
            ) -> None:
                changed = team_sql.TURNS.update_turn(
                    tx,
                    task_id,
                    before_turn.dispatch,
                    after_turn.row(),
                    state=before_turn.state.value,
                )
                if changed != 1:
                    raise _Retry(f"turn {task_id}#{before_turn.dispatch} changed")
                if task_after is not None:
                    ok = team_sql.TASKS.update(
                        tx, task_id, task_after.row(), guard={"version": record.version}
                    )
                    if ok != 1:
                        raise _Retry(task_id)

            try:
                await self.slots.commit(
                    turn.slot,
                    slot_event,
                    reason=reason,
                    extra=payloads,
                    also=write,
                    **(slot_changes or {}),
                )
            except _Retry:
                continue
            turn.record = after_turn
            return
        raise _Retry(task_id)

    async def _start(self, turn: _Turn) -> None:
        await self._turn_commit(turn, TurnEvent.START, TaskState.TURN_RUNNING, SlotEvent.PROMPT)

    async def _interrupt(self, turn: _Turn, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self._turn_commit(
                turn,
                TurnEvent.INTERRUPT,
                TaskState.INTERRUPTED,
                SlotEvent.CLOSE,
                reason=reason,
                turn_changes={"ended_at": self.now(), "error": reason},
            )

    async def _finish(self, turn: _Turn, result: Any) -> None:
        slot = turn.slot
        counters = (
            self.slots.counters_after(slot, result)
            if turn.record.state is TurnState.RUNNING
            else {}
        )
        slot_event = None
        if slot.record.state.value == "working":
            slot_event = SlotEvent.TURN_END if slot.session is not None else SlotEvent.FAIL
        await self._turn_commit(
            turn,
            TurnEvent.FINISH,
            TaskState.TURN_FINISHED,
            slot_event,
            reason=f"turn {result.status}" + (f": {result.error}" if result.error else ""),
            turn_changes={
                "outcome": result.status,
                "stop_reason": result.stop_reason,
                "tool_calls": result.tool_calls,
                "error": result.error,
                "ended_at": self.now(),
            },
            slot_changes=counters,
        )
