"""The loop's human and tool side: the outbox, questions, and waiting for answers.

What the role MCP tools hand the daemon arrives as ``team_outbox`` rows, and the
insert rings the store's doorbell (topic ``team``): :meth:`HumanSide._waker`
drains them at once. An ``ask_human`` becomes a ``team_questions`` row and an
elicitation request in the ledger, in the transaction that consumes the row; a
review decision re-evaluates its TASK (the decision REVIEW is in FCoP). Every
open human request (review, question, attention) is waited for through the
ledger, which any process may answer; the answer re-evaluates its TASK.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from baton.fcop_errors import CoordinationError
from baton.requests.ledger import Ledger
from baton.requests.model import ElicitationRequest, ElicitationSchema, StringField
from baton.store import requests_sql, team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.controls import CANCEL_TURN, cancel_ask
from baton.team.executor import Executor
from baton.team.records import OutboxEntry, QuestionRecord, TaskRecord
from baton.team.slots import Slots
from baton.team.startup import LIVE_STATES, utc_now

__all__ = ["HumanSide"]

log = logging.getLogger("baton.team.human")


class HumanSide:
    """Outbox and human requests (mixed into :class:`~baton.team.loop.TeamLoop`)."""

    store: Store
    journal: Journal
    ledger: Ledger
    run_id: str
    slots: Slots
    executor: Executor
    _busy: int
    _outbox_lock: asyncio.Lock
    _waiting: dict[str, asyncio.Task[None]]

    def schedule(self, task_id: str) -> None:
        raise NotImplementedError

    def _kick(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------- outbox

    async def _waker(self) -> None:
        """One store doorbell for the loop: outbox rows and answers from any process."""
        listener = await self.store.listener()
        event = listener.subscribe(team_sql.TEAM_TOPIC)
        try:
            while True:
                await event.wait()
                event.clear()
                self._busy += 1
                try:
                    await self._drain_outbox()
                finally:
                    self._busy -= 1
                    self._kick()
        finally:
            listener.unsubscribe(team_sql.TEAM_TOPIC, event)

    async def _drain_outbox(self) -> int:
        async with self._outbox_lock:
            rows = await self.store.aread(team_sql.open_outbox)
            for row in rows:
                entry = OutboxEntry.from_row(row)
                try:
                    await self._on_outbox(entry)
                except Exception:
                    log.exception("outbox entry %s failed", entry.id)
                    with contextlib.suppress(Exception):
                        await self.store.write(_consumer(entry.id, utc_now()))
            return len(rows)

    async def _on_outbox(self, entry: OutboxEntry) -> None:
        now = utc_now()
        if entry.kind == "ask_human":
            await self._ask_human(entry, now)
            return
        if entry.kind == CANCEL_TURN:
            await self.store.write(lambda tx: team_sql.consume_outbox(tx, entry.id, now))
            await self._cancel_turn(entry)
            return
        await self.store.write(lambda tx: team_sql.consume_outbox(tx, entry.id, now))
        if entry.task_id:
            self.schedule(entry.task_id)  # a review decision (its REVIEW is in FCoP)

    async def _ask_human(self, entry: OutboxEntry, now: str) -> None:
        ask_id = str(entry.data.get("request_id", ""))
        question_text = str(entry.data.get("question", ""))
        document = ElicitationRequest(
            message=f"{entry.role} asks: {question_text}",
            requested_schema=ElicitationSchema(
                title="Answer",
                fields=(StringField(name="answer", title="Your answer"),),
            ),
        )
        change = self.ledger.prepare_create(
            document,
            run_id=self.run_id,
            connection_id=None,
            jsonrpc_id=f"ask:{ask_id}",
            session_id=None,
            turn_id=None,
        )
        question = QuestionRecord(
            ask_id=ask_id,
            role=entry.role,
            question=question_text,
            state="pending",
            asked_at=entry.created_at,
            updated_at=now,
            request_id=change.records[0].request_id,
            task_id=entry.task_id,
            attempt_id=entry.attempt_id,
            issue_id=entry.data.get("issue_id"),
        )
        known = await self.store.aread(lambda tx: team_sql.QUESTIONS.get(tx, ask_id))

        def write(tx: Tx) -> None:
            if team_sql.consume_outbox(tx, entry.id, now) != 1:
                raise CoordinationError(f"outbox entry {entry.id} was consumed already")
            if known is None and ask_id:
                team_sql.QUESTIONS.insert(tx, question.row())
                change.apply(tx)

        await self.journal.commit(change.payloads if known is None and ask_id else (), write)
        if known is None and ask_id and entry.task_id:
            self._watch_request(question.request_id or "", entry.task_id)

    async def _cancel_turn(self, entry: OutboxEntry) -> None:
        """The human's cancel (:mod:`baton.team.controls`): the slot's turn, if still it."""
        ask = cancel_ask(entry.slot, entry.data)
        slot = next((s for s in self.slots.all() if s.name == entry.slot), None)
        if ask is None or slot is None or not await self.executor.cancel_turn(slot, ask):
            log.info("cancel of %s's turn (outbox %s): no such turn running", entry.slot, entry.id)

    # --------------------------------------------------------- human requests

    def _watch_request(self, request_id: str, task_id: str) -> None:
        """Re-evaluate ``task_id`` when ``request_id`` leaves ``pending`` (any process answers)."""
        if not request_id or request_id in self._waiting:
            return

        async def wait() -> None:
            try:
                await self.ledger.wait_answer(request_id, None)
            finally:
                self._waiting.pop(request_id, None)
            self.schedule(task_id)

        self._waiting[request_id] = asyncio.get_running_loop().create_task(
            wait(), name=f"human-{request_id}"
        )

    async def _watch_open_requests(self) -> None:
        def read(tx: Tx) -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []
            for row in team_sql.tasks_in_states(tx, LIVE_STATES):
                record = TaskRecord.from_row(row)
                for request_id in (record.review_request, record.attention_request):
                    if request_id:
                        out.append((request_id, record.task_id))
            for row in team_sql.questions_in_states(tx, ("pending",)):
                question = QuestionRecord.from_row(row)
                if question.request_id and question.task_id:
                    out.append((question.request_id, question.task_id))
            return out

        for request_id, task_id in await self.store.aread(read):
            state = await self.store.aread(_request_row(request_id))
            if state is not None and state[2] == "pending":
                self._watch_request(request_id, task_id)
            elif state is not None and state[2] == "answered":
                self.schedule(task_id)


def _consumer(outbox_id: int, at: str) -> Callable[[Tx], int]:
    return lambda tx: team_sql.consume_outbox(tx, outbox_id, at)


def _request_row(request_id: str) -> Callable[[Tx], tuple[Any, ...] | None]:
    return lambda tx: requests_sql.fetch(tx, request_id)
