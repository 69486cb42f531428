"""Role slots: one concurrent session of a role, its binding and pointer, its counters.

A slot's durable part is its ``team_slots`` row (moved only through
:data:`baton.team.states.SLOT`, each move committed with a ``team.slot.changed``
event); its live part is the :class:`~baton.team.contract.RoleSession`, created
by the factory on the slot's first job (no work, no wake) and again after it
failed. The binding the slot's MCP server reads is written when the team loop
opens the slot, so a server started later always finds it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.events.model import Payload, TeamSlotChanged
from baton.role_tools.binding import Binding
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.tx import Tx
from baton.team.contract import RoleSession, RoleSessionFactory, TurnResult
from baton.team.controls import CancelAsk
from baton.team.records import RecordChanges, SlotRecord, UsageTotals
from baton.team.states import SLOT, SlotEvent, SlotState
from baton.team_config import RoleSpec, TeamConfig

__all__ = ["MAX_FILES_CHANGED", "Slot", "Slots", "merge_files", "slot_names"]

log = logging.getLogger("baton.team.slots")

MAX_FILES_CHANGED = 200


def merge_files(known: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    """``known`` plus the paths of ``new`` not in it yet, at most :data:`MAX_FILES_CHANGED`."""
    files = list(known)
    for path in new:
        if path not in files and len(files) < MAX_FILES_CHANGED:
            files.append(path)
    return tuple(files)


def slot_names(spec: RoleSpec) -> list[str]:
    """``ROLE``, ``ROLE-2``, ... one per ``concurrency``."""
    return [spec.name if i == 0 else f"{spec.name}-{i + 1}" for i in range(spec.concurrency)]


@dataclass
class Slot:
    """A live slot: its spec, last committed record and (lazy) session."""

    spec: RoleSpec
    record: SlotRecord
    session: RoleSession | None = None
    busy: bool = False
    prompting: bool = False
    """A turn's prompt is with the agent right now (a cancel can reach it)."""
    cancel: CancelAsk | None = None
    """The human asked to cancel the turn that is running (cleared when the next starts)."""
    extra: dict[str, Any] = field(default_factory=dict)
    cwd: Path | None = None
    """Where the live session's agent works (None: the project; else a tree's worktree)."""

    @property
    def name(self) -> str:
        return self.record.slot


