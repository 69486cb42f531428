"""The grants in the store: find the one that answers a request, list, revoke.

Reads and writes go through the store (its one writer); the rules are
:mod:`baton.requests.grants`. A grant's *use* is not written here: it is counted in
the transaction of the answer it gives (:meth:`baton.requests.ledger.Ledger.answer`
with ``grant_use``), so an answer by grant and its count commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from baton.errors import RequestError
from baton.events.sequencer import format_dt
from baton.request_model.errors import UnknownRequest
from baton.requests.grants import Grant, Subject, matches
from baton.requests.ledger_changes import utc_clock
from baton.store import grants_sql
from baton.store.store import Store
from baton.store.tx import Row, Tx

__all__ = ["GrantBook", "UnknownGrant", "grant_from_row"]


class UnknownGrant(UnknownRequest):
    """No grant has that id (or the prefix is ambiguous)."""


def grant_from_row(row: Row) -> Grant:
    values = dict(zip(grants_sql.COLUMNS, row, strict=True))
    return Grant(
        grant_id=str(values["grant_id"]),
        tool_kind=str(values["tool_kind"]),
        subject=str(values["subject"]),
        scope=values["scope"],
        scope_key=str(values["scope_key"]),
        created_at=str(values["created_at"]),
        expires_at=values["expires_at"],
        uses_left=values["uses_left"],
        uses=int(values["uses"]),
        request_id=str(values["request_id"]),
        revoked_at=values["revoked_at"],
        last_used_at=values["last_used_at"],
    )


class GrantBook:
    """The project's grants, over its store."""

    def __init__(self, store: Store, *, clock: Callable[[], datetime] = utc_clock) -> None:
        self._store = store
        self._clock = clock

    def now(self) -> str:
        return format_dt(self._clock())

    async def matching(
        self,
        subject: Subject,
        *,
        run_id: str,
        turn_id: str | None,
        task: str | None,
        role: str | None,
        skip: Sequence[str] = (),
    ) -> Grant | None:
        """The oldest live grant that covers ``subject`` here and now (None: none does)."""
        now = self.now()
        rows = await self._store.aread(lambda tx: grants_sql.live_for_kind(tx, subject.kind, now))
        for grant in map(grant_from_row, rows):
            if grant.grant_id in skip:
                continue
            if matches(
                grant, subject, now=now, run_id=run_id, turn_id=turn_id, task=task, role=role
            ):
                return grant
        return None

    async def list(self, *, limit: int = 500) -> list[Grant]:
        """The newest grants, newest first, in any state."""
        rows = await self._store.aread(lambda tx: grants_sql.list_rows(tx, limit=limit))
        return [grant_from_row(r) for r in rows]

    async def of_request(self, request_id: str) -> Grant | None:
        """The grant the answer to ``request_id`` made, if it made one."""
        row = await self._store.aread(lambda tx: grants_sql.of_request(tx, request_id))
        return grant_from_row(row) if row is not None else None

    async def get(self, grant_id: str) -> Grant:
        """A grant by id or unique prefix."""

        def read(tx: Tx) -> Row | None:
            ids = grants_sql.resolve_prefix(tx, grant_id)
            if len(ids) > 1:
                raise UnknownGrant(f"grant id prefix {grant_id!r} is ambiguous; give more of it")
            return grants_sql.fetch(tx, ids[0]) if ids else None

        row = await self._store.aread(read)
        if row is None:
            raise UnknownGrant(f"no grant with id {grant_id!r} (see `baton grants`)")
        return grant_from_row(row)

    async def revoke(self, grant_id: str) -> tuple[Grant, bool]:
        """Revoke a grant (by id or unique prefix); whether this call revoked it."""
        grant = await self.get(grant_id)
        now = self.now()

        def write(tx: Tx) -> int:
            return grants_sql.revoke(tx, grant.grant_id, now)

        changed = await self._store.write(write)
        if changed not in (0, 1):  # pragma: no cover - primary key
            raise RequestError(f"revoking {grant.grant_id} changed {changed} rows")
        return await self.get(grant.grant_id), changed == 1
