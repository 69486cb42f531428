"""The durable human-request ledger: persist before expose, answer exactly once.

Every request an agent (or the team loop) makes of a human (a permission,
questions, a plan approval, a form, a review) is a row of the store's
``requests`` table (:mod:`baton.store.requests_sql`) before any surface can show
it, with the run/session/turn it belongs to, the agent connection (a per-process
UUID) and the originating JSON-RPC id. Rows move only through
:mod:`baton.requests.states`.

Each change is *prepared* here from the record as last read (a :class:`Change`:
the new records, the ``request.*`` payloads that describe them, and the write
that applies them only if the rows are still what was read), then committed in
one transaction with its events (:class:`~baton.store.journal.Journal`). An
answer is validated against the persisted document before the write and the
row is re-checked inside it, so a forged, stale or conflicting answer is refused
no matter which process sends it; a concurrent change makes the write raise
:class:`StaleRecord` and the method reads again and retries. Other parts (the
team loop) put a :class:`Change` into their own transaction, so a task's state
and the request for the human commit together.

Answers may come from another process (``baton answer`` while the daemon
waits). Each write names the request id as a wake-up topic, so every waiter,
in any process, is woken after commit (:mod:`baton.store.wake`) and re-reads the
row: no busy polling.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from baton.errors import RequestError
from baton.events.model import Payload
from baton.requests.errors import AnswerConflict, NotPending, UnknownRequest
from baton.requests.model import (
    Answer,
    DecidedBy,
    PermissionRequest,
    PlanRequest,
    RequestDocument,
    RequestKind,
    canonical_json,
    check_limits,
    headline,
)
from baton.requests.records import AnswerResult, JsonRpcId, RequestRecord, record_from_row
from baton.requests.states import Event, State, next_state
from baton.requests.validate import validate_answer
from baton.store import requests_sql as sql
from baton.store.journal import Journal
from baton.store.requests_sql import REQUESTS_MIGRATIONS
from baton.store.store import Store
from baton.store.tx import StoreConflict, Tx

__all__ = [
    "REQUESTS_MIGRATIONS",
    "AnswerResult",
    "Change",
    "Ledger",
    "RequestRecord",
    "StaleRecord",
    "rpc_key",
    "tool_call_id_of",
]

T = TypeVar("T")

_ATTEMPTS = 5
"""Re-reads after a concurrent change before giving up (each is a real race lost)."""


class StaleRecord(RequestError):
    """A prepared change found its row changed since it was read (read again and retry)."""


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


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_request_id() -> str:
    return f"req-{secrets.token_hex(8)}"


def _answer_json(answer: Answer) -> str:
    return canonical_json(answer.model_dump(mode="json"))


def _payloads(records: Sequence[RequestRecord]) -> tuple[Payload, ...]:
    from baton.requests import payloads  # payloads builds on these records

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


class Ledger:
    """Async API over the ``requests`` table; safe to use from several processes at once."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime] = _utc_now,
        recheck_interval: float = 5.0,
        new_id: Callable[[], str] = _new_request_id,
    ) -> None:
        self._store = store
        self._clock = clock
        self._recheck = recheck_interval
        self._new_id = new_id
        self._owned = False

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> Ledger:
        """A ledger over its own store at ``path`` (closed by :meth:`aclose`)."""
        ledger = cls(Store.open(path), **kwargs)
        ledger._owned = True
        return ledger

    @property
    def store(self) -> Store:
        return self._store

    async def aclose(self) -> None:
        """Close the store if this ledger opened it."""
        if self._owned:
            self._owned = False
            await self._store.aclose()

    # ------------------------------------------------------------------ plumbing

    def now(self) -> str:
        return (
            self._clock().astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )

    async def _read(self, fn: Callable[[Tx], T]) -> T:
        return await self._store.aread(fn)

    async def _commit(self, change: Change, journal: Journal | None) -> None:
        if journal is None:
            await self._store.write(change.apply)
        else:
            await journal.commit(change.payloads, change.apply)

    async def _retrying(
        self, prepare: Callable[[], Awaitable[Change]], journal: Journal | None
    ) -> tuple[RequestRecord, ...]:
        """Prepare from a fresh read, commit; on a concurrent change, read again."""
        for attempt in range(_ATTEMPTS):
            change = await prepare()
            if not change.records:
                return ()
            try:
                await self._commit(change, journal)
            except StaleRecord:
                if attempt + 1 == _ATTEMPTS:
                    raise
                continue
            return tuple(change.records)
        raise AssertionError("unreachable")  # pragma: no cover

    def moved(self, record: RequestRecord, event: Event, **columns: Any) -> RequestRecord:
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

    def prepare_create(
        self,
        document: RequestDocument,
        *,
        run_id: str,
        connection_id: str | None,
        jsonrpc_id: JsonRpcId,
        session_id: str | None,
        turn_id: str | None,
        supersedes: str | None = None,
        request_id: str | None = None,
        expires_at: str | None = None,
    ) -> Change:
        """A new ``pending`` request as a change (refuses an oversize document first).

        ``expires_at``: the deadline of whoever waits for it, when it has one (shown by
        surfaces as a countdown; the waiter itself expires it).
        """
        text = check_limits(document)
        data = text.encode("utf-8")
        now = self.now()
        record = RequestRecord(
            request_id=request_id or self._new_id(),
            kind=document.kind,
            state=State.PENDING,
            run_id=run_id,
            session_id=session_id,
            turn_id=turn_id,
            connection_id=connection_id,
            jsonrpc_id=jsonrpc_id,
            tool_call_id=tool_call_id_of(document),
            title=headline(document),
            document=document,
            document_json=text,
            document_bytes=len(data),
            document_sha256=hashlib.sha256(data).hexdigest(),
            revision=document.revision if isinstance(document, PlanRequest) else None,
            answer=None,
            answer_json=None,
            decided_by=None,
            rule=None,
            reason=None,
            supersedes=supersedes,
            created_at=now,
            updated_at=now,
            answered_at=None,
            delivered_at=None,
            expires_at=expires_at,
        )
        values = self._row_values(record)

        def apply(tx: Tx) -> None:
            if supersedes is not None and sql.fetch(tx, supersedes) is None:
                raise UnknownRequest(f"no request with id {supersedes!r}")
            try:
                sql.insert(tx, values)
            except StoreConflict as exc:
                raise RequestError(
                    f"duplicate request: connection {connection_id} already has an open request "
                    f"with JSON-RPC id {jsonrpc_id!r} (or id {record.request_id} exists): {exc}"
                ) from None
            tx.wake(record.request_id)

        return Change((record,), _payloads([record]), apply)

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

    async def create(
        self,
        document: RequestDocument,
        *,
        run_id: str,
        connection_id: str | None,
        jsonrpc_id: JsonRpcId,
        session_id: str | None,
        turn_id: str | None,
        supersedes: str | None = None,
        request_id: str | None = None,
        expires_at: str | None = None,
        journal: Journal | None = None,
    ) -> RequestRecord:
        """Persist a new ``pending`` request (and its ``request.created``); returns after commit.

        Raises :class:`~baton.requests.errors.PayloadTooLarge` (nothing written)
        for an oversize document, and ``RequestError`` for a second open request
        with the same JSON-RPC id on the same connection. Cursor questions and
        plans carry no session id: pass the connection's active session and turn,
        never a guess.
        """
        change = self.prepare_create(
            document,
            run_id=run_id,
            connection_id=connection_id,
            jsonrpc_id=jsonrpc_id,
            session_id=session_id,
            turn_id=turn_id,
            supersedes=supersedes,
            request_id=request_id,
            expires_at=expires_at,
        )
        await self._commit(change, journal)
        return change.records[0]

    async def record_rejected(
        self,
        kind: RequestKind,
        *,
        reason: str,
        run_id: str,
        connection_id: str | None,
        jsonrpc_id: JsonRpcId,
        session_id: str | None,
        turn_id: str | None,
        title: str,
        size_bytes: int,
        sha256: str,
        document: RequestDocument | None = None,
        journal: Journal | None = None,
    ) -> RequestRecord:
        """Record a request refused on arrival (oversize, malformed, late for its turn).

        The row is born ``rejected`` so the refusal is durable and visible in
        ``baton inbox --all``; the document is kept only if it is within limits
        (an oversize one is described by its size and digest, never truncated).
        """
        text = check_limits(document) if document is not None else None
        now = self.now()
        record = RequestRecord(
            request_id=self._new_id(),
            kind=kind,
            state=State.REJECTED,
            run_id=run_id,
            session_id=session_id,
            turn_id=turn_id,
            connection_id=connection_id,
            jsonrpc_id=jsonrpc_id,
            tool_call_id=tool_call_id_of(document) if document is not None else None,
            title=title,
            document=document if text is not None else None,
            document_json=text,
            document_bytes=size_bytes,
            document_sha256=sha256,
            revision=None,
            answer=None,
            answer_json=None,
            decided_by=None,
            rule=None,
            reason=reason,
            supersedes=None,
            created_at=now,
            updated_at=now,
            answered_at=None,
            delivered_at=None,
        )
        values = self._row_values(record)

        def apply(tx: Tx) -> None:
            sql.insert(tx, values)
            tx.wake(record.request_id)

        await self._commit(Change((record,), _payloads([record]), apply), journal)
        return record

    # -------------------------------------------------------------------- answer

    def prepare_answer(
        self,
        record: RequestRecord,
        answer: Answer,
        *,
        decided_by: DecidedBy,
        rule: str | None = None,
        reason: str | None = None,
    ) -> AnswerResult | Change:
        """The answer as a change, or the replayed result when the same answer is already there.

        Raises :class:`~baton.requests.errors.AnswerConflict` for a different
        answer, :class:`~baton.requests.errors.NotPending` when the request no
        longer takes answers, and the validation errors for an answer that does
        not fit the persisted document.
        """
        if decided_by != "human" and not rule:
            raise RequestError(f"a {decided_by} decision must name the rule that made it")
        request_id = record.request_id
        if record.document is None:
            raise NotPending(f"request {request_id} was rejected on arrival: {record.reason}")
        if record.state is not State.PENDING:
            if record.state in (State.ANSWERED, State.DELIVERED):
                try:
                    same = (
                        _answer_json(validate_answer(record.document, answer)) == record.answer_json
                    )
                except RequestError:
                    same = False
                if same:
                    return AnswerResult(record, replayed=True)
                raise AnswerConflict(
                    f"request {request_id} was already answered by {record.decided_by} "
                    f"({record.answer_json}); a different answer is refused"
                )
            why = f" ({record.reason})" if record.reason else ""
            raise NotPending(
                f"request {request_id} is {record.state.value}{why}; it no longer takes answers"
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
            reason=reason,
            answered_at=now,
        )
        return self.move_change([record], [after])

    async def answer(
        self,
        request_id: str,
        answer: Answer,
        *,
        decided_by: DecidedBy,
        rule: str | None = None,
        reason: str | None = None,
        journal: Journal | None = None,
    ) -> AnswerResult:
        """Record a decision, validated against the persisted document (and re-checked).

        Idempotent: the same (normalized) answer again returns the first result
        with ``replayed=True``; a different one raises
        :class:`~baton.requests.errors.AnswerConflict`; answering a cancelled,
        expired or rejected request raises :class:`~baton.requests.errors.NotPending`.
        Automatic decisions (``policy``, ``headless``) must name their ``rule``.
        """
        replay: list[AnswerResult] = []

        async def prepare() -> Change:
            record = await self.get(request_id)
            prepared = self.prepare_answer(
                record, answer, decided_by=decided_by, rule=rule, reason=reason
            )
            if isinstance(prepared, AnswerResult):
                replay.append(prepared)
                return Change((), (), lambda _tx: None)
            return prepared

        records = await self._retrying(prepare, journal)
        if replay:
            return replay[-1]
        return AnswerResult(records[0], replayed=False)

    # ------------------------------------------------------------ other moves

    async def _transition(
        self, request_id: str, event: Event, journal: Journal | None, **columns: Any
    ) -> RequestRecord:
        async def prepare() -> Change:
            record = await self.get(request_id)
            return self.move_change([record], [self.moved(record, event, **columns)])

        return (await self._retrying(prepare, journal))[0]

    async def mark_delivered(
        self, request_id: str, *, journal: Journal | None = None
    ) -> RequestRecord:
        """``answered → delivered``: call only after the response was written to the agent's pipe."""
        return await self._transition(request_id, Event.DELIVER, journal, delivered_at=self.now())

    async def cancel(
        self, request_id: str, reason: str, *, journal: Journal | None = None
    ) -> RequestRecord:
        return await self._transition(request_id, Event.CANCEL, journal, reason=reason)

    async def reject(
        self, request_id: str, reason: str, *, journal: Journal | None = None
    ) -> RequestRecord:
        return await self._transition(request_id, Event.REJECT, journal, reason=reason)

    async def expire(
        self, request_id: str, reason: str, *, journal: Journal | None = None
    ) -> RequestRecord:
        return await self._transition(request_id, Event.EXPIRE, journal, reason=reason)

    async def expire_if_pending(
        self, request_id: str, reason: str, *, journal: Journal | None = None
    ) -> RequestRecord:
        """Expire a request still pending (a wait timed out); otherwise return it unchanged.

        An answer that lands just before the timeout wins: the caller then sees
        ``answered`` and delivers it instead of telling the agent it expired.
        """
        kept: list[RequestRecord] = []

        async def prepare() -> Change:
            record = await self.get(request_id)
            if record.state is not State.PENDING:
                kept.append(record)
                return Change((), (), lambda _tx: None)
            return self.move_change([record], [self.moved(record, Event.EXPIRE, reason=reason)])

        records = await self._retrying(prepare, journal)
        return records[0] if records else kept[-1]

    async def _bulk(
        self,
        rows: Callable[[Tx], list[Any]],
        event: Event,
        reason: str,
        journal: Journal | None,
        keep: Callable[[RequestRecord], bool] = lambda _r: True,
    ) -> list[RequestRecord]:
        async def prepare() -> Change:
            found = [r for r in map(record_from_row, await self._read(rows)) if keep(r)]
            return self.move_change(found, [self.moved(r, event, reason=reason) for r in found])

        return list(await self._retrying(prepare, journal))

    async def cancel_for_turn(
        self, turn_id: str, reason: str, *, journal: Journal | None = None
    ) -> list[RequestRecord]:
        """Cancel every open request of a turn that ended; returns them (reply ``cancelled``)."""
        return await self._bulk(
            lambda tx: sql.open_for_turn(tx, turn_id), Event.CANCEL, reason, journal
        )

    async def expire_orphans(
        self,
        live_connection_ids: Collection[str],
        reason: str,
        *,
        run_ids: Collection[str] | None = None,
        journal: Journal | None = None,
    ) -> list[RequestRecord]:
        """After a restart: open requests whose agent connection is gone become ``expired``.

        Never left pending, never auto-approved. Requests with no connection
        (the team loop's reviews and questions) are not tied to an agent process
        and are left alone. When several baton processes share the database,
        pass ``run_ids`` to limit the sweep to runs this process owns.
        """
        live = frozenset(live_connection_ids)
        runs = frozenset(run_ids) if run_ids is not None else None
        return await self._bulk(
            sql.open_with_connection,
            Event.EXPIRE,
            reason,
            journal,
            keep=lambda r: r.connection_id not in live and (runs is None or r.run_id in runs),
        )

    # --------------------------------------------------------------------- reads

    async def get(self, request_id: str) -> RequestRecord:
        row = await self._read(lambda tx: sql.fetch(tx, request_id))
        if row is None:
            raise UnknownRequest(f"no request with id {request_id!r}")
        return record_from_row(row)

    async def resolve_id(self, prefix: str) -> str:
        """A full request id from a unique prefix (what a human types)."""
        ids = await self._read(lambda tx: sql.resolve_prefix(tx, prefix))
        if len(ids) == 1:
            return ids[0]
        if ids:
            raise UnknownRequest(f"request id prefix {prefix!r} is ambiguous")
        raise UnknownRequest(f"no request with id {prefix!r}")

    async def pending(
        self,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        turn_id: str | None = None,
        kinds: Collection[RequestKind] | None = None,
    ) -> list[RequestRecord]:
        """Requests waiting for a decision (state ``pending``), oldest first."""
        return [
            r
            for r in await self.list_requests(states=[State.PENDING], run_id=run_id, limit=None)
            if (session_id is None or r.session_id == session_id)
            and (turn_id is None or r.turn_id == turn_id)
            and (kinds is None or r.kind in kinds)
        ]

    async def list_requests(
        self,
        *,
        states: Collection[State] | None = None,
        run_id: str | None = None,
        limit: int | None = 200,
    ) -> list[RequestRecord]:
        """Requests in the given states (all when ``None``), oldest first; newest ``limit``."""
        wanted = [State(s).value for s in states] if states is not None else None
        rows = await self._read(
            lambda tx: sql.list_rows(tx, states=wanted, run_id=run_id, limit=limit)
        )
        return [record_from_row(r) for r in rows]

    async def find_open(self, jsonrpc_id: str) -> RequestRecord | None:
        """The open connection-less request keyed by ``jsonrpc_id`` (a review, a question)."""
        key = rpc_key(jsonrpc_id)
        assert key is not None
        row = await self._read(lambda tx: sql.find_open_by_rpc_id(tx, key))
        return record_from_row(row) if row is not None else None

    async def find_reissued(
        self, document: RequestDocument, *, session_id: str
    ) -> RequestRecord | None:
        """The ended request (expired/cancelled) that ``document`` re-issues after ``session/load``.

        Matched by session, kind and tool call id; the runner passes its id as
        ``supersedes`` to :meth:`create` so the two are linked, never merged.
        """
        tool_call_id = tool_call_id_of(document)
        if tool_call_id is None:
            return None
        row = await self._read(
            lambda tx: sql.find_reissued(
                tx, session_id=session_id, kind=document.kind, tool_call_id=tool_call_id
            )
        )
        return record_from_row(row) if row is not None else None

    # ---------------------------------------------------------------------- wait

    async def wait_answer(self, request_id: str, timeout: float | None) -> RequestRecord:
        """Wait until ``request_id`` leaves ``pending``; return the record.

        The state tells what happened: ``answered`` (deliver it, then
        :meth:`mark_delivered`), or ``cancelled``/``expired``/``rejected``. Raises
        ``TimeoutError`` after ``timeout`` seconds (``None`` waits forever); the
        caller then calls :meth:`expire_if_pending`. Woken by the store's doorbell
        when any process changes the row; re-checks the row every
        ``recheck_interval`` seconds only as a safety net for a lost ring.
        """
        loop = asyncio.get_running_loop()
        listener = await self._store.listener()
        event = listener.subscribe(request_id)
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                event.clear()
                record = await self.get(request_id)
                if record.state is not State.PENDING:
                    return record
                wait_for = self._recheck
                if deadline is not None:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise TimeoutError(f"no answer to request {request_id} within {timeout:g}s")
                    wait_for = min(wait_for, remaining)
                try:
                    await asyncio.wait_for(event.wait(), wait_for)
                except TimeoutError:
                    continue
        finally:
            listener.unsubscribe(request_id, event)
