"""The durable human-request ledger: persist before expose, answer exactly once.

Every request an agent makes of a human (a permission, questions, a plan
approval, a form, a review) is a row in the ``requests`` table before any
surface can show it, with the run/session/turn it belongs to, the agent
connection (a per-process UUID) and the originating JSON-RPC id. Rows move
only through :mod:`baton.requests.states`; every move happens inside one write
transaction on the store's single writer, after the answer has been validated
*again* against the persisted document, so a forged, stale or conflicting
answer is refused no matter which process sends it.

Answers may come from another process (``baton answer`` while the daemon
waits). The daemon notices through :mod:`baton.requests.wake` (a FIFO
doorbell rung after commit) and re-reads the row: no busy polling.

The ledger does not append canonical events itself: the runner owns the
sequence of its run, so it appends ``request.*`` events from the records these
functions return (see :mod:`baton.requests.payloads`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from baton.errors import RequestError
from baton.requests.database import LedgerDatabase, SqliteDatabase
from baton.requests.errors import AnswerConflict, NotPending, UnknownRequest
from baton.requests.model import (
    ANSWER_ADAPTER,
    DOCUMENT_ADAPTER,
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
from baton.requests.states import OPEN_STATES, Event, State, next_state
from baton.requests.validate import validate_answer
from baton.requests.wake import WakeChannel, WakeListener, wake_dir_for
from baton.store.migrations import Migration

__all__ = [
    "REQUESTS_MIGRATIONS",
    "AnswerResult",
    "Ledger",
    "RequestRecord",
    "tool_call_id_of",
]

T = TypeVar("T")

_OPEN_SQL = "(" + ", ".join(sorted(f"'{s.value}'" for s in OPEN_STATES)) + ")"

REQUESTS_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "requests.0001_ledger",
        """
        CREATE TABLE requests (
            request_id      TEXT PRIMARY KEY,
            kind            TEXT NOT NULL CHECK (kind IN
                                ('permission', 'question', 'plan', 'elicitation', 'review')),
            state           TEXT NOT NULL CHECK (state IN
                                ('pending', 'answered', 'delivered', 'cancelled', 'expired', 'rejected')),
            run_id          TEXT NOT NULL,
            session_id      TEXT,
            turn_id         TEXT,
            connection_id   TEXT,
            jsonrpc_id      TEXT,
            tool_call_id    TEXT,
            title           TEXT NOT NULL,
            document_json   TEXT,
            document_bytes  INTEGER NOT NULL,
            document_sha256 TEXT NOT NULL,
            revision        TEXT,
            answer_json     TEXT,
            decided_by      TEXT CHECK (decided_by IN ('human', 'policy', 'headless')),
            rule            TEXT,
            reason          TEXT,
            supersedes      TEXT REFERENCES requests (request_id),
            created_at      TEXT NOT NULL,
            updated_at      TEXT NOT NULL,
            answered_at     TEXT,
            delivered_at    TEXT
        ) STRICT;
        CREATE INDEX requests_open ON requests (created_at)
            WHERE state IN ('pending', 'answered');
        CREATE INDEX requests_turn ON requests (turn_id)
            WHERE state IN ('pending', 'answered');
        CREATE INDEX requests_connection ON requests (connection_id)
            WHERE state IN ('pending', 'answered');
        CREATE INDEX requests_session_tool ON requests (session_id, kind, tool_call_id);
        CREATE UNIQUE INDEX requests_open_rpc ON requests (connection_id, jsonrpc_id)
            WHERE state IN ('pending', 'answered') AND jsonrpc_id IS NOT NULL;
        """,
    ),
)
"""Pass to ``Store.open(path, extra_migrations=REQUESTS_MIGRATIONS)``.

``jsonrpc_id`` is JSON text (ids may be strings or numbers); ``document_json`` is
the canonical JSON of the document, byte-exact; ``supersedes`` links a request
the agent re-issued after ``session/load`` to the one it replaces. The partial
unique index refuses a second open request with the same JSON-RPC id on the same
connection: a duplicate delivery never creates a second interaction.
"""

_COLUMNS = (
    "request_id, kind, state, run_id, session_id, turn_id, connection_id, jsonrpc_id, "
    "tool_call_id, title, document_json, document_bytes, document_sha256, revision, "
    "answer_json, decided_by, rule, reason, supersedes, created_at, updated_at, "
    "answered_at, delivered_at"
)

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

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What :meth:`Ledger.answer` did: ``replayed`` means the same answer was already there."""

    record: RequestRecord
    replayed: bool


