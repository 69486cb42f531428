"""A turn: one prompt to one slot, as three commits (dispatched, running, finished).

``dispatched`` is committed with the slot's new pointer before the prompt is sent;
``running`` once the session is up and the prompt handed over; ``finished`` with the
outcome (or ``interrupted`` when the team loop stops first). The TASK's lock is not
held while the agent works; the turn is marked live in this loop instead, so an
evaluation meanwhile waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.events.model import Payload
from baton.store import team_sql
from baton.store.tx import Tx
from baton.team import steps
from baton.team.answers import deadline_note, leader_notes
from baton.team.book import RecordMoved, TaskBook, guard_update
from baton.team.contract import BudgetedSession, ScopedSession, TurnResult
from baton.team.controls import CancelAsk
from baton.team.next_step import Facts
from baton.team.prompts import Prompts
from baton.team.reconcile import prompt_digest
from baton.team.records import RecordChanges, TaskRecord, TurnRecord
from baton.team.slots import Slot, Slots, merge_files
from baton.team.states import (
    DISPATCH,
    QUESTION,
    DispatchEvent,
    DispatchState,
    QuestionEvent,
    SlotEvent,
    TaskState,
)
from baton.team.workspaces import Workspaces
from baton.team_config import TeamConfig

__all__ = ["RoleTurn", "TurnRunner"]

log = logging.getLogger("baton.team.turns")


@dataclass(slots=True)
class RoleTurn:
    """A dispatched turn on its way: its row, the record, the slot, the prompt."""

    record: TurnRecord
    task: TaskRecord
    slot: Slot
    prompt: str
    tree_root: str | None = None
    """The tree whose branch the turn works on (None: the project's own checkout)."""
    cwd: Path | None = None
    """Where the agent works: that tree's worktree (None: the project)."""
    budget_tree: str | None = None
    """The task tree the turn's spend is charged to (isolated or not)."""


@dataclass(kw_only=True, eq=False)
class TurnRunner:
    """Dispatches and runs turns: the part of the team loop that talks to sessions."""

    book: TaskBook
    slots: Slots
    prompts: Prompts
    team: TeamConfig
    run_id: str
    workspaces: Workspaces
    live: set[tuple[str, int]] = field(default_factory=set, init=False)
    """(task, dispatch) of the turns running in this team loop right now."""
    _ended: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)
    dispatch_log: list[tuple[str, str, str]] = field(default_factory=list, init=False)
    """(slot, turn kind, task id) in dispatch order; tests and traces read it."""
    prompt_started: Callable[[str, str, float], None] | None = field(default=None, init=False)
    """Told ``(slot, task, monotonic time)`` as each prompt is handed over (benches)."""

    async def begin(self, facts: Facts, kind: steps.JobKind, slot: Slot) -> RoleTurn:
        """Commit ``dispatched``: the turn row, the record, the slot's pointer."""
        record = facts.known_record
        prompt, anchor, anchor_attempt = await asyncio.to_thread(
            self.prompts.build, kind, facts, slot, record
        )
        if slot.spec.name == self.team.leader:
            prompt = await self._with_leader_notes(prompt)
        dispatch = record.dispatches + 1
        turn = TurnRecord(
            task_id=record.task_id,
            dispatch=dispatch,
            slot=slot.name,
            role=slot.spec.name,
            kind=kind,
            state=DISPATCH.next(None, DispatchEvent.DISPATCH),
            started_at=self.book.now(),
            attempt_id=facts.task.attempt_id,
            anchor=anchor,
            run_id=self.run_id,
            prompt_sha256=prompt_digest(prompt),
        )
        question = facts.question if kind == "answer" else None
        changes: dict[str, RecordChanges] = {"dispatches": dispatch}
        worktree = facts.worktree
        if worktree is not None and facts.tree_root is not None:
            changes["workspace"] = facts.tree_root  # the tree it works in, for good
        if kind != "review":
            changes.update(
                job=kind,
                turns=record.turns + 1,
                reminders=record.reminders + (kind == "remind"),
                resumes=record.resumes + (kind in ("resume", "retry")),
            )
            after, payloads = self.book.walk(
                record, TaskState.DISPATCHED, f"{kind} turn on {slot.name}", **changes
            )
        else:
            after = dataclasses.replace(
                record, updated_at=self.book.now(), version=record.version + 1, **changes
            )
            payloads = []
        deliver = None
        if question is not None and question.request_id is not None:
            deliver = await asyncio.to_thread(self.book.delivered, question.request_id)

        def pointer_and_turn(tx: Tx) -> None:
            team_sql.TURNS.insert(tx, turn.row())
            if question is not None:
                team_sql.QUESTIONS.update(
                    tx,
                    question.ask_id,
                    {
                        "state": QUESTION.next(question.state, QuestionEvent.DELIVER).value,
                        "answer": question.answer,
                        "updated_at": self.book.now(),
                    },
                )
            if deliver is not None:
                deliver.apply(tx)

        def write(tx: Tx) -> None:
            guard_update(tx, record, after)
            pointer_and_turn(tx)

        await self.slots.commit(
            slot,
            None,
            extra=[*payloads, *(deliver.payloads if deliver else ())],
            also=write,
            task_id=anchor,
            attempt_id=anchor_attempt,
            pointer_seq=slot.record.pointer_seq + 1,
            tasks_handled=slot.record.tasks_handled + 1,
        )
        self.live.add((turn.task_id, turn.dispatch))
        self.dispatch_log.append((slot.name, kind, turn.task_id))
        if worktree is None or facts.tree_root is None:
            return RoleTurn(turn, after, slot, prompt, budget_tree=facts.budget_tree)
        cwd = self.workspaces.cwd(worktree)
        return RoleTurn(turn, after, slot, prompt, facts.tree_root, cwd, facts.budget_tree)

    async def _with_leader_notes(self, prompt: str) -> str:
        """The leader hears of requests refused at their deadline since its last turn."""
        notes = await self.book.store.aread(lambda tx: leader_notes(tx, self.team.leader))
        if not notes:
            return prompt
        lines = "\n".join(f"- {note}" for note in notes)
        return (
            "[baton] Since your last turn, these requests got no answer from the human by "
            f"their deadline and were refused (the agents went on without them):\n{lines}\n\n"
            + prompt
        )

    async def run(self, turn: RoleTurn) -> None:
        """Run a dispatched turn outside the task's lock; commit how it ended."""
        slot = turn.slot
        key = (turn.record.task_id, turn.record.dispatch)
        try:
            try:
                session = await self.slots.ensure_session(slot, turn.cwd)
            except Exception as exc:  # any start failure is this turn's failure, recorded
                await self.finish(turn, TurnResult("failed", error=f"session start failed: {exc}"))
                return
            await self._start(turn)
            if self.prompt_started is not None:
                self.prompt_started(slot.name, turn.record.task_id, time.monotonic())
            slot.cancel, slot.prompting = None, True
            if isinstance(session, ScopedSession):
                session.working_on(turn.tree_root or turn.record.task_id)
            if isinstance(session, BudgetedSession):
                session.charge_to(turn.record.task_id, turn.budget_tree)
            try:
                result = await session.prompt(turn.prompt)
            except asyncio.CancelledError:
                await asyncio.shield(self.interrupt(turn, "baton stopped during the turn"))
                raise
            except Exception as exc:  # an agent that dies mid-turn fails the turn, not the loop
                log.exception("%s: prompt failed", slot.name)
                result = TurnResult("failed", error=f"{type(exc).__name__}: {exc}")
                await self.slots.drop_session(slot, reason=str(exc))
            finally:
                slot.prompting = False
            await self._checkpoint(turn)
            asked, slot.cancel = slot.cancel, None
            await self.finish(turn, result, asked.text(self.team.human) if asked else None)
        finally:
            self.live.discard(key)
            async with self._ended:
                self._ended.notify_all()

    async def wait_ended(self, task_ids: set[str], timeout: float) -> bool:
        """Until no turn of ``task_ids`` runs here (or ``timeout``); whether none does."""

        def ended() -> bool:
            return not any(task in task_ids for task, _ in self.live)

        try:
            async with asyncio.timeout(timeout):
                async with self._ended:
                    await self._ended.wait_for(ended)
        except TimeoutError:
            return ended()
        return True

    async def _checkpoint(self, turn: RoleTurn) -> None:
        """What the agent left in its worktree, committed to the tree's branch.

        A failure is logged, never the turn's: the worktree still holds the work, and
        the next checkpoint (or recovery at the next start) commits it."""
        if turn.tree_root is None:
            return
        row = turn.record
        message = (
            f"baton: {row.task_id} {row.role} turn {row.dispatch} ({row.kind})\n\n"
            f"What the agent left in the worktree when its turn ended (slot {row.slot})."
        )
        try:
            await self.workspaces.checkpoint(turn.tree_root, message)
        except Exception:  # the work stays in the worktree: the next checkpoint takes it
            log.exception(
                "checkpoint of %s after %s#%d failed", turn.tree_root, row.task_id, row.dispatch
            )

    async def cancel(self, slot: Slot, ask: CancelAsk) -> bool:
        """Cancel ``slot``'s running turn if it is still the one the human saw."""
        session = slot.session
        if (
            session is None
            or not slot.prompting
            or slot.cancel is not None
            or slot.record.pointer_seq != ask.pointer_seq
        ):
            return False
        slot.cancel = ask
        await session.cancel(ask.text(self.team.human))
        return True

    async def _turn_commit(
        self,
        turn: RoleTurn,
        turn_event: DispatchEvent,
        task_target: TaskState | None,
        slot_event: SlotEvent | None,
        *,
        reason: str | None = None,
        turn_changes: dict[str, Any] | None = None,  # TurnRecord fields
        slot_changes: dict[str, Any] | None = None,  # SlotRecord fields
        files: Sequence[str] = (),
    ) -> None:
        before_turn = turn.record
        new_state = DISPATCH.next(before_turn.state, turn_event)
        after_turn = dataclasses.replace(before_turn, state=new_state, **(turn_changes or {}))
        task_id = before_turn.task_id
        for _ in range(5):
            record = await asyncio.to_thread(self.book.facts.record, task_id)
            assert record is not None
            payloads: list[Payload] = []
            task_after: TaskRecord | None = None
            dropped = record.state is TaskState.DROPPED  # the turn ends; the TASK stays dropped
            if task_target is not None and before_turn.kind != "review" and not dropped:
                task_changes: dict[str, RecordChanges] = {}
                if files:
                    task_changes["files_changed"] = merge_files(record.files_changed, files)
                task_after, payloads = self.book.walk(record, task_target, reason, **task_changes)

            def write(
                tx: Tx,
                record: TaskRecord = record,
                task_after: TaskRecord | None = task_after,
            ) -> None:
                changed = team_sql.TURNS.update_turn(
                    tx,
                    task_id,
                    before_turn.dispatch,
                    after_turn.row(),
                    state=before_turn.state.value,
                )
                if changed != 1:
                    raise RecordMoved(f"turn {task_id}#{before_turn.dispatch} changed")
                if task_after is not None:
                    guard_update(tx, record, task_after)

            try:
                await self.slots.commit(
                    turn.slot,
                    slot_event,
                    reason=reason,
                    extra=payloads,
                    also=write,
                    **(slot_changes or {}),
                )
            except RecordMoved:
                continue
            turn.record = after_turn
            return
        raise RecordMoved(task_id)

    async def _start(self, turn: RoleTurn) -> None:
        await self._turn_commit(turn, DispatchEvent.START, TaskState.TURN_RUNNING, SlotEvent.PROMPT)

    async def interrupt(self, turn: RoleTurn, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self._turn_commit(
                turn,
                DispatchEvent.INTERRUPT,
                TaskState.INTERRUPTED,
                SlotEvent.CLOSE,
                reason=reason,
                turn_changes={"ended_at": self.book.now(), "error": reason},
            )

    async def finish(
        self, turn: RoleTurn, result: TurnResult, cancelled_by: str | None = None
    ) -> None:
        slot = turn.slot
        refused = deadline_note(result.refusals)
        counters = (
            self.slots.counters_after(slot, result)
            if turn.record.state is DispatchState.RUNNING
            else {}
        )
        slot_event = None
        if slot.record.state.value == "working":
            slot_event = SlotEvent.TURN_END if slot.session is not None else SlotEvent.FAIL
        await self._turn_commit(
            turn,
            DispatchEvent.FINISH,
            TaskState.TURN_FINISHED,
            slot_event,
            reason=f"turn {result.status}"
            + (f": {result.error}" if result.error else "")
            + (f"; {refused}" if refused else ""),
            turn_changes={
                "outcome": result.status,
                "stop_reason": result.stop_reason,
                "tool_calls": result.tool_calls,
                "error": result.error or refused,
                "ended_at": self.book.now(),
                "cancelled_by": cancelled_by,
            },
            slot_changes=counters,
            files=result.files_changed,
        )
