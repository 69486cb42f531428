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
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from baton.coordination.errors import CoordinationError, LifecycleConflict
from baton.coordination.fcop_port import FcopPort, TaskInfo
from baton.coordination.fcop_recovery import Unresolved, resolve_two_stages, validate_workspace
from baton.coordination.ordering import Unmet, not_run_report
from baton.coordination.review_summary import ChildSummary, ReviewFacts, review_document
from baton.coordination.team import TeamConfig
from baton.errors import ControlFlow
from baton.events.model import TeamRecovery
from baton.requests.ledger import Ledger, StaleRecord
from baton.requests.model import (
    ElicitationRequest,
    ElicitationSchema,
    ReviewRequest,
    StringField,
)
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team import decide as d
from baton.team.book import RecordMoved
from baton.team.facts import FactSource, policy_for
from baton.team.prompts import Prompts
from baton.team.records import TaskRecord
from baton.team.slots import Slot, Slots
from baton.team.states import TaskState
from baton.team.turns import RoleTurn, RoleTurnDriver

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


class BreakerTripped(ControlFlow):
    """A slot's role made ``zero_tool_limit`` turns in a row without a tool call."""

    def __init__(self, slot: Slot) -> None:
        super().__init__(slot.name)
        self.slot = slot


class Executor(RoleTurnDriver):
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
                if isinstance(step, d.Wait):
                    return
                try:
                    if isinstance(step, d.Dispatch):
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
        if isinstance(step, d.NotRun):
            return await self._not_run(facts, step)
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

    async def _not_run(self, facts: d.Facts, step: d.NotRun) -> bool:
        """Claim a TASK whose prerequisites can never finish and file baton's REPORT on it.

        The next step submits it like any report (T3): its sender's consolidation then
        sees a ``blocked`` child with the reasons, instead of work that ran without
        its inputs.
        """
        record = facts.record
        assert record is not None and facts.role is not None
        task_id = facts.task.task_id
        try:
            claim = await asyncio.to_thread(self.port.claim, task_id, actor=facts.role)
        except LifecycleConflict as exc:
            await self._attention_locked(task_id, f"claimed elsewhere: {exc}")
            return False
        result, body = not_run_report(Unmet(step.reasons))
        await asyncio.to_thread(
            self.port.write_report,
            task_id=task_id,
            attempt_id=claim.attempt_id,
            sender=SYSTEM_SENDER,
            recipient=facts.task.sender,
            result=result,
            body=body,
        )
        await self.move(
            record,
            TaskState.CLAIMED,
            why="not run: " + "; ".join(step.reasons),
            attempt_id=claim.attempt_id,
            turns=0,
            reminders=0,
            resumes=0,
        )
        return True

    async def _release_dependents(self, parent: str | None) -> None:
        """A sibling finished: the TASKs still in the inbox under ``parent`` that wait for
        siblings look at their gate again."""
        if parent is None:
            return
        try:
            waiting = await asyncio.to_thread(self.port.children, parent, ("inbox",))
        except CoordinationError:
            log.exception("listing the children of %s failed", parent)
            return
        for task in waiting:
            if task.references:
                self.schedule(task.task_id)

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
        if self.policy.child_acceptance == "on_consolidation":
            await self._release_dependents(
                facts.task.parent
            )  # reported = finished, for its siblings
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
            summary=await asyncio.to_thread(
                self.review_summary,
                info,
                d.ReportView(step.report_id, step.result, step.sender),
                body,
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

    def review_document(self, task: TaskInfo, head: d.ReportView, body: str) -> str:
        """What the human reviews: the work, not the prompt (blocking: run in a thread).

        :func:`~baton.coordination.review_summary.review_document` over the TASK, its
        report, each delegated child's result with an excerpt of its report, and the
        files the agents reported writing (kept per TASK in the store's records).
        """
        children = self.prompts.child_reports(task.task_id)
        ids = [task.task_id, *(c.task_id for c in children)]

        def files(tx: Tx) -> dict[str, tuple[str, ...]]:
            out = {}
            for task_id in ids:
                row = team_sql.TASKS.get(tx, task_id)
                if row is not None:
                    out[task_id] = TaskRecord.from_row(row).files_changed
            return out

        changed = self.store.read_tx(files)
        facts = ReviewFacts(
            task_id=task.task_id,
            subject=task.subject,
            role=head.sender,
            result=head.result,
            report_id=head.report_id,
            body=body,
            children=tuple(
                ChildSummary(
                    c.task_id,
                    c.role,
                    c.subject,
                    c.result,
                    c.report_id,
                    c.body if c.report_id else "",
                    changed.get(c.task_id, ()),
                )
                for c in children
            ),
            files_changed=changed.get(task.task_id, ()),
        )
        return review_document(facts)

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
            await self._release_dependents(facts.task.parent)
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
                await self._release_dependents(facts.task.parent)
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
            await self._release_dependents(facts.task.parent)

    async def _resolve(self, task_id: str) -> None:
        try:
            repair = await asyncio.to_thread(resolve_two_stages, self.port, task_id)
        except Unresolved as exc:
            await self._recovery_event(task_id, exc.rule, "needs_attention", exc.detail, None)
            await self._attention_locked(task_id, f"left in two FCoP stages: {exc.detail}")
            raise RecordMoved(task_id) from None
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
            except (RecordMoved, StaleRecord):
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
