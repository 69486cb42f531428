"""The team loop's recovery at start: what a dead ``baton up`` left, made whole again.

Order matters (issue 9), and :class:`~baton.team.loop.TeamLoop` keeps it: the project
is taken first (:mod:`baton.team.ownership`), then pre-store side files are migrated,
then :meth:`Recovery.recover` runs: turns a dead team loop left ``dispatched`` or
``running`` become ``interrupted`` (unless a live role holder still has the turn, in
cluster mode: then its result is adopted, :mod:`baton.team.reconcile`), abandoned
publication temporaries are removed, TASKs left in two FCoP stages are repaired by
rule or marked ``needs_attention``; only after that are live TASKs re-evaluated
(:meth:`Recovery.reevaluate_all`) and, last, the slot workers started (each adopts
its slot's turn first, :meth:`Recovery.adopt`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from baton.events.model import Payload
from baton.events.sequencer import utc_now
from baton.fcop_port.port import FcopPort
from baton.fcop_port.recovery import clean_temporaries, tasks_in_two_stages
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.activity import Activity
from baton.team.attention import Escalations
from baton.team.book import TaskBook, guard_update
from baton.team.contract import AdoptingSession
from baton.team.reconcile import LOOP_STOPPED, Adopt, HolderLookup, reconcile
from baton.team.records import TaskRecord, TurnRecord
from baton.team.slots import Slot, Slots
from baton.team.states import DispatchState, TaskState
from baton.team.turns import RoleTurn, TurnRunner
from baton.team.two_stages import record_recovery, repair_two_stages
from baton.team.workspaces import Workspaces
from baton.team_config import TeamConfig

__all__ = ["LIVE_STATES", "Recovery"]

log = logging.getLogger("baton.team.recovery")

LIVE_STATES = tuple(s.value for s in TaskState if s not in (TaskState.SETTLED, TaskState.REFUSED))


@dataclass(kw_only=True, eq=False)
class Recovery:
    """Recovery at start, and the adoption of turns a live holder kept (cluster mode)."""

    port: FcopPort
    team: TeamConfig
    store: Store
    journal: Journal
    book: TaskBook
    turns: TurnRunner
    escalations: Escalations
    slots: Slots
    activity: Activity
    evaluate: Callable[[str], Awaitable[None]]
    schedule: Callable[[str], None]
    state_dir: Path | None
    holders: HolderLookup | None
    """Cluster mode: what the store says of the slots' live holders (None: one machine)."""
    workspaces: Workspaces
    _adoptions: dict[str, TurnRecord] = field(default_factory=dict, init=False)
    """Per slot, the open turn a live holder still has (adopted by the slot's worker)."""

    async def migrate(self) -> None:
        """Move the first team loop's side files into the store (once per project)."""
        if self.state_dir is None:
            return
        from baton.team.migrate import migrate_legacy_state

        await migrate_legacy_state(self.state_dir, self.store, self.journal, self.team)

    async def recover(self) -> None:
        """Interrupt the dead loop's turns, finish what git steps a crash cut short
        (and checkpoint what its agents left), clean temporaries, repair two-stage TASKs."""
        await self._interrupt_open_turns()
        for record, action in await self.workspaces.recover():
            log.info("worktree of %s (%s): %s", record.root_task, record.state, action.value)
        for repair in await asyncio.to_thread(clean_temporaries, self.port):
            await record_recovery(
                self.journal, repair.task_id, repair.rule, "cleaned", repair.detail, None
            )
        for task_id in await asyncio.to_thread(tasks_in_two_stages, self.port):
            await repair_two_stages(self.port, self.journal, task_id, self.escalations.escalate)

    async def _interrupt_open_turns(self) -> None:
        """Turns a dead loop left open did not finish: mark them (and their TASKs)
        interrupted, unless a live role holder still has the turn (cluster mode): that
        one is adopted (:mod:`baton.team.reconcile`), its result taken by the slot's worker."""

        def read(tx: Tx) -> list[tuple[TurnRecord, TaskRecord | None]]:
            out = []
            for row in team_sql.open_turns(tx):
                turn = TurnRecord.from_row(row)
                task_row = team_sql.TASKS.get(tx, turn.task_id)
                out.append((turn, TaskRecord.from_row(task_row) if task_row else None))
            return out

        opened = await self.store.aread(read)
        slots = {turn.slot for turn, _ in opened}
        holders = await self.holders(slots) if self.holders is not None and slots else {}
        adoptions: dict[str, TurnRecord] = {}
        for turn, record in opened:
            decision = reconcile(turn.state, turn.prompt_sha256, holders.get(turn.slot))
            if isinstance(decision, Adopt) and turn.slot not in adoptions:
                adoptions[turn.slot] = turn
                self.turns.live.add((turn.task_id, turn.dispatch))  # its TASK waits for it
                self.activity.begin()  # ``--until-idle`` waits for it too
                log.info("%s#%d on %s: %s", turn.task_id, turn.dispatch, turn.slot, decision)
                continue
            await self._interrupt_turn(turn, record, decision.reason)
        self._adoptions = adoptions

    async def _interrupt_turn(
        self, turn: TurnRecord, record: TaskRecord | None, reason: str = LOOP_STOPPED
    ) -> None:
        payloads: list[Payload] = []
        task_after = None
        if record is not None and record.state in (TaskState.DISPATCHED, TaskState.TURN_RUNNING):
            task_after, payloads = self.book.walk(record, TaskState.INTERRUPTED, reason)
        now = utc_now()

        def write(tx: Tx) -> None:
            team_sql.TURNS.update_turn(
                tx,
                turn.task_id,
                turn.dispatch,
                {"state": DispatchState.INTERRUPTED.value, "ended_at": now},
                state=turn.state.value,
            )
            if task_after is not None and record is not None:
                guard_update(tx, record, task_after)

        await self.journal.commit(payloads, write)

    async def adopt(self, slot: Slot) -> None:
        """The slot's adopted turn, if any: its holder's result committed as the turn's end,
        or, when the holder no longer has it, the turn interrupted as :meth:`recover` does.

        The slot's worker runs this before its first job (one turn at a time per slot)."""
        turn = self._adoptions.pop(slot.name, None)
        if turn is None:
            return
        key = (turn.task_id, turn.dispatch)
        try:
            result = None
            try:
                await self._point_at(slot, turn)
                task = await asyncio.to_thread(self.book.facts.record, turn.task_id)
                cwd = await asyncio.to_thread(
                    self.workspaces.cwd_of, task.workspace if task is not None else None
                )
                session = await self.slots.ensure_session(slot, cwd)
                if isinstance(session, AdoptingSession) and turn.prompt_sha256 is not None:
                    result = await session.adopt(turn.prompt_sha256)
            except asyncio.CancelledError:  # baton stops: as a turn it ran itself (turns.py)
                record = await asyncio.to_thread(self.book.facts.record, turn.task_id)
                await asyncio.shield(
                    self._interrupt_turn(turn, record, "baton stopped during the turn")
                )
                raise
            except Exception:  # the holder is unreachable: decided below as "no holder"
                log.exception("%s: adopting %s#%d failed", slot.name, *key)
            record = await asyncio.to_thread(self.book.facts.record, turn.task_id)
            if result is None or record is None:
                decision = reconcile(turn.state, turn.prompt_sha256, None)
                await self._interrupt_turn(turn, record, decision.reason)
            else:
                await self.turns.finish(RoleTurn(turn, record, slot, ""), result)
            self.schedule(turn.task_id)
        finally:
            self.turns.live.discard(key)
            self.activity.end()

    async def _point_at(self, slot: Slot, turn: TurnRecord) -> None:
        """The slot's pointer names the adopted turn's TASK again (opening the slots cleared
        it), so the agent's role tools act on it as they did before the restart."""
        anchor = turn.anchor or turn.task_id
        record = await asyncio.to_thread(self.book.facts.record, anchor)
        await self.slots.commit(
            slot,
            None,
            task_id=anchor,
            attempt_id=record.attempt_id if record is not None else turn.attempt_id,
            pointer_seq=slot.record.pointer_seq + 1,
        )

    async def reevaluate_all(self) -> None:
        """Every TASK with work left: live records and FCoP's active and review stages."""

        def read(tx: Tx) -> list[str]:
            return [str(r[0]) for r in team_sql.tasks_in_states(tx, LIVE_STATES)]

        ids = list(await self.store.aread(read))
        for stage in ("active", "review"):
            entries = await asyncio.to_thread(self.port._scan_stage, stage)
            ids += [e.task_id for e in entries if e.task_id]
        seen: set[str] = set()
        for task_id in ids:
            if task_id not in seen:
                seen.add(task_id)
                await self.evaluate(task_id)
