"""When a TASK cannot go on: ``needs_attention`` (or ``failed``), said to the human once.

A record move, an inbox request asking whether to retry, and an FCoP ISSUE, all
for one reason; the human's "retry" is the step back (the ``Retry`` step's
handler). No single TASK stops the loop: the others flow.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort
from baton.request_model.documents import (
    ElicitationRequest,
    ElicitationSchema,
    RequestDocument,
    StringField,
)
from baton.requests.ledger import Ledger, StaleRecord
from baton.requests.ledger_changes import Change
from baton.team.book import RecordMoved, TaskBook
from baton.team.records import TaskRecord
from baton.team.states import TaskState
from baton.team_config import TeamConfig

__all__ = [
    "MAX_REASON",
    "SYSTEM_SENDER",
    "Escalations",
    "ask_the_human",
    "loop_request",
    "retry_request",
]

log = logging.getLogger("baton.team.attention")


def loop_request(ledger: Ledger, document: RequestDocument, *, run_id: str, key: str) -> Change:
    """A request for the human that no agent's connection waits on (the team loop reads
    the answer); ``key`` makes asking twice one request (the ledger's ``jsonrpc_id``)."""
    return ledger.prepare_create(
        document, run_id=run_id, connection_id=None, jsonrpc_id=key, session_id=None, turn_id=None
    )


def ask_the_human(
    ledger: Ledger, *, run_id: str, key: str, message: str, title: str, field: StringField
) -> Change:
    """A one-field form for the human, asked by the team loop (:func:`loop_request`)."""
    document = ElicitationRequest(
        message=message, requested_schema=ElicitationSchema(title=title, fields=(field,))
    )
    return loop_request(ledger, document, run_id=run_id, key=key)


def retry_request(
    ledger: Ledger, *, run_id: str, key: str, record: TaskRecord, reason: str
) -> Change:
    """The human's "retry?" form for a TASK that needs attention (accept: baton retries it)."""
    return ask_the_human(
        ledger,
        run_id=run_id,
        key=key,
        message=(
            f"{record.task_id} ({record.role}: {record.subject}) needs attention: {reason}. "
            "Accept to have baton retry it; decline to leave it as it is."
        ),
        title="Retry?",
        field=StringField(name="note", title="A note for the log"),
    )


MAX_REASON = 2000
"""Characters of a reason kept in a record (it is a diagnosis, not the evidence)."""
SYSTEM_SENDER = "BATON"


@dataclass(kw_only=True, eq=False)
class Escalations:
    """Makes a human look at a TASK: ``needs_attention`` and FCoP ISSUEs."""

    book: TaskBook
    port: FcopPort
    team: TeamConfig
    run_id: str
    watch_request: Callable[[str, str], None]

    async def issue(self, task_id: str | None, message: str) -> str | None:
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

    async def escalate(self, task_id: str, reason: str, *, failed: bool = False) -> None:
        """``needs_attention`` (or ``failed``) from outside an evaluation of ``task_id``."""
        async with self.book.lock(task_id):
            await self.escalate_locked(task_id, reason, failed=failed)

    async def escalate_locked(self, task_id: str, reason: str, *, failed: bool = False) -> None:
        """``needs_attention`` (or ``failed``): record + inbox request + FCoP ISSUE, once."""
        book = self.book
        reason = reason if len(reason) <= MAX_REASON else reason[:MAX_REASON] + " [...]"
        issue: str | None = None
        for _ in range(3):
            record = await asyncio.to_thread(book.facts.record, task_id)
            if record is None:
                info = await asyncio.to_thread(book.facts.task, task_id)
                if info is None:
                    log.warning("%s needs attention but is gone: %s", task_id, reason)
                    return
                spec = self.team.role_for(info.recipient)
                record = await book.seen(info, spec.name if spec else info.recipient)
            if record.state in (TaskState.NEEDS_ATTENTION, TaskState.FAILED):
                return
            if issue is None:
                issue = await self.issue(
                    task_id, f"{task_id} ({record.role}) needs attention: {reason}"
                )
            change = retry_request(
                book.ledger,
                run_id=self.run_id,
                key=f"attention:{task_id}:{record.version}",
                record=record,
                reason=reason,
            )
            target = (
                TaskState.FAILED
                if failed and record.state is TaskState.TURN_FINISHED
                else TaskState.NEEDS_ATTENTION
            )
            try:
                await book.move(
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
