"""Abandoning a task tree (``baton task drop``): nothing runs on it again, nothing is lost.

FCoP has no edge that cancels a TASK in the inbox or at work, so the tree stays where
FCoP has it and baton stops working on it: every TASK of the tree is recorded
``dropped`` (final), its running turns are cancelled (as Ctrl-C does), its open human
requests are cancelled with the reason, an FCoP ISSUE says who dropped it and why,
and its branch's exact head (uncommitted work included) is saved under
``refs/baton/salvage/<task>`` before its worktree is removed
(``baton salvage restore`` brings it back as a branch).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from baton.requests.ledger import Ledger, StaleRecord
from baton.requests.records import RequestRecord, record_from_row
from baton.requests.states import Event as RequestEvent
from baton.requests.states import State as RequestState
from baton.store import requests_sql, team_sql
from baton.store.tx import Tx
from baton.team.attention import MAX_REASON, Escalations
from baton.team.book import RecordMoved, TaskBook
from baton.team.controls import CancelAsk
from baton.team.facts import tree_root
from baton.team.records import QuestionRecord, TaskRecord
from baton.team.slots import Slots
from baton.team.states import TASK, QuestionState, TaskEvent, TaskState
from baton.team.turns import TurnRunner
from baton.team.workspaces import Workspaces
from baton.worktrees.model import WorktreeRecord

__all__ = ["DropReport", "TreeDropper"]

log = logging.getLogger("baton.team.drop")

TURN_END_WAIT_S = 60.0
"""How long a drop waits for its tree's cancelled turns to end before saving the work."""


@dataclass(frozen=True, slots=True)
class DropReport:
    root: str
    dropped: tuple[str, ...]
    """The TASKs of the tree now ``dropped`` (settled ones are left as they are)."""
    cancelled_turns: int
    worktree: WorktreeRecord | None
    """The tree's worktree after the drop (``salvaged``: its head saved), if it had one."""


@dataclass(kw_only=True, eq=False)
class TreeDropper:
    book: TaskBook
    ledger: Ledger
    escalations: Escalations
    slots: Slots
    turns: TurnRunner
    workspaces: Workspaces
    human: str

    def _tree(self, task_id: str) -> tuple[str, list[TaskRecord]]:
        """The tree's root and every recorded TASK of it (blocking read)."""

        def read(tx: Tx) -> tuple[str, list[TaskRecord]]:
            row = team_sql.TASKS.get(tx, task_id)
            record = TaskRecord.from_row(row) if row is not None else None
            root = tree_root(tx, task_id, record)
            members = []
            for other in (TaskRecord.from_row(r) for r in team_sql.all_tasks(tx)):
                if other.task_id == root or tree_root(tx, other.task_id, other) == root:
                    members.append(other)
            return root, members

        return self.book.store.read_tx(read)

    async def drop(self, task_id: str, reason: str) -> DropReport:
        reason = (reason.strip() or f"dropped by {self.human}")[:MAX_REASON]
        root, members = await asyncio.to_thread(self._tree, task_id)
        if not members:
            raise LookupError(f"{task_id} is not a TASK baton has seen")
        ids = {m.task_id for m in members}
        cancelled = 0
        for slot in self.slots.all():
            if slot.record.task_id in ids:
                ask = CancelAsk(slot.name, slot.record.pointer_seq, "drop", reason)
                cancelled += await self.turns.cancel(slot, ask)
        await self.turns.wait_ended(ids, TURN_END_WAIT_S)
        dropped = []
        for member in members:
            if await self._drop_one(member.task_id, reason):
                dropped.append(member.task_id)
        if dropped:  # a second drop (e.g. a re-run after a crash) changed nothing to tell
            await self.escalations.issue(
                root,
                f"{self.human} dropped the task tree of {root} ({len(dropped)} TASKs): {reason}",
            )
        worktree = await self.workspaces.salvage(root, reason) if self.workspaces.enabled else None
        return DropReport(root, tuple(dropped), cancelled, worktree)

    async def _drop_one(self, task_id: str, reason: str) -> bool:
        """One TASK ``dropped`` with its open requests cancelled, in one transaction."""
        for _ in range(5):
            async with self.book.lock(task_id):
                record = await asyncio.to_thread(self.book.facts.record, task_id)
                if record is None or TaskEvent.DROP not in TASK.allowed(record.state):
                    return False
                requests = await asyncio.to_thread(self._open_requests, record)
                before = list(requests)
                after = [self.ledger.moved(r, RequestEvent.CANCEL, reason=reason) for r in before]
                change = self.ledger.move_change(before, after)
                try:
                    await self.book.move(
                        record,
                        TaskState.DROPPED,
                        why=reason,
                        reason=reason,
                        also=change.apply,
                        extra=change.payloads,
                    )
                except (RecordMoved, StaleRecord):
                    continue
                return True
        return False

    def _open_requests(self, record: TaskRecord) -> list[RequestRecord]:
        """Its review, attention and question requests still waiting for the human."""

        def read(tx: Tx) -> list[RequestRecord]:
            ids = [r for r in (record.review_request, record.attention_request) if r]
            for row in team_sql.questions_in_states(tx, (QuestionState.PENDING.value,)):
                question = QuestionRecord.from_row(row)
                if question.task_id == record.task_id and question.request_id:
                    ids.append(question.request_id)
            out = []
            for request_id in ids:
                found = requests_sql.fetch(tx, request_id)
                if found is None:
                    continue
                request = record_from_row(found)
                if request.state in (RequestState.PENDING, RequestState.ANSWERED):
                    out.append(request)
            return out

        return self.book.store.read_tx(read)
