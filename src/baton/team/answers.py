"""Waiting for the human: every open request of the team (review, question, attention).

Any process may answer a request (the CLI, the dashboard); the ledger's wait wakes on
the store's doorbell, and the answer re-evaluates its TASK. At start every request
still open is watched again, and one answered while no loop ran is acted on at once.
Each new request is announced once through ``[notify]`` (:class:`~baton.requests.notify.Notifier`).

An agent's own request (a permission, a question, a form) that reaches its deadline
(``[team] answer_timeout``) is refused by its broker, so the turn goes on; the turn row
records why (:func:`deadline_note`), and the leader is told in its next prompt
(:func:`leader_notes`), never left to find the task silently "done".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from baton.requests.ledger import Ledger
from baton.requests.notify import Notifier
from baton.requests.states import State as RequestState
from baton.store import requests_sql, team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.records import QuestionRecord, TaskRecord
from baton.team.states import QuestionState

__all__ = ["AnswerWatch", "deadline_note", "leader_notes"]

_STATE = requests_sql.COLUMNS.index("state")


@dataclass(kw_only=True, eq=False)
class AnswerWatch:
    """One waiter per open request; the answer schedules its TASK."""

    store: Store
    ledger: Ledger
    live_states: tuple[str, ...]
    schedule: Callable[[str], None]
    notifier: Notifier | None = None
    waiting: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False)

    def watch(self, request_id: str, task_id: str) -> None:
        """A request for the human was made: announce it (once) and watch it."""
        if request_id and self.notifier is not None and request_id not in self.waiting:
            self.notifier.send_request(request_id, self.ledger)
        self._wait(request_id, task_id)

    def _wait(self, request_id: str, task_id: str) -> None:
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
                self._wait(request_id, task_id)
            elif state is RequestState.ANSWERED:
                self.schedule(task_id)


def deadline_note(refusals: Sequence[str]) -> str | None:
    """What a turn row's ``error`` says when requests of the turn got no answer in time."""
    return team_sql.DEADLINE_REFUSED + "; ".join(refusals) if refusals else None


def leader_notes(tx: Tx, leader: str) -> list[str]:
    """Refusals at a deadline since the leader's last turn began, one line each."""
    since = team_sql.last_turn_started(tx, leader)
    return [
        f"{task_id} ({role}): {str(error).removeprefix(team_sql.DEADLINE_REFUSED)}"
        for task_id, role, error in team_sql.deadline_refusals(tx, since)
    ]
