"""The durable human-request ledger: persist before expose, answer exactly once.

Every request an agent (or the team loop) makes of a human (a permission,
questions, a plan approval, a form, a review) is a row of the store's
``requests`` table (:mod:`baton.store.requests_sql`) before any surface can show
it, with the run/session/turn it belongs to, the agent connection (a per-process
UUID) and the originating JSON-RPC id. Rows move only through
:mod:`baton.requests.states`.

Each change is *prepared* from the record as last read
(:mod:`~baton.requests.ledger_changes`, pure; a :class:`Change`:
the new records, the ``request.*`` payloads that describe them, and the write
that applies them only if the rows are still what was read), then committed in
one transaction with its events (:class:`~baton.store.journal.Journal`). An
answer is validated against the persisted document before the write and the
row is re-checked inside it, so a forged, stale or conflicting answer is refused
no matter which process sends it; a concurrent change makes the write raise
:class:`StaleRecord` and the method reads again and retries. Other parts (the
team loop) put a :class:`Change` into their own transaction, so a task's state
and the request for the human commit together.

Answers may come from another process (``baton answer`` while the team loop
waits). Each write names the request id as a wake-up topic, so every waiter,
in any process, is woken after commit (:mod:`baton.store.wake`) and re-reads the
row: no busy polling. Reads are :mod:`~baton.requests.ledger_reads`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime
from pathlib import Path
from typing import Any, Unpack

from baton.request_model.documents import Answer, RequestDocument, RequestKind
from baton.requests.ledger_changes import (
    AnswerProvenance,
    Change,
    NewRequest,
    RefusedRequest,
    StaleRecord,
    new_request_id,
    rpc_key,
    tool_call_id_of,
    utc_clock,
)
from baton.requests.ledger_reads import LedgerReads
from baton.requests.records import AnswerResult, RequestRecord, record_from_row
from baton.requests.states import Event, State
from baton.store import requests_sql as sql
from baton.store.journal import Journal
from baton.store.requests_sql import REQUESTS_MIGRATIONS
from baton.store.sqlite import SqliteStore
from baton.store.store import Store
from baton.store.tx import Tx

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

_ATTEMPTS = 5
"""Re-reads after a concurrent change before giving up (each is a real race lost)."""


class Ledger(LedgerReads):
    """Async API over the ``requests`` table; safe to use from several processes at once."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime] = utc_clock,
        recheck_interval: float = 5.0,
        new_id: Callable[[], str] = new_request_id,
    ) -> None:
        super().__init__(clock=clock, new_id=new_id)
        self._store = store
        self._recheck = recheck_interval
        self._owned = False

    # Any: Ledger's own keyword arguments, passed through.
    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> Ledger:
        """A ledger over its own store at ``path`` (closed by :meth:`aclose`)."""
        ledger = cls(SqliteStore.open(path), **kwargs)
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

    # -------------------------------------------------------------------- create

    async def create(
        self,
        document: RequestDocument,
        *,
        journal: Journal | None = None,
        **request: Unpack[NewRequest],
    ) -> RequestRecord:
        """Persist a new ``pending`` request (and its ``request.created``); returns after commit.

        Raises :class:`~baton.request_model.errors.PayloadTooLarge` (nothing written)
        for an oversize document, and ``RequestError`` for a second open request
        with the same JSON-RPC id on the same connection. Cursor questions and
        plans carry no session id: pass the connection's active session and turn,
        never a guess.
        """
        return await self._commit_one(self.prepare_create(document, **request), journal)

    async def record_rejected(
        self,
        kind: RequestKind,
        *,
        journal: Journal | None = None,
        **refusal: Unpack[RefusedRequest],
    ) -> RequestRecord:
        """Record a request refused on arrival (oversize, malformed, late for its turn).

        The row is born ``rejected`` so the refusal is durable and visible in
        ``baton inbox --all``; the document is kept only if it is within limits
        (an oversize one is described by its size and digest, never truncated).
        """
        return await self._commit_one(self.prepare_rejected(kind, **refusal), journal)

    async def _commit_one(self, change: Change, journal: Journal | None) -> RequestRecord:
        await self._commit(change, journal)
        return change.records[0]

    # -------------------------------------------------------------------- answer

    async def answer(
        self,
        request_id: str,
        answer: Answer,
        *,
        journal: Journal | None = None,
        **provenance: Unpack[AnswerProvenance],
    ) -> AnswerResult:
        """Record a decision, validated against the persisted document (and re-checked).

        Idempotent: the same (normalized) answer again returns the first result
        with ``replayed=True``; a different one raises
        :class:`~baton.request_model.errors.AnswerConflict`; answering a cancelled,
        expired or rejected request raises :class:`~baton.request_model.errors.NotPending`.
        Automatic decisions (``policy``, ``headless``) must name their ``rule``; one that
        comes from a grant names it in ``grant_use`` too, and raises
        :class:`~baton.requests.ledger_changes.GrantSpent` when the grant no longer answers.
        """
        replay: list[AnswerResult] = []

        async def prepare() -> Change:
            record = await self.get(request_id)
            prepared = self.prepare_answer(record, answer, **provenance)
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
