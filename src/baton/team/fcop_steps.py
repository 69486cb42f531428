"""The FCoP steps of a TASK: claim, not-run, submit, review, decisions, settle, repair.

Each performs one :mod:`~baton.team.decide` step through the port (in a worker
thread) and walks baton's record with it; a request for the human (a review)
commits in the same transaction as the record's move.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from baton.events.model import TeamRecovery
from baton.fcop_errors import CoordinationError, LifecycleConflict
from baton.fcop_port.port import TaskInfo
from baton.fcop_port.recovery import Unresolved, resolve_two_stages, validate_workspace
from baton.requests.model import ReviewRequest
from baton.store import team_sql
from baton.store.tx import Tx
from baton.team import decide as d
from baton.team import steps
from baton.team.attention import SYSTEM_SENDER, TaskAttention
from baton.team.book import RecordMoved
from baton.team.prompts import Prompts
from baton.team.records import TaskRecord
from baton.team.states import TaskState
from baton.workflow.ordering import Unmet, not_run_report
from baton.workflow.review_summary import ChildSummary, ReviewFacts, review_document

__all__ = ["FcopSteps", "ReviewSummary"]

log = logging.getLogger("baton.team.executor")

ReviewSummary = Callable[[TaskInfo, d.ReportView, str], str]
"""``(task, report head, report body) -> text`` of the review document a human reads."""


class FcopSteps(TaskAttention):
    """The executor's FCoP steps (see the module docstring)."""

    policy: d.TeamRules
    prompts: Prompts
    schedule: Callable[[str], None]
    review_summary: ReviewSummary

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

    async def _not_run(self, facts: d.Facts, step: steps.NotRun) -> bool:
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

    async def _submit(self, facts: d.Facts, step: steps.Submit) -> bool:
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

    async def _open_review(self, facts: d.Facts, step: steps.OpenReview) -> None:
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

        :func:`~baton.workflow.review_summary.review_document` over the TASK, its
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

    async def _apply_human_review(self, facts: d.Facts, step: steps.ApplyHumanReview) -> bool:
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

    async def _apply_decision(self, facts: d.Facts, step: steps.ApplyDecision) -> bool:
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
