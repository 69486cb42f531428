"""Reading the ``requests`` table: by id or prefix, what is pending, what an agent re-issues.

Each read is one snapshot of the store (``Store.aread``), safe beside writers in
any process.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

from baton.request_model.documents import RequestDocument, RequestKind
from baton.request_model.errors import UnknownRequest
from baton.requests.ledger_changes import LedgerChanges, rpc_key, tool_call_id_of
from baton.requests.records import RequestRecord, record_from_row
from baton.requests.states import State
from baton.store import requests_sql as sql
from baton.store.store import Store
from baton.store.tx import Tx

__all__ = ["LedgerReads"]

T = TypeVar("T")


class LedgerReads(LedgerChanges):
    """The ledger's reads over its store (set by :class:`~baton.requests.ledger.Ledger`)."""

    _store: Store

    async def _read(self, fn: Callable[[Tx], T]) -> T:
        return await self._store.aread(fn)

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
