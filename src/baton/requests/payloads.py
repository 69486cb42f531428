"""Canonical ``request.*`` event payloads built from ledger records.

The ledger changes rows; the runner, which owns its run's event sequence, turns
each returned record into the matching payload with these functions and
appends it. Keeping the mapping here means every surface (team loop, CLI, web)
describes a request the same way, and the ``request.answered`` event always
carries ``decided_by`` and the policy ``rule``.
"""

from __future__ import annotations

from typing import Any

from baton.events.model import (
    Payload,
    RequestAnswered,
    RequestCancelled,
    RequestCreated,
    RequestDelivered,
    RequestExpired,
    RequestRejected,
    SecurityPayloadRejected,
)
from baton.request_model.documents import (
    ElicitationRequest,
    PermissionRequest,
    PlanRequest,
    QuestionRequest,
    ReviewRequest,
)
from baton.request_model.errors import PayloadTooLarge
from baton.requests.records import RequestRecord
from baton.requests.states import State

__all__ = ["created", "for_state", "oversize", "summary"]


# Any: JSON out (an event's payload).
def summary(record: RequestRecord) -> dict[str, Any]:
    """A small, bounded description for ``request.created`` (the document stays in the ledger)."""
    doc = record.document
    if isinstance(doc, PermissionRequest):
        return {
            "tool_call_id": doc.tool_call.tool_call_id,
            "tool_kind": doc.tool_call.kind,
            "options": [o.kind for o in doc.options],
            "document_bytes": record.document_bytes,
        }
    if isinstance(doc, QuestionRequest):
        return {"questions": len(doc.questions), "document_bytes": record.document_bytes}
    if isinstance(doc, PlanRequest):
        return {
            "revision": doc.revision,
            "todos": len(doc.todos),
            "phases": len(doc.phases),
            "is_project": doc.is_project,
            "document_bytes": record.document_bytes,
        }
    if isinstance(doc, ElicitationRequest):
        return {"fields": [f.name for f in doc.requested_schema.fields]}
    if isinstance(doc, ReviewRequest):
        return {"task_id": doc.task_id, "report_ref": doc.report_ref}
    return {"document_bytes": record.document_bytes, "document_sha256": record.document_sha256}


def created(record: RequestRecord, *, rule: str | None = None) -> RequestCreated:
    return RequestCreated(
        request_id=record.request_id,
        kind=record.kind,
        title=record.title,
        summary=summary(record),
        rule=rule,
    )


def for_state(record: RequestRecord, *, escalated_by: str | None = None) -> Payload:
    """The payload announcing the state ``record`` is now in.

    ``escalated_by``: the policy rule that sent it to a human (for a human's answer).
    """
    base = {"request_id": record.request_id, "kind": record.kind}
    reason = record.reason or ""
    if record.state is State.PENDING:
        return created(record)
    if record.state is State.ANSWERED:
        assert record.decided_by is not None
        return RequestAnswered(
            **base,
            decided_by=record.decided_by,
            answer=record.answer.model_dump(mode="json") if record.answer else None,
            rule=record.rule,
            escalated_by=escalated_by if record.decided_by == "human" else None,
        )
    if record.state is State.DELIVERED:
        return RequestDelivered(**base)
    if record.state is State.CANCELLED:
        return RequestCancelled(**base, reason=reason)
    if record.state is State.EXPIRED:
        return RequestExpired(**base, reason=reason)
    return RequestRejected(**base, reason=reason)


def oversize(error: PayloadTooLarge, *, subject: str) -> SecurityPayloadRejected:
    """The ``security.payload_rejected`` that accompanies an oversize request's rejection."""
    return SecurityPayloadRejected(
        control="requests.limits",
        subject=subject,
        reason=f"{error.what} is {error.size}, over the limit of {error.limit}; rejected, not truncated",
    )