def _record(row: Sequence[Any]) -> RequestRecord:
    (
        request_id, kind, state, run_id, session_id, turn_id, connection_id, jsonrpc_id,
        tool_call_id, title, document_json, document_bytes, document_sha256, revision,
        answer_json, decided_by, rule, reason, supersedes, created_at, updated_at,
        answered_at, delivered_at,
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
    )


def _fetch(conn: sqlite3.Connection, request_id: str) -> RequestRecord:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM requests WHERE request_id = ?",  # noqa: S608 - fixed columns
        (request_id,),
    ).fetchone()
    if row is None:
        raise UnknownRequest(f"no request with id {request_id!r}")
    return _record(row)


def tool_call_id_of(document: RequestDocument) -> str | None:
    """The agent's tool call a request belongs to, used to link re-issued requests."""
    if isinstance(document, PermissionRequest):
        return document.tool_call.tool_call_id
    return getattr(document, "tool_call_id", None)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_request_id() -> str:
    return f"req-{secrets.token_hex(8)}"


def _answer_json(answer: Answer) -> str:
    return canonical_json(answer.model_dump(mode="json"))


class Ledger:
    """Async API over the ``requests`` table; safe to use from several processes at once."""

    def __init__(
        self,
        db: LedgerDatabase,
        *,
        clock: Callable[[], datetime] = _utc_now,
        recheck_interval: float = 5.0,
        new_id: Callable[[], str] = _new_request_id,
    ) -> None:
        self._db = db
        self._clock = clock
        self._recheck = recheck_interval
        self._new_id = new_id
        self._channel = WakeChannel(wake_dir_for(db.path))
        self._listener: WakeListener | None = None
        self._owned: SqliteDatabase | None = None

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> Ledger:
        """A ledger over its own :class:`SqliteDatabase` (closed by :meth:`aclose`)."""
        db = SqliteDatabase.open(path, REQUESTS_MIGRATIONS)
        ledger = cls(db, **kwargs)
        ledger._owned = db
        return ledger

    async def aclose(self) -> None:
        """Stop listening for wake-ups; close the database if this ledger opened it."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._owned is not None:
            owned, self._owned = self._owned, None
            await asyncio.to_thread(owned.close)

    # ------------------------------------------------------------------ plumbing

    def _now(self) -> str:
        return (
            self._clock().astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.wrap_future(self._db.execute_write(fn))

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._db.read, fn)

    def _rang(self, request_ids: Iterable[str]) -> None:
        """After commit: wake local waiters, then ring other processes."""
        ids = list(request_ids)
        if not ids:
            return
        listener = self._listener
        if listener is not None:
            listener.wake(ids)
        self._channel.ring(ids, skip=listener.path if listener is not None else None)

    def _move(
        self,
        conn: sqlite3.Connection,
        record: RequestRecord,
        event: Event,
        **columns: Any,
    ) -> RequestRecord:
        new = next_state(record.state, event)
        columns = {"state": new.value, "updated_at": self._now(), **columns}
        assignments = ", ".join(f"{name} = ?" for name in columns)
        cur = conn.execute(
            f"UPDATE requests SET {assignments} WHERE request_id = ? AND state = ?",  # noqa: S608
            (*columns.values(), record.request_id, record.state.value),
        )
        if cur.rowcount != 1:  # pragma: no cover - we hold the write lock
            raise RequestError(f"request {record.request_id} changed under the writer")
        return _fetch(conn, record.request_id)

    # -------------------------------------------------------------------- create

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
    ) -> RequestRecord:
        """Persist a new ``pending`` request; returns only after the commit.

        Raises :class:`~baton.requests.errors.PayloadTooLarge` (nothing written)
        for an oversize document, and ``RequestError`` for a second open request
        with the same JSON-RPC id on the same connection. Cursor questions and
        plans carry no session id: pass the connection's active session and turn,
        never a guess.
        """
        text = check_limits(document)
        data = text.encode("utf-8")
        rid = request_id or self._new_id()
        now = self._now()
        values = (
            rid,
            document.kind,
            State.PENDING.value,
            run_id,
            session_id,
            turn_id,
            connection_id,
            json.dumps(jsonrpc_id) if jsonrpc_id is not None else None,
            tool_call_id_of(document),
            headline(document),
            text,
            len(data),
            hashlib.sha256(data).hexdigest(),
            document.revision if isinstance(document, PlanRequest) else None,
            supersedes,
            now,
            now,
        )

        def insert(conn: sqlite3.Connection) -> RequestRecord:
            if supersedes is not None:
                _fetch(conn, supersedes)
            try:
                conn.execute(
                    "INSERT INTO requests (request_id, kind, state, run_id, session_id, turn_id, "
                    "connection_id, jsonrpc_id, tool_call_id, title, document_json, document_bytes, "
                    "document_sha256, revision, supersedes, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
            except sqlite3.IntegrityError as exc:
                raise RequestError(
                    f"duplicate request: connection {connection_id} already has an open request "
                    f"with JSON-RPC id {jsonrpc_id!r} (or id {rid} exists): {exc}"
                ) from None
            return _fetch(conn, rid)

        record = await self._write(insert)
        self._rang([rid])
        return record

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
    ) -> RequestRecord:
        """Record a request refused on arrival (oversize, malformed, late for its turn).

        The row is born ``rejected`` so the refusal is durable and visible in
        ``baton inbox --all``; the document is kept only if it is within limits
        (an oversize one is described by its size and digest, never truncated).
        """
        text = check_limits(document) if document is not None else None
        rid = self._new_id()
        now = self._now()

        def insert(conn: sqlite3.Connection) -> RequestRecord:
            conn.execute(
                "INSERT INTO requests (request_id, kind, state, run_id, session_id, turn_id, "
                "connection_id, jsonrpc_id, tool_call_id, title, document_json, document_bytes, "
                "document_sha256, reason, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rid,
                    kind,
                    State.REJECTED.value,
                    run_id,
                    session_id,
                    turn_id,
                    connection_id,
                    json.dumps(jsonrpc_id) if jsonrpc_id is not None else None,
                    tool_call_id_of(document) if document is not None else None,
                    title,
                    text,
                    size_bytes,
                    sha256,
                    reason,
                    now,
                    now,
                ),
            )
            return _fetch(conn, rid)

        return await self._write(insert)

    # -------------------------------------------------------------------- answer

    async def answer(
        self,
        request_id: str,
        answer: Answer,
        *,
        decided_by: DecidedBy,
        rule: str | None = None,
        reason: str | None = None,
    ) -> AnswerResult:
        """Record a decision, validated against the persisted document in the same transaction.

        Idempotent: the same (normalized) answer again returns the first result
        with ``replayed=True``; a different one raises
        :class:`~baton.requests.errors.AnswerConflict`; answering a cancelled,
        expired or rejected request raises :class:`~baton.requests.errors.NotPending`.
        Automatic decisions (``policy``, ``headless``) must name their ``rule``.
        """
        if decided_by != "human" and not rule:
            raise RequestError(f"a {decided_by} decision must name the rule that made it")

        def apply(conn: sqlite3.Connection) -> AnswerResult:
            record = _fetch(conn, request_id)
            if record.document is None:
                raise NotPending(f"request {request_id} was rejected on arrival: {record.reason}")
            if record.state is not State.PENDING:
                if record.state in (State.ANSWERED, State.DELIVERED):
                    try:
                        same = (
                            _answer_json(validate_answer(record.document, answer))
                            == record.answer_json
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
            now = self._now()
            updated = self._move(
                conn,
                record,
                Event.ANSWER,
                answer_json=_answer_json(normalized),
                decided_by=decided_by,
                rule=rule,
                reason=reason,
                answered_at=now,
            )
            return AnswerResult(updated, replayed=False)

        result = await self._write(apply)
        if not result.replayed:
            self._rang([request_id])
        return result

    # ------------------------------------------------------------ other moves

    async def _transition(self, request_id: str, event: Event, **columns: Any) -> RequestRecord:
        def apply(conn: sqlite3.Connection) -> RequestRecord:
            return self._move(conn, _fetch(conn, request_id), event, **columns)

        record = await self._write(apply)
        self._rang([request_id])
        return record

    async def mark_delivered(self, request_id: str) -> RequestRecord:
        """``answered → delivered``: call only after the response was written to the agent's pipe."""
        return await self._transition(request_id, Event.DELIVER, delivered_at=self._now())

    async def cancel(self, request_id: str, reason: str) -> RequestRecord:
        return await self._transition(request_id, Event.CANCEL, reason=reason)

    async def reject(self, request_id: str, reason: str) -> RequestRecord:
        return await self._transition(request_id, Event.REJECT, reason=reason)

    async def expire(self, request_id: str, reason: str) -> RequestRecord:
        return await self._transition(request_id, Event.EXPIRE, reason=reason)

    async def expire_if_pending(self, request_id: str, reason: str) -> RequestRecord:
        """Expire a request still pending (a wait timed out); otherwise return it unchanged.

        An answer that lands just before the timeout wins: the caller then sees
        ``answered`` and delivers it instead of telling the agent it expired.
        """

        def apply(conn: sqlite3.Connection) -> RequestRecord:
            record = _fetch(conn, request_id)
            if record.state is not State.PENDING:
                return record
            return self._move(conn, record, Event.EXPIRE, reason=reason)

        record = await self._write(apply)
        self._rang([request_id])
        return record

    async def _bulk(
        self,
        where: str,
        params: Sequence[Any],
        event: Event,
        reason: str,
        keep: Callable[[RequestRecord], bool] = lambda _r: True,
    ) -> list[RequestRecord]:
        def apply(conn: sqlite3.Connection) -> list[RequestRecord]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM requests WHERE state IN {_OPEN_SQL} AND {where} "  # noqa: S608
                "ORDER BY created_at, rowid",
                tuple(params),
            ).fetchall()
            return [
                self._move(conn, r, event, reason=reason) for r in map(_record, rows) if keep(r)
            ]

        records = await self._write(apply)
        self._rang(r.request_id for r in records)
        return records

    async def cancel_for_turn(self, turn_id: str, reason: str) -> list[RequestRecord]:
        """Cancel every open request of a turn that ended; returns them (reply ``cancelled``)."""
        return await self._bulk("turn_id = ?", (turn_id,), Event.CANCEL, reason)

    async def expire_orphans(
        self,
        live_connection_ids: Collection[str],
        reason: str,
        *,
        run_ids: Collection[str] | None = None,
    ) -> list[RequestRecord]:
        """After a restart: open requests whose agent connection is gone become ``expired``.

        Never left pending, never auto-approved. Requests with no connection
        (FCoP reviews) are not tied to an agent process and are left alone. When
        several baton processes share the database, pass ``run_ids`` to limit
        the sweep to runs this process owns.
        """
        live = frozenset(live_connection_ids)
        runs = frozenset(run_ids) if run_ids is not None else None
        return await self._bulk(
            "connection_id IS NOT NULL",
            (),
            Event.EXPIRE,
            reason,
            keep=lambda r: r.connection_id not in live and (runs is None or r.run_id in runs),
        )

    # --------------------------------------------------------------------- reads

    async def get(self, request_id: str) -> RequestRecord:
        return await self._read(lambda conn: _fetch(conn, request_id))

    async def resolve_id(self, prefix: str) -> str:
        """A full request id from a unique prefix (what a human types)."""

        def find(conn: sqlite3.Connection) -> str:
            exact = conn.execute(
                "SELECT 1 FROM requests WHERE request_id = ?", (prefix,)
            ).fetchone()
            if exact:
                return prefix
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = conn.execute(
                "SELECT request_id FROM requests WHERE request_id LIKE ? ESCAPE '\\' LIMIT 2",
                (escaped + "%",),
            ).fetchall()
            if len(rows) == 1:
                return str(rows[0][0])
            if rows:
                raise UnknownRequest(f"request id prefix {prefix!r} is ambiguous")
            raise UnknownRequest(f"no request with id {prefix!r}")

        return await self._read(find)

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
        clauses: list[str] = []
        params: list[Any] = []
        if states is not None:
            clauses.append(f"state IN ({', '.join('?' for _ in states)})")
            params += [State(s).value for s in states]
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        tail = f"LIMIT {int(limit)}" if limit is not None else ""

        def query(conn: sqlite3.Connection) -> list[RequestRecord]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM requests {where} "  # noqa: S608
                f"ORDER BY created_at DESC, rowid DESC {tail}",
                params,
            ).fetchall()
            return [_record(r) for r in reversed(rows)]

        return await self._read(query)

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

        def query(conn: sqlite3.Connection) -> RequestRecord | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM requests WHERE session_id = ? AND kind = ? "  # noqa: S608
                "AND tool_call_id = ? AND state IN ('expired', 'cancelled') "
                "ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (session_id, document.kind, tool_call_id),
            ).fetchone()
            return _record(row) if row is not None else None

        return await self._read(query)

    # ---------------------------------------------------------------------- wait

    async def _ensure_listener(self) -> WakeListener:
        loop = asyncio.get_running_loop()
        if self._listener is not None and self._listener.loop is not loop:
            self._listener.close()
            self._listener = None
        if self._listener is None:
            self._listener = await self._channel.listen()
        return self._listener

    async def wait_answer(self, request_id: str, timeout: float | None) -> RequestRecord:
        """Wait until ``request_id`` leaves ``pending``; return the record.

        The state tells what happened: ``answered`` (deliver it, then
        :meth:`mark_delivered`), or ``cancelled``/``expired``/``rejected``. Raises
        ``TimeoutError`` after ``timeout`` seconds (``None`` waits forever); the
        caller then calls :meth:`expire_if_pending`. Woken by the FIFO doorbell
        when any process answers; re-checks the row every ``recheck_interval``
        seconds only as a safety net for a lost ring.
        """
        loop = asyncio.get_running_loop()
        listener = await self._ensure_listener()
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
