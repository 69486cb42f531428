"""What the doorbell announces, handled one event at a time: a TASK arrived, or was refused.

An arrival gets its record (``seen``) and, unless it is addressed to the human, an
evaluation; a refusal becomes a stored row and its events (the doorbell already filed
the ISSUE and quarantined the file). A TASK in two FCoP stages is not refused: it is
repaired by rule (its evaluation does it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from baton.events.model import TeamRefusal
from baton.events.sequencer import utc_now
from baton.inbox.doorbell import DoorbellEvent, TaskArrived, TaskRefused, refusal_payload
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.tx import Tx
from baton.team.activity import Activity
from baton.team.book import TaskBook
from baton.team.records import RefusalRecord

__all__ = ["Arrivals"]

log = logging.getLogger("baton.team.arrivals")


@dataclass(kw_only=True, eq=False)
class Arrivals:
    events: asyncio.Queue[DoorbellEvent]
    book: TaskBook
    journal: Journal
    activity: Activity
    evaluate: Callable[[str], Awaitable[None]]
    schedule: Callable[[str], None]

    async def route(self) -> None:
        """Forever: the next doorbell event, handled while counted busy."""
        while True:
            event = await self.events.get()
            with self.activity.working():
                try:
                    await self.handle(event)
                except Exception:  # one event's failure never stops the router
                    log.exception("routing %r failed", event)

    async def handle(self, event: DoorbellEvent) -> None:
        if isinstance(event, TaskRefused):
            await self._refused(event)
            return
        assert isinstance(event, TaskArrived)
        facts = self.book.facts
        record = await asyncio.to_thread(facts.record, event.task_id)
        if record is None:
            info = await asyncio.to_thread(facts.task, event.task_id)
            if info is None:
                return
            await self.book.seen(info, event.role, for_human=event.for_human)
        if not event.for_human:
            await self.evaluate(event.task_id)

    async def _refused(self, event: TaskRefused) -> None:
        """Every refusal is a stored row and a ``team.refusal`` event (the doorbell filed the ISSUE)."""
        if event.reason == "state_ambiguous" and event.task_id:
            self.schedule(event.task_id)  # two stages: repaired by rule, not refused
            return
        refusal = RefusalRecord(
            name=event.name,
            reason=event.reason,
            message=event.message,
            at=utc_now(),
            task_id=event.task_id,
            recipient=event.recipient,
            issue_id=event.issue_id,
            quarantined_to=str(event.quarantined_to) if event.quarantined_to else None,
            in_place=event.quarantined_to is None and event.reason == "unknown_recipient",
        )
        payload = TeamRefusal(
            name=event.name,
            reason=event.reason,
            message=event.message,
            task_id=event.task_id,
            issue_id=event.issue_id,
            quarantined_to=refusal.quarantined_to,
        )

        def write(tx: Tx) -> None:
            team_sql.insert_refusal(tx, refusal.row())

        # team.refusal for the board, security.payload_rejected for the security surface.
        await self.journal.commit([payload, refusal_payload(event)], write)