@dataclass(kw_only=True, eq=False)
class Slots:
    """Every slot of the team, and the writes that move them."""

    team: TeamConfig
    fcop_root: Path
    store_path: Path | None
    journal: Journal
    factory: RoleSessionFactory
    now: Callable[[], str]
    watch: Callable[[int], None] | None = None
    """Called with a new session's process group (the death watch)."""
    by_role: dict[str, list[Slot]] = field(default_factory=dict, init=False)

    def binding(self, spec: RoleSpec, name: str) -> Binding:
        return Binding(
            fcop_root=self.fcop_root,
            role=spec.name,
            session_name=name,
            leader=self.team.leader,
            human=self.team.human,
            team_roles=self.team.role_names,
            allowed_tools=spec.tools,
            aliases=spec.aliases,
            store_path=self.store_path,
        )

    def all(self) -> list[Slot]:
        return [slot for slots in self.by_role.values() for slot in slots]

    # --------------------------------------------------------------- transitions

    def _move(
        self, record: SlotRecord, event: SlotEvent, reason: str | None = None, **changes: Any
    ) -> tuple[SlotRecord, Payload]:
        new_state = SLOT.next(record.state if record.updated_at else None, event)
        after = dataclasses.replace(record, state=new_state, updated_at=self.now(), **changes)
        payload = TeamSlotChanged(
            slot=record.slot,
            role=record.role,
            from_state=record.state.value if record.updated_at else None,
            to_state=new_state.value,
            event=event.value,
            agent_session_id=after.agent_session_id,
            reason=reason,
        )
        return after, payload

    async def open(self, previous: Sequence[SlotRecord]) -> None:
        """Own every slot of the team (state ``idle``), keeping earlier counters."""
        known = {r.slot: r for r in previous}
        rows: list[SlotRecord] = []
        payloads: list[Payload] = []
        for spec in self.team.roles.values():
            slots = []
            for name in slot_names(spec):
                before = known.get(name) or SlotRecord(
                    slot=name,
                    role=spec.name,
                    agent=spec.agent,
                    state=SlotState.IDLE,
                    binding=self.binding(spec, name),
                    updated_at="",
                )
                before = dataclasses.replace(
                    before, agent=spec.agent, binding=self.binding(spec, name)
                )
                after, payload = self._move(before, SlotEvent.OPEN, task_id=None, attempt_id=None)
                rows.append(after)
                payloads.append(payload)
                slots.append(Slot(spec, after))
            self.by_role[spec.name] = slots

        def write(tx: Tx) -> None:
            for row in rows:
                team_sql.SLOTS.upsert(tx, row.row())

        await self.journal.commit(payloads, write)

    async def commit(
        self,
        slot: Slot,
        event: SlotEvent | None,
        *,
        reason: str | None = None,
        extra: Sequence[Payload] = (),
        also: Callable[[Tx], None] | None = None,
        **changes: RecordChanges,
    ) -> None:
        """Move ``slot`` (or only change its fields when ``event`` is None), with more writes."""
        payloads = list(extra)
        if event is None:
            after = dataclasses.replace(slot.record, updated_at=self.now(), **changes)
        else:
            after, payload = self._move(slot.record, event, reason, **changes)
            payloads.append(payload)

        def write(tx: Tx) -> None:
            team_sql.SLOTS.upsert(tx, after.row())
            if also is not None:
                also(tx)

        await self.journal.commit(payloads, write)
        slot.record = after

    # ------------------------------------------------------------------ sessions

    async def ensure_session(self, slot: Slot, cwd: Path | None = None) -> RoleSession:
        """The slot's session in ``cwd`` (None: the project), created (or resumed) by the
        factory when there is none there.

        ACP fixes a session's working directory when it is created, so a slot that moves
        to another task tree's worktree closes its session there and opens (or resumes)
        the one it keeps for the new place: an agent keeps its context per tree."""
        if slot.session is not None and slot.cwd == cwd:
            return slot.session
        if slot.session is not None:
            await self.drop_session(slot, reason="moving to another task tree's worktree")
            await self.commit(slot, SlotEvent.RELEASE, reason=f"to work in {cwd or 'the project'}")
        await self.commit(slot, SlotEvent.START)
        try:
            session = await self.factory(slot.spec, slot.record.binding, cwd)
        except Exception as exc:  # recorded as the slot's failure, then re-raised
            await self.commit(slot, SlotEvent.FAIL, reason=f"session start failed: {exc}")
            raise
        slot.session, slot.cwd = session, cwd
        group = session.process_group
        if group is not None and self.watch is not None:
            self.watch(group)
        await self.commit(
            slot,
            SlotEvent.READY,
            agent_session_id=session.session_id,
            started_at=slot.record.started_at or self.now(),
        )
        return session

    def counters_after(self, slot: Slot, result: TurnResult) -> dict[str, RecordChanges]:
        """The slot's counters with one more turn (usage availability never made up)."""
        record = slot.record
        streak = (
            record.zero_tool_streak + 1
            if (result.status == "completed" and result.tool_calls == 0)
            else 0
        )
        usage = record.usage
        if result.usage is not None:
            u = result.usage
            usage = UsageTotals(
                availability="reported",
                reported_turns=usage.reported_turns + 1,
                input_tokens=usage.input_tokens + (u.input_tokens or 0),
                output_tokens=usage.output_tokens + (u.output_tokens or 0),
                thinking_tokens=usage.thinking_tokens + (u.thinking_tokens or 0),
                cost_usd=usage.cost_usd + (u.cost_usd or 0.0),
            )
        files = merge_files(record.files_changed, result.files_changed)
        return {
            "turns": record.turns + 1,
            "tool_calls": record.tool_calls + result.tool_calls,
            "zero_tool_streak": streak,
            "unapproved_mutations": record.unapproved_mutations + result.unapproved_mutations,
            "approval": result.approval if result.approval is not None else record.approval,
            "usage": usage,
            "files_changed": files,
        }

    async def drop_session(self, slot: Slot, *, reason: str) -> None:
        """Close a dead (or unwanted) session; the next job starts a new one."""
        session, slot.session = slot.session, None
        if session is not None:
            try:
                await session.close()
            except Exception:  # closing is best effort: the session is dropped either way
                log.exception("closing %s failed", slot.name)

    async def close_all(self, reason: str) -> None:
        for slot in self.all():
            await self.drop_session(slot, reason=reason)
            if slot.record.state not in (SlotState.CLOSED, SlotState.IDLE):
                try:
                    await self.commit(slot, SlotEvent.CLOSE, reason=reason)
                except Exception:  # at shutdown one slot's record never stops the others'
                    log.exception("recording %s closed failed", slot.name)
