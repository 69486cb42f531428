"""Waiting for the human: every open request of the team (review, question, attention).

Any process may answer a request (the CLI, the dashboard); the ledger's wait wakes on
the store's doorbell, and the answer re-evaluates its TASK. At start every request
still open is watched again, and one answered while no loop ran is acted on at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from baton.requests.ledger import Ledger
from baton.requests.states import State as RequestState
from baton.store import requests_sql, team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.records import QuestionRecord, TaskRecord
from baton.team.states import QuestionState

__all__ = ["AnswerWatch"]

_STATE = requests_sql.COLUMNS.index("state")


class AnswerWatch:
    """One waiter per open request; the answer schedules its TASK."""

    def __init__(
        self,
        *,
        store: Store,
        ledger: Ledger,
        live_states: tuple[str, ...],
        schedule: Callable[[str], None],
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.live_states = live_states
        self.schedule = schedule
        self.waiting: dict[str, asyncio.Task[None]] = {}

    def watch(self, request_id: str, task_id: str) -> None:
        """Re-evaluate ``task_id`` when ``request_id`` leaves ``pending`` (any process answers)."""
        if not request_id or request_id in self.waiting:
            return

        async def wait() -> None:
            try:
                await self.ledger.wait_answer(request_id, None)
            finally:
                self.waiting.pop(request_id, None)
            self.schedule(task_id)

        self.waiting[request_id] = asyncio.get_running_loop().create_task(
            wait(), name=f"human-{request_id}"
        )

    async def watch_open(self) -> None:
        """At start: watch every open request of a live TASK; act on answered ones."""
        live_states = self.live_states

        def read(tx: Tx) -> list[tuple[str, str, RequestState | None]]:
            pairs: list[tuple[str, str]] = []
            for row in team_sql.tasks_in_states(tx, live_states):
                record = TaskRecord.from_row(row)
                for request_id in (record.review_request, record.attention_request):
                    if request_id:
                        pairs.append((request_id, record.task_id))
            for row in team_sql.questions_in_states(tx, (QuestionState.PENDING.value,)):
                question = QuestionRecord.from_row(row)
                if question.request_id and question.task_id:
                    pairs.append((question.request_id, question.task_id))
            out = []
            for request_id, task_id in pairs:
                request = requests_sql.fetch(tx, request_id)
                state = request[_STATE] if request is not None else None
                out.append((request_id, task_id, RequestState(state) if state else None))
            return out

        for request_id, task_id, state in await self.store.aread(read):
            if state is RequestState.PENDING:
                self.watch(request_id, task_id)
            elif state is RequestState.ANSWERED:
                self.schedule(task_id)
