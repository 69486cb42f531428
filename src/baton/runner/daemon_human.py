"""The FCoP daemon's human side, through the durable-requests ledger.

A report waiting for the human's review and an agent's ``ask_human`` question
become ledger requests (persisted before anything shows them, answerable from
``baton answer`` or the dashboard, exactly once). They are not tied to an agent
process, so they survive daemon restarts: on start, open reviews and questions
of this project are picked up again. Each answer is handed back to the daemon,
which applies it through FCoP's lifecycle authority.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from baton.coordination.state import HumanQuestion, PendingReview
from baton.events.model import Payload, ProviderNotice
from baton.requests import payloads
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.model import (
    ElicitationAnswer,
    ElicitationRequest,
    ElicitationSchema,
    ReviewAnswer,
    ReviewRequest,
    StringField,
)
from baton.requests.states import State

log = logging.getLogger(__name__)

Emit = Callable[[Payload], Awaitable[None]]


class DaemonAnswers(Protocol):
    """What the sink needs from the daemon to apply an answer."""

    async def human_review(
        self,
        task_id: str,
        decision: Literal["approve", "reject"],
        reason: str = "",
        *,
        approver: str | None = None,
    ) -> Any: ...

    async def human_answer(self, request_id: str, answer: str) -> bool: ...


@dataclass
class LedgerHumanSink:
    """``HumanSink`` for the daemon: reviews and questions as durable requests."""

    ledger: Ledger
    run_id: str
    emit: Emit
    daemon: DaemonAnswers | None = None
    _waiters: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _questions: dict[str, str] = field(default_factory=dict)
    """ledger request id -> the daemon's ask_human request id."""

    async def review_requested(self, review: PendingReview) -> None:
        document = ReviewRequest(
            task_id=review.task_id,
            report_ref=review.report_id,
            summary=review.summary
            or f"{review.role}: {review.subject} — result {review.result}\n\n{review.body}",
            role=review.role,
        )
        await self._open(document, jsonrpc_id=f"review:{review.key}")

    async def question_asked(self, question: HumanQuestion) -> None:
        document = ElicitationRequest(
            message=f"{question.role} asks: {question.question}",
            requested_schema=ElicitationSchema(
                title="Answer",
                fields=(StringField(name="answer", title="Your answer"),),
            ),
        )
        record = await self._open(document, jsonrpc_id=f"ask:{question.request_id}")
        if record is not None:
            self._questions[record.request_id] = question.request_id

    async def task_for_human(self, task_id: str, subject: str, sender: str) -> None:
        await self.emit(
            ProviderNotice(
                category="task_for_human",
                severity="info",
                summary=f"{sender} sent a task to the human: {subject} ({task_id})",
            )
        )

    async def resume(self) -> None:
        """After a restart: wait again on this project's open reviews and questions,
        and apply the ones answered while no daemon was running."""
        records = await self.ledger.list_requests(
            states={State.PENDING, State.ANSWERED}, limit=None
        )
        for record in records:
            if record.kind not in ("review", "elicitation"):
                continue
            if record.connection_id is None and record.request_id not in self._waiters:
                if record.kind == "elicitation" and isinstance(record.jsonrpc_id, str):
                    self._questions[record.request_id] = record.jsonrpc_id.removeprefix("ask:")
                if record.state is State.ANSWERED:
                    await self._apply(record)  # before the daemon runs: no race with idling
                else:
                    self._watch(record)

    async def close(self) -> None:
        for task in self._waiters.values():
            task.cancel()
        for task in list(self._waiters.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._waiters.clear()

    # ------------------------------------------------------------------ internals

    async def _open(self, document: Any, *, jsonrpc_id: str) -> RequestRecord | None:
        for record in await self.ledger.pending(kinds=(document.kind,)):
            if record.jsonrpc_id == jsonrpc_id:
                return None  # already open (a restart re-announced it)
        record = await self.ledger.create(
            document,
            run_id=self.run_id,
            connection_id=None,
            jsonrpc_id=jsonrpc_id,
            session_id=None,
            turn_id=None,
        )
        await self.emit(payloads.created(record))
        self._watch(record)
        return record

    def _watch(self, record: RequestRecord) -> None:
        task = asyncio.create_task(self._wait(record), name=f"human-{record.request_id}")
        self._waiters[record.request_id] = task
        task.add_done_callback(lambda _t: self._waiters.pop(record.request_id, None))

    async def _wait(self, record: RequestRecord) -> None:
        answered = await self.ledger.wait_answer(record.request_id, None)
        await self._apply(answered)

    async def _apply(self, answered: RequestRecord) -> None:
        """Hand an answer to the daemon (FCoP's authority applies it), then deliver."""
        record = answered
        await self.emit(payloads.for_state(answered))
        if answered.state is not State.ANSWERED or self.daemon is None:
            return
        answer = answered.answer
        document = answered.document
        if isinstance(answer, ReviewAnswer) and isinstance(document, ReviewRequest):
            await self.daemon.human_review(
                document.task_id, answer.decision, answer.reason or "", approver=None
            )
        elif isinstance(answer, ElicitationAnswer):
            text = ""
            if answer.action == "accept" and answer.content:
                text = str(answer.content.get("answer", ""))
            else:
                text = f"(the human chose to {answer.action})"
            ask_id = self._questions.get(record.request_id)
            if ask_id is not None:
                await self.daemon.human_answer(ask_id, text)
        delivered = await self.ledger.mark_delivered(record.request_id)
        await self.emit(payloads.for_state(delivered))
