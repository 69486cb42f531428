"""A ledger row as a typed record (the document and the answer parsed back)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from baton.request_model.documents import (
    ANSWER_ADAPTER,
    DOCUMENT_ADAPTER,
    Answer,
    DecidedBy,
    RequestDocument,
    RequestKind,
)
from baton.request_model.errors import NotPending
from baton.requests.states import OPEN_STATES, State
from baton.store.tx import Row

__all__ = ["AnswerResult", "JsonRpcId", "RequestRecord", "record_from_row"]

JsonRpcId = str | int | None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One row of the ledger, with the document and answer parsed back."""

    request_id: str
    kind: RequestKind
    state: State
    run_id: str
    session_id: str | None
    turn_id: str | None
    connection_id: str | None
    jsonrpc_id: JsonRpcId
    tool_call_id: str | None
    title: str
    document: RequestDocument | None
    """``None`` only for a request rejected on arrival (oversize, malformed)."""
    document_json: str | None
    """The stored canonical JSON, byte-exact."""
    document_bytes: int
    document_sha256: str
    revision: str | None
    answer: Answer | None
    answer_json: str | None
    """The stored canonical JSON of the normalized answer."""
    decided_by: DecidedBy | None
    rule: str | None
    reason: str | None
    supersedes: str | None
    created_at: str
    updated_at: str
    answered_at: str | None
    delivered_at: str | None
    expires_at: str | None = None
    """When whoever waits gives up on it (UTC, RFC 3339); None: no deadline."""

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    def closed_to_answers(self) -> NotPending | None:
        """Why this request takes no answer at all: rejected on arrival, or ended (cancelled,
        expired, rejected) before one was given. None while it is pending, and once answered
        (then a second answer is a replay or a conflict, which only the ledger can tell)."""
        if self.document is None:
            return NotPending(
                f"request {self.request_id} was rejected on arrival ({self.reason}); "
                "nothing to answer"
            )
        if self.state in (State.PENDING, State.ANSWERED, State.DELIVERED):
            return None
        why = f" ({self.reason})" if self.reason else ""
        return NotPending(
            f"request {self.request_id} is {self.state.value}{why}; it no longer takes answers"
        )


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What :meth:`Ledger.answer` did: ``replayed`` means the same answer was already there."""

    record: RequestRecord
    replayed: bool


def record_from_row(row: Row) -> RequestRecord:
    """A record from a row in :data:`baton.store.requests_sql.COLUMNS` order."""
    (
        request_id, kind, state, run_id, session_id, turn_id, connection_id, jsonrpc_id,
        tool_call_id, title, document_json, document_bytes, document_sha256, revision,
        answer_json, decided_by, rule, reason, supersedes, created_at, updated_at,
        answered_at, delivered_at, expires_at,
    ) = row  # fmt: skip
    return RequestRecord(
        request_id=request_id,
        kind=kind,
        state=State(state),
        run_id=run_id,
        session_id=session_id,
        turn_id=turn_id,
        connection_id=connection_id,
        jsonrpc_id=json.loads(jsonrpc_id) if jsonrpc_id is not None else None,
        tool_call_id=tool_call_id,
        title=title,
        document=DOCUMENT_ADAPTER.validate_json(document_json) if document_json else None,
        document_json=document_json,
        document_bytes=document_bytes,
        document_sha256=document_sha256,
        revision=revision,
        answer=ANSWER_ADAPTER.validate_json(answer_json) if answer_json else None,
        answer_json=answer_json,
        decided_by=decided_by,
        rule=rule,
        reason=reason,
        supersedes=supersedes,
        created_at=created_at,
        updated_at=updated_at,
        answered_at=answered_at,
        delivered_at=delivered_at,
        expires_at=expires_at,
    )
