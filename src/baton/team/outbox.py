"""What the role tools hand the team loop: ``team_outbox`` rows, drained as they land.

The role MCP tools (any process) insert outbox rows, and the insert rings the store's
doorbell (topic ``team``): :meth:`OutboxReader.listen` drains them at once. An
``ask_human`` becomes a ``team_questions`` row and an elicitation request in the
ledger, in the transaction that consumes the row; a human's cancel reaches the slot's
running turn, a human's drop abandons a task tree (:mod:`baton.team.drop`); a review
decision re-evaluates its TASK (the decision REVIEW is in FCoP).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from baton.events.sequencer import utc_now
from baton.fcop_errors import CoordinationError
from baton.request_model.documents import StringField
from baton.requests.ledger import Ledger
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.activity import Activity
from baton.team.answers import AnswerWatch
from baton.team.attention import ask_the_human
from baton.team.controls import CANCEL_TURN, DROP_TREE, cancel_ask
from baton.team.drop import TreeDropper
from baton.team.records import OutboxEntry, QuestionRecord
from baton.team.slots import Slots
from baton.team.states import QUESTION, QuestionEvent
from baton.team.turns import TurnRunner

__all__ = ["OutboxReader"]

log = logging.getLogger("baton.team.outbox")


@dataclass(kw_only=True, eq=False)
class OutboxReader:
    """Drains the outbox: questions, cancels, review decisions."""

    store: Store
    journal: Journal
    ledger: Ledger
    run_id: str
    slots: Slots
    turns: TurnRunner
    answers: AnswerWatch
    activity: Activity
    schedule: Callable[[str], None]
    dropper: TreeDropper
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def listen(self) -> None:
        """One store doorbell for the loop: outbox rows and answers from any process."""

        async def drain() -> None:
            with self.activity.working():
                await self.drain()

        listener = await self.store.listener()
        await listener.on_each_ring(team_sql.TEAM_TOPIC, drain)

    async def drain(self) -> int:
        """Act on every open row (one at a time); how many there were."""
        async with self._lock:
            rows = await self.store.aread(team_sql.open_outbox)
            for row in rows:
                entry = OutboxEntry.from_row(row)
                try:
                    await self._on_entry(entry)
                except Exception:  # one bad row never blocks the rest: consumed, logged
                    log.exception("outbox entry %s failed", entry.id)
                    with contextlib.suppress(Exception):
                        await self.store.write(_consumer(entry.id, utc_now()))
            return len(rows)

    async def _on_entry(self, entry: OutboxEntry) -> None:
        now = utc_now()
        if entry.kind == "ask_human":
            await self._ask_human(entry, now)
            return
        if entry.kind == DROP_TREE and entry.task_id:
            # consumed once done: a drop a crash cut short is done again (each part is
            # idempotent), never lost with its row
            try:
                report = await self.dropper.drop(entry.task_id, str(entry.data.get("reason", "")))
            except LookupError:
                log.warning("drop of %s (outbox %s): no such TASK", entry.task_id, entry.id)
            else:
                log.info("dropped the tree of %s: %s", report.root, ", ".join(report.dropped))
            await self.store.write(_consumer(entry.id, now))
            return
        await self.store.write(_consumer(entry.id, now))
        if entry.kind == CANCEL_TURN:
            await self._cancel_turn(entry)
        elif entry.task_id:
            self.schedule(entry.task_id)  # a review decision (its REVIEW is in FCoP)

    async def _ask_human(self, entry: OutboxEntry, now: str) -> None:
        ask_id = str(entry.data.get("request_id", ""))
        question_text = str(entry.data.get("question", ""))
        change = ask_the_human(
            self.ledger,
            run_id=self.run_id,
            key=f"ask:{ask_id}",
            message=f"{entry.role} asks: {question_text}",
            title="Answer",
            field=StringField(name="answer", title="Your answer"),
        )
        question = QuestionRecord(
            ask_id=ask_id,
            role=entry.role,
            question=question_text,
            state=QUESTION.next(None, QuestionEvent.ASK),
            asked_at=entry.created_at,
            updated_at=now,
            request_id=change.records[0].request_id,
            task_id=entry.task_id,
            attempt_id=entry.attempt_id,
            issue_id=entry.data.get("issue_id"),
        )
        known = await self.store.aread(lambda tx: team_sql.QUESTIONS.get(tx, ask_id))
        new = known is None and bool(ask_id)

        def write(tx: Tx) -> None:
            if team_sql.consume_outbox(tx, entry.id, now) != 1:
                raise CoordinationError(f"outbox entry {entry.id} was consumed already")
            if new:
                team_sql.QUESTIONS.insert(tx, question.row())
                change.apply(tx)

        await self.journal.commit(change.payloads if new else (), write)
        if new and entry.task_id:
            self.answers.watch(question.request_id or "", entry.task_id)

    async def _cancel_turn(self, entry: OutboxEntry) -> None:
        """The human's cancel (:mod:`baton.team.controls`): the slot's turn, if still it."""
        ask = cancel_ask(entry.slot, entry.data)
        slot = next((s for s in self.slots.all() if s.name == entry.slot), None)
        if ask is None or slot is None or not await self.turns.cancel(slot, ask):
            log.info("cancel of %s's turn (outbox %s): no such turn running", entry.slot, entry.id)


def _consumer(outbox_id: int, at: str) -> Callable[[Tx], int]:
    return lambda tx: team_sql.consume_outbox(tx, outbox_id, at)
