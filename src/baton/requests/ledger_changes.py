"""Ledger changes prepared from records: pure, so other parts can commit them in their own transaction.

A :class:`Change` is the new records, the ``request.*`` payloads that describe
them, and the write that applies them only if the rows are still what was read
(:class:`StaleRecord` otherwise). Nothing here reads or commits;
:class:`~baton.requests.ledger.Ledger` does, and the team loop puts a change
into its own transaction so a task's state and the request for the human commit
together.

Length: one pure function per request transition (create, answer, expire, cancel,
deliver, move), the table the ledger and the team loop both commit from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict, Unpack

from baton.errors import RequestError
from baton.events.model import Payload
from baton.events.sequencer import format_dt
from baton.request_model.documents import (
    Answer,
    DecidedBy,
    PermissionAnswer,
    PermissionRequest,
    PlanRequest,
    RequestDocument,
    RequestKind,
    canonical_json,
    check_limits,
    headline,
)
from baton.request_model.errors import AnswerConflict, UnknownRequest
from baton.requests import payloads
from baton.requests.grants import new_grant_id, scope_key
from baton.requests.records import AnswerResult, JsonRpcId, RequestRecord, record_from_row
from baton.requests.states import Event, State, next_state
from baton.requests.validate import validate_answer
from baton.store import grants_sql
from baton.store import requests_sql as sql
from baton.store.tx import SqlValue, StoreConflict, Tx

__all__ = [
    "AnswerProvenance",
    "Arrival",
    "Change",
    "GrantSpent",
    "LedgerChanges",
    "NewRequest",
    "RefusedRequest",
    "StaleRecord",
    "new_request_id",
    "rpc_key",
    "tool_call_id_of",
    "utc_clock",
]


class Arrival(TypedDict):
    """Where a request came from: its run, the agent connection and the JSON-RPC id it
    came in on, and the session and turn it belongs to (pass the connection's active
    session and turn for requests that carry none, never a guess)."""

    run_id: str
    connection_id: str | None
    jsonrpc_id: JsonRpcId
    session_id: str | None
    turn_id: str | None


class NewRequest(Arrival, total=False):
    """The keywords of a new ``pending`` request (:meth:`LedgerChanges.prepare_create`)."""

    supersedes: str | None
    request_id: str | None
    expires_at: str | None
    rule: str | None


class RefusedRequest(Arrival):
    """The keywords of a request refused on arrival (:meth:`LedgerChanges.prepare_rejected`):
    why, and the refused payload described by its size and digest (kept only within limits)."""

    reason: str
    title: str
    size_bytes: int
    sha256: str
    document: NotRequired[RequestDocument | None]


class AnswerProvenance(TypedDict):
    """The keywords of an answer besides the answer itself (:meth:`LedgerChanges.prepare_answer`):
    who decided, under which rule and why, who escalated it, the grant it comes from."""

    decided_by: DecidedBy
    rule: NotRequired[str | None]
    reason: NotRequired[str | None]
    escalated_by: NotRequired[str | None]
    grant_use: NotRequired[str | None]


class StaleRecord(RequestError):
    """A prepared change found its row changed since it was read (read again and retry)."""


class GrantSpent(RequestError):
    """The grant an automatic answer named was revoked, expired or used up meanwhile."""


@dataclass(frozen=True, slots=True)
class Change:
    """A ledger change ready to commit: records after it, their events, the write."""

    records: tuple[RequestRecord, ...]
    payloads: tuple[Payload, ...]
    apply: Callable[[Tx], None]


def tool_call_id_of(document: RequestDocument) -> str | None:
    """The agent's tool call a request belongs to, used to link re-issued requests."""
    if isinstance(document, PermissionRequest):
        return document.tool_call.tool_call_id
    return getattr(document, "tool_call_id", None)


def rpc_key(jsonrpc_id: JsonRpcId) -> str | None:
    """How a JSON-RPC id is stored (JSON text: ids may be strings or numbers)."""
    return json.dumps(jsonrpc_id) if jsonrpc_id is not None else None


def utc_clock() -> datetime:
    """The ledger's default clock."""
    return datetime.now(UTC)


def new_request_id() -> str:
    """A fresh request id (``req-`` and 16 hex digits)."""
    return f"req-{secrets.token_hex(8)}"


def _answer_json(answer: Answer) -> str:
    return canonical_json(answer.model_dump(mode="json"))


def _payloads(records: Sequence[RequestRecord]) -> tuple[Payload, ...]:
    return tuple(payloads.for_state(r) for r in records)


