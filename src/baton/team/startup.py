"""The team loop's start (and end): take the project, migrate, recover, re-evaluate.

Order matters (issue 9): the project is taken first (one ``baton up`` per
project, checked in the store), then pre-store side files are migrated, then
recovery runs: turns a dead daemon left ``dispatched`` or ``running`` become
``interrupted`` (unless a live role actor still has the turn, in cluster mode: then
its result is adopted, :mod:`baton.team.reconcile`), abandoned publication
temporaries are removed, TASKs left in two FCoP stages are repaired by rule or marked
``needs_attention``; only after that are live TASKs re-evaluated and, last, the slot
workers started (in :mod:`baton.team.loop`; each adopts its slot's turn first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path
from typing import Literal

from baton.errors import BatonError
from baton.events.model import Payload, TeamRecovery
from baton.events.sequencer import utc_now
from baton.fcop_port.port import FcopPort
from baton.fcop_port.recovery import (
    Unresolved,
    clean_temporaries,
    resolve_two_stages,
    tasks_in_two_stages,
    validate_workspace,
)
from baton.lifeline import boot_id, process_start_ticks
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.executor import Executor
from baton.team.reconcile import DAEMON_STOPPED, Adopt, HolderLookup, reconcile
from baton.team.records import DaemonRecord, TaskRecord, TurnRecord
from baton.team.slots import Slot, Slots
from baton.team.states import DispatchState, TaskState
from baton.team.turns import RoleTurn
from baton.team_config import TeamConfig

__all__ = ["LIVE_STATES", "DaemonBusy", "Startup", "utc_now"]

log = logging.getLogger(__name__)

LIVE_STATES = tuple(s.value for s in TaskState if s not in (TaskState.SETTLED, TaskState.REFUSED))


class DaemonBusy(BatonError):
    """Another ``baton up`` already runs this project."""


class Startup:
    """The loop's start-up and shut-down steps (mixed into :class:`~baton.team.loop.TeamLoop`)."""

    port: FcopPort
    team: TeamConfig
    store: Store
    journal: Journal
    run_id: str
    state_dir: Path | None
    executor: Executor
    slots: Slots
    _background: set[asyncio.Task[None]]
    _busy: int
    _adoptions: dict[str, TurnRecord]
    """Per slot, the open turn a live holder still has (adopted by the slot's worker)."""
    holders: HolderLookup | None
    """Cluster mode: what the store says of the slots' live holders (None: one machine)."""

    async def _evaluate(self, task_id: str) -> None:
        raise NotImplementedError

    def _kick(self) -> None:
        raise NotImplementedError

    def schedule(self, task_id: str) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------- ownership

    async def _take_project(self) -> None:
        """Become the one ``baton up`` of this project (refused while another lives)."""
        pid = os.getpid()
        ticks = process_start_ticks(pid) or 0
        now = utc_now()
        mine = DaemonRecord(
            pid=pid,
            start_ticks=ticks,
            host=socket.gethostname(),
            boot=boot_id(),
            run_id=self.run_id,
            state="running",
            started_at=now,
            updated_at=now,
        )

        def take(tx: Tx) -> None:
            row = team_sql.DAEMON.get(tx, 1)
            if row is not None:
                other = DaemonRecord.from_row(row)
                alive = (
                    other.state == "running"
                    and other.host == mine.host
                    and other.boot == mine.boot
                    and other.pid != pid
                    and process_start_ticks(other.pid) == other.start_ticks
                )
                if alive:
                    raise DaemonBusy(
                        f"another `baton up` (pid {other.pid}, run {other.run_id}) runs this "
                        "project; stop it first"
                    )
            team_sql.DAEMON.upsert(tx, mine.row())

        await self.store.write(take)

    async def _release_project(self) -> None:
        pid = os.getpid()

        def release(tx: Tx) -> None:
            row = team_sql.DAEMON.get(tx, 1)
            if row is not None and DaemonRecord.from_row(row).pid == pid:
                team_sql.DAEMON.update(tx, 1, {"state": "stopped", "updated_at": utc_now()})

        with contextlib.suppress(Exception):
            await self.store.write(release)

    # --------------------------------------------------------------- recovery

    async def _migrate(self) -> None:
        if self.state_dir is None:
            return
        from baton.team.migrate import migrate_legacy_state

        await migrate_legacy_state(self.state_dir, self.store, self.journal, self.team)

    async def _recover(self) -> None:
        """Interrupt the dead daemon's turns, clean temporaries, repair two-stage TASKs."""
        await self._interrupt_open_turns()
        for repair in await asyncio.to_thread(clean_temporaries, self.port):
            await self._recovery(repair.task_id, repair.rule, "cleaned", repair.detail, None)
        for task_id in await asyncio.to_thread(tasks_in_two_stages, self.port):
            try:
                repair = await asyncio.to_thread(resolve_two_stages, self.port, task_id)
            except Unresolved as exc:
                await self._recovery(task_id, exc.rule, "needs_attention", exc.detail, None)
                await self.executor._attention(task_id, f"left in two FCoP stages: {exc.detail}")
                continue
            verdict = await asyncio.to_thread(validate_workspace, self.port.root)
            await self._recovery(
                task_id, repair.rule, "resolved", repair.detail, bool(verdict.get("valid"))
            )

    async def _recovery(
        self,
        task_id: str | None,
        rule: str,
        outcome: Literal["resolved", "needs_attention", "cleaned"],
        detail: str,
        valid: bool | None,
    ) -> None:
        payload = TeamRecovery(
            task_id=task_id,
            rule=rule,
            outcome=outcome,
            detail=detail,
            valid=valid,
        )
        await self.journal.commit([payload], lambda tx: None)

    async def _interrupt_open_turns(self) -> None:
        """Turns a dead daemon left open did not finish: mark them (and their TASKs)
        interrupted, unless a live role actor still has the turn (cluster mode): that one
        is adopted (:mod:`baton.team.reconcile`), its result taken by the slot's worker."""

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
                self.executor.live.add((turn.task_id, turn.dispatch))  # its TASK waits for it
                self._busy += 1  # ``--until-idle`` waits for it too
                log.info("%s#%d on %s: %s", turn.task_id, turn.dispatch, turn.slot, decision)
                continue
            await self._interrupt_turn(turn, record, decision.reason)
        self._adoptions = adoptions

    async def _interrupt_turn(
        self, turn: TurnRecord, record: TaskRecord | None, reason: str = DAEMON_STOPPED
    ) -> None:
        payloads: list[Payload] = []
        task_after = None
        if record is not None and record.state in (
            TaskState.DISPATCHED,
            TaskState.TURN_RUNNING,
        ):
            task_after, payloads = self.executor.walk(record, TaskState.INTERRUPTED, reason)
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
                team_sql.TASKS.update(
                    tx, record.task_id, task_after.row(), guard={"version": record.version}
                )

        await self.journal.commit(payloads, write)

    async def _adopt(self, slot: Slot) -> None:
        """The slot's adopted turn, if any: its holder's result committed as the turn's end,
        or, when the holder no longer has it, the turn interrupted as :meth:`_recover` does.

        The slot's worker runs this before its first job (one turn at a time per slot)."""
        turn = getattr(self, "_adoptions", {}).pop(slot.name, None)
        if turn is None:
            return
        key = (turn.task_id, turn.dispatch)
        try:
            result = None
            try:
                await self._point_at(slot, turn)
                session = await self.slots.ensure_session(slot)
                adopt = getattr(session, "adopt", None)  # a RemoteRoleSession (cluster mode)
                if adopt is not None and turn.prompt_sha256 is not None:
                    result = await adopt(turn.prompt_sha256)
            except asyncio.CancelledError:  # baton stops: as a turn it ran itself (turns.py)
                record = await asyncio.to_thread(self.executor.facts.record, turn.task_id)
                await asyncio.shield(
                    self._interrupt_turn(turn, record, "baton stopped during the turn")
                )
                raise
            except Exception:
                log.exception("%s: adopting %s#%d failed", slot.name, *key)
            record = await asyncio.to_thread(self.executor.facts.record, turn.task_id)
            if result is None or record is None:
                decision = reconcile(turn.state, turn.prompt_sha256, None)
                await self._interrupt_turn(turn, record, decision.reason)
            else:
                await self.executor._finish(RoleTurn(turn, record, slot, ""), result)
            self.schedule(turn.task_id)
        finally:
            self.executor.live.discard(key)
            self._busy -= 1
            self._kick()

    async def _point_at(self, slot: Slot, turn: TurnRecord) -> None:
        """The slot's pointer names the adopted turn's TASK again (opening the slots cleared
        it), so the agent's role tools act on it as they did before the restart."""
        anchor = turn.anchor or turn.task_id
        record = await asyncio.to_thread(self.executor.facts.record, anchor)
        await self.slots.commit(
            slot,
            None,
            task_id=anchor,
            attempt_id=record.attempt_id if record is not None else turn.attempt_id,
            pointer_seq=slot.record.pointer_seq + 1,
        )

    async def _reevaluate_all(self) -> None:
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
                await self._evaluate(task_id)

    async def _settle_background(self) -> None:
        """Let evaluations scheduled during recovery run before the workers start."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
