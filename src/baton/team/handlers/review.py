"""The human's review of a TASK they filed: the document they read, opened as a request.

The request is committed with the record's move to ``in_review`` (one transaction),
then watched: whoever answers it (CLI, dashboard, another process) wakes the TASK.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from baton.coordination.fcop_port import FcopPort, TaskInfo
from baton.coordination.review_summary import ChildSummary, ReviewFacts, review_document
from baton.requests.ledger import Ledger
from baton.requests.model import ReviewRequest
from baton.store import team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team import steps
from baton.team.book import TaskBook
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts, ReportView
from baton.team.prompts import Prompts
from baton.team.records import TaskRecord
from baton.team.slots import Slot
from baton.team.states import TaskState

__all__ = ["OpenHumanReview", "ReviewDocuments", "ReviewSummary"]

ReviewSummary = Callable[[TaskInfo, ReportView, str], str]
"""``(task, report head, report body) -> text`` of the review document a human reads
(blocking reads: called in a worker thread)."""


@dataclass(frozen=True, slots=True)
class ReviewDocuments:
    """What the human reviews: the work, not the prompt.

    :func:`~baton.coordination.review_summary.review_document` over the TASK, its
    report, each delegated child's result with an excerpt of its report, and the
    files the agents reported writing (kept per TASK in the store's records).
    """

    prompts: Prompts
    store: Store

    def __call__(self, task: TaskInfo, head: ReportView, body: str) -> str:
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


@dataclass(frozen=True, slots=True)
class OpenHumanReview:
    port: FcopPort
    book: TaskBook
    ledger: Ledger
    run_id: str
    human: str
    summary: ReviewSummary
    watch_request: Callable[[str, str], None]

    async def __call__(self, step: steps.OpenReview, facts: Facts, slot: Slot | None) -> Outcome:
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
                self.summary, info, ReportView(step.report_id, step.result, step.sender), body
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
        await self.book.move(
            record,
            TaskState.IN_REVIEW,
            why=f"waiting for {self.human}'s review",
            also=change.apply,
            extra=change.payloads,
            review_request=request_id,
            report_ref=step.report_id,
            result=step.result,
        )
        self.watch_request(request_id, info.task_id)
        return Then.STOP