def _checked_move(tx: Tx, before: RequestRecord, after: RequestRecord) -> None:
    """Write ``after`` over ``before`` if the row is still exactly ``before``'s state."""
    columns = {
        "state": after.state.value,
        "updated_at": after.updated_at,
        "answer_json": after.answer_json,
        "decided_by": after.decided_by,
        "rule": after.rule,
        "reason": after.reason,
        "answered_at": after.answered_at,
        "delivered_at": after.delivered_at,
    }
    row = sql.fetch(tx, before.request_id)
    if row is None:
        raise UnknownRequest(f"no request with id {before.request_id!r}")
    current = record_from_row(row)
    if current.state is not before.state or current.updated_at != before.updated_at:
        raise StaleRecord(f"request {before.request_id} changed since it was read")
    sql.update(tx, before.request_id, before.state.value, columns)
    tx.wake(before.request_id)


class LedgerChanges:
    """The ledger's clock and ids, and every change it can prepare (see the module docstring)."""

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = utc_clock,
        new_id: Callable[[], str] = new_request_id,
    ) -> None:
        self._clock = clock
        self._new_id = new_id
        self._new_grant_id = new_grant_id

    @property
    def clock(self) -> Callable[[], datetime]:
        return self._clock

    def now(self, after: float = 0.0) -> str:
        """The ledger's clock as stored (UTC, milliseconds); ``after`` seconds ahead of now
        for a deadline (a request's ``expires_at``)."""
        return format_dt(self._clock() + timedelta(seconds=after))

    def moved(self, record: RequestRecord, event: Event, **columns: SqlValue) -> RequestRecord:
        """``record`` after ``event`` (pure; raises ``IllegalTransition`` when illegal)."""
        new = next_state(record.state, event)
        return dataclasses.replace(record, state=new, updated_at=self.now(), **columns)

    def move_change(
        self, before: Sequence[RequestRecord], after: Sequence[RequestRecord]
    ) -> Change:
        """A change moving each ``before`` record to its ``after`` (same order)."""
        pairs = list(zip(before, after, strict=True))

        def apply(tx: Tx) -> None:
            for old, new in pairs:
                _checked_move(tx, old, new)

        return Change(tuple(after), _payloads(after), apply)

    # -------------------------------------------------------------------- create

    def prepare_create(self, document: RequestDocument, **request: Unpack[NewRequest]) -> Change:
        """A new ``pending`` request as a change (refuses an oversize document first).

        ``expires_at``: the deadline of whoever waits for it, when it has one (shown by
        surfaces as a countdown; the waiter itself expires it). ``rule``: the policy rule
        that decided or escalated it, named in its ``request.created``.
        """
        text = check_limits(document)
        data = text.encode("utf-8")
        supersedes = request.get("supersedes")
        record = self._arrived(
            request,
            request_id=request.get("request_id"),
            kind=document.kind,
            state=State.PENDING,
            title=headline(document),
            document=document,
            document_json=text,
            document_bytes=len(data),
            document_sha256=hashlib.sha256(data).hexdigest(),
            revision=document.revision if isinstance(document, PlanRequest) else None,
            supersedes=supersedes,
            expires_at=request.get("expires_at"),
        )
        values = self._row_values(record)

        def apply(tx: Tx) -> None:
            if supersedes is not None and sql.fetch(tx, supersedes) is None:
                raise UnknownRequest(f"no request with id {supersedes!r}")
            try:
                sql.insert(tx, values)
            except StoreConflict as exc:
                raise RequestError(
                    f"duplicate request: connection {record.connection_id} already has an open "
                    f"request with JSON-RPC id {record.jsonrpc_id!r} (or id {record.request_id} "
                    f"exists): {exc}"
                ) from None
            tx.wake(record.request_id)

        return Change((record,), (payloads.created(record, rule=request.get("rule")),), apply)

    def _arrived(
        self,
        arrival: Arrival,
        *,
        request_id: str | None,
        kind: RequestKind,
        state: State,
        title: str,
        document: RequestDocument | None,
        document_json: str | None,
        document_bytes: int,
        document_sha256: str,
        revision: str | None = None,
        reason: str | None = None,
        supersedes: str | None = None,
        expires_at: str | None = None,
    ) -> RequestRecord:
        """A record born now from ``arrival`` (pending or rejected: never answered yet)."""
        now = self.now()
        return RequestRecord(
            request_id=request_id or self._new_id(),
            kind=kind,
            state=state,
            run_id=arrival["run_id"],
            session_id=arrival["session_id"],
            turn_id=arrival["turn_id"],
            connection_id=arrival["connection_id"],
            jsonrpc_id=arrival["jsonrpc_id"],
            tool_call_id=tool_call_id_of(document) if document is not None else None,
            title=title,
            document=document,
            document_json=document_json,
            document_bytes=document_bytes,
            document_sha256=document_sha256,
            revision=revision,
            answer=None,
            answer_json=None,
            decided_by=None,
            rule=None,
            reason=reason,
            supersedes=supersedes,
            created_at=now,
            updated_at=now,
            answered_at=None,
            delivered_at=None,
            expires_at=expires_at,
        )

    @staticmethod
    def _row_values(record: RequestRecord) -> dict[str, Any]:
        return {
            "request_id": record.request_id,
            "kind": record.kind,
            "state": record.state.value,
            "run_id": record.run_id,
            "session_id": record.session_id,
            "turn_id": record.turn_id,
            "connection_id": record.connection_id,
            "jsonrpc_id": rpc_key(record.jsonrpc_id),
            "tool_call_id": record.tool_call_id,
            "title": record.title,
            "document_json": record.document_json,
            "document_bytes": record.document_bytes,
            "document_sha256": record.document_sha256,
            "revision": record.revision,
            "reason": record.reason,
            "supersedes": record.supersedes,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "expires_at": record.expires_at,
        }

    def prepare_rejected(self, kind: RequestKind, **refusal: Unpack[RefusedRequest]) -> Change:
        """A request refused on arrival, born ``rejected``, as a change (see ``record_rejected``)."""
        document = refusal.get("document")
        text = check_limits(document) if document is not None else None
        record = self._arrived(
            refusal,
            request_id=None,
            kind=kind,
            state=State.REJECTED,
            title=refusal["title"],
            document=document if text is not None else None,
            document_json=text,
            document_bytes=refusal["size_bytes"],
            document_sha256=refusal["sha256"],
            reason=refusal["reason"],
        )
        values = self._row_values(record)

        def apply(tx: Tx) -> None:
            sql.insert(tx, values)
            tx.wake(record.request_id)

        return Change((record,), _payloads([record]), apply)

    def prepare_answer(
        self, record: RequestRecord, answer: Answer, **provenance: Unpack[AnswerProvenance]
    ) -> AnswerResult | Change:
        """The answer as a change, or the replayed result when the same answer is already there.

        An ``allow`` with a grant inserts the grant in the same transaction (its scope
        bound to this request's turn, task tree, role or run). ``grant_use`` names the
        grant an automatic answer comes from: its use is counted in the same
        transaction, which raises :class:`GrantSpent` if it no longer answers.

        Raises :class:`~baton.request_model.errors.AnswerConflict` for a different
        answer, :class:`~baton.request_model.errors.NotPending` when the request no
        longer takes answers, and the validation errors for an answer that does
        not fit the persisted document.
        """
        decided_by, rule = provenance["decided_by"], provenance.get("rule")
        if decided_by != "human" and not rule:
            raise RequestError(f"a {decided_by} decision must name the rule that made it")
        closed = record.closed_to_answers()
        if closed is not None:
            raise closed
        assert record.document is not None
        if record.state is not State.PENDING:
            try:
                same = _answer_json(validate_answer(record.document, answer)) == record.answer_json
            except RequestError:
                same = False
            if same:
                return AnswerResult(record, replayed=True)
            raise AnswerConflict(
                f"request {record.request_id} was already answered by {record.decided_by} "
                f"({record.answer_json}); a different answer is refused"
            )
        normalized = validate_answer(record.document, answer)
        now = self.now()
        after = self.moved(
            record,
            Event.ANSWER,
            answer=normalized,
            answer_json=_answer_json(normalized),
            decided_by=decided_by,
            rule=rule,
            reason=provenance.get("reason"),
            answered_at=now,
        )
        change = self.move_change([record], [after])
        extra = self._grant_writes(record, normalized, now, provenance.get("grant_use"))
        if extra is not None:
            move = change.apply

            def apply(tx: Tx) -> None:
                move(tx)
                extra(tx)

            change = dataclasses.replace(change, apply=apply)
        escalated_by = provenance.get("escalated_by")
        if escalated_by is None:
            return change
        return dataclasses.replace(
            change, payloads=(payloads.for_state(after, escalated_by=escalated_by),)
        )

    def _grant_writes(
        self, record: RequestRecord, answer: Answer, now: str, grant_use: str | None
    ) -> Callable[[Tx], None] | None:
        """The grant row an answer makes, or the use an automatic answer counts."""
        if grant_use is not None:

            def use(tx: Tx) -> None:
                if grants_sql.use(tx, grant_use, now) != 1:
                    raise GrantSpent(f"grant {grant_use} no longer answers")

            return use
        if not isinstance(answer, PermissionAnswer) or answer.grant is None:
            return None
        document = record.document
        assert isinstance(document, PermissionRequest)
        spec = answer.grant
        values = {
            "grant_id": self._new_grant_id(),
            "tool_kind": document.tool_call.kind or "other",
            "subject": spec.subject,
            "scope": spec.scope,
            "scope_key": scope_key(
                spec.scope, run_id=record.run_id, turn_id=record.turn_id, document=document
            ),
            "created_at": now,
            "expires_at": self.now(after=spec.for_seconds) if spec.for_seconds else None,
            "uses_left": spec.uses,
            "uses": 0,
            "request_id": record.request_id,
        }

        def insert(tx: Tx) -> None:
            grants_sql.insert(tx, values)

        return insert
