"""baton's records of the TASKs, moved only through the task table, committed with their events.

A record change is a walk through :data:`~baton.team.states.TASK`
(:meth:`TaskBook.walk`, one ``team.task.changed`` per move) committed in one
transaction guarded by the record's version, with any other write that belongs
to it (a ledger :class:`~baton.requests.ledger.Change`, a turn row). A version
that moved makes the write raise :class:`RecordMoved`; the caller gathers the
facts again. One book per team loop, shared by every step handler (they are
given it, they do not inherit it); it also holds the per-TASK locks, so two
evaluations of one TASK never interleave.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from baton.errors import ControlFlow
from baton.events.model import Payload, TeamTaskChanged
from baton.fcop_port.port import TaskInfo
from baton.requests.ledger import Change, Ledger
from baton.requests.records import record_from_row
from baton.requests.states import Event as RequestEvent
from baton.store import requests_sql, team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import StoreConflict, Tx
from baton.team.facts import FactSource
from baton.team.records import RecordChanges, TaskRecord
from baton.team.states import TASK, TaskEvent, TaskState

__all__ = ["RecordMoved", "TaskBook"]


class RecordMoved(ControlFlow):
    """The record moved under us: gather again."""


@dataclass(kw_only=True, eq=False)
class TaskBook:
    """Task records in the store: walks, commits, first sight, delivered requests."""

    store: Store
    journal: Journal
    ledger: Ledger
    facts: FactSource
    now: Callable[[], str]
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict, init=False)

    def lock(self, task_id: str) -> asyncio.Lock:
        """The TASK's lock: held by an evaluation, never while an agent works."""
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        return lock

    def walk(
        self, before: TaskRecord, target: TaskState, why: str | None, **changes: RecordChanges
    ) -> tuple[TaskRecord, list[Payload]]:
        """``before`` walked to ``target`` through legal moves, one event per move."""
        events = TASK.path(before.state, target)
        payloads: list[Payload] = []
        state: TaskState = before.state
        for event in events:
            new = TASK.next(state, event)
            attempt = changes.get("attempt_id", before.attempt_id)
            dispatch = changes.get("dispatches") if event is TaskEvent.DISPATCH else None
            payloads.append(
                TeamTaskChanged(
                    task_id=before.task_id,
                    role=before.role,
                    from_state=state.value,
                    to_state=new.value,
                    event=event.value,
                    attempt_id=attempt if isinstance(attempt, str) else None,
                    dispatch=dispatch if isinstance(dispatch, int) else None,
                    reason=why,
                )
            )
            state = new
        after = dataclasses.replace(
            before,
            state=target,
            updated_at=self.now(),
            version=before.version + 1,
            **changes,
        )
        return after, payloads

    async def commit(
        self,
        before: TaskRecord,
        after: TaskRecord,
        payloads: Sequence[Payload],
        also: Callable[[Tx], None] | None = None,
    ) -> TaskRecord:
        """``after`` in place of ``before`` (guarded by its version), with ``also``."""

        def write(tx: Tx) -> None:
            guard_update(tx, before, after)
            if also is not None:
                also(tx)

        await self.journal.commit(payloads, write)
        return after

    async def move(
        self,
        record: TaskRecord,
        target: TaskState,
        *,
        why: str | None = None,
        also: Callable[[Tx], None] | None = None,
        extra: Sequence[Payload] = (),
        **changes: RecordChanges,
    ) -> TaskRecord:
        """Walk ``record`` to ``target`` and commit it with its events (and ``also``)."""
        after, payloads = self.walk(record, target, why, **changes)
        return await self.commit(record, after, [*payloads, *extra], also)

    async def move_delivering(
        self,
        record: TaskRecord,
        target: TaskState,
        request_id: str | None,
        *,
        why: str,
        **changes: RecordChanges,
    ) -> TaskRecord:
        """:meth:`move`, and mark the answered request ``request_id`` delivered in the same
        transaction: its answer has reached the TASK."""
        change = await asyncio.to_thread(self.delivered, request_id)
        return await self.move(
            record,
            target,
            why=why,
            also=change.apply if change else None,
            extra=change.payloads if change else (),
            **changes,
        )

    async def seen(self, info: TaskInfo, role: str, *, for_human: bool = False) -> TaskRecord:
        """The record of a TASK baton meets for the first time (state ``seen``)."""
        now = self.now()
        record = TaskRecord(
            task_id=info.task_id,
            role=role,
            state=TaskState.SEEN,
            created_at=now,
            updated_at=now,
            for_human=for_human,
            sender=info.sender,
            recipient=info.recipient,
            subject=info.subject,
            parent=info.parent,
        )
        payload = TeamTaskChanged(
            task_id=info.task_id,
            role=role,
            from_state=None,
            to_state=TaskState.SEEN.value,
            event=TaskEvent.SEE.value,
        )

        def write(tx: Tx) -> None:
            team_sql.TASKS.insert(tx, record.row())

        try:
            await self.journal.commit([payload], write)
        except StoreConflict:
            existing = await asyncio.to_thread(self.facts.record, info.task_id)
            assert existing is not None
            return existing
        return record

    def delivered(self, request_id: str | None) -> Change | None:
        """The change marking an answered request delivered (the loop applied it).

        Blocking (a store read): call it in a worker thread."""
        if request_id is None:
            return None
        row = self.store.read_tx(lambda tx: requests_sql.fetch(tx, request_id))
        if row is None:
            return None
        before = record_from_row(row)
        if before.state.value != "answered":
            return None
        after = self.ledger.moved(before, RequestEvent.DELIVER, delivered_at=self.now())
        return self.ledger.move_change([before], [after])


def guard_update(tx: Tx, before: TaskRecord, after: TaskRecord) -> None:
    """Write ``after`` over ``before`` unless its version moved (then :class:`RecordMoved`)."""
    if (
        team_sql.TASKS.update(tx, before.task_id, after.row(), guard={"version": before.version})
        != 1
    ):
        raise RecordMoved(f"{before.task_id} changed since it was read")
