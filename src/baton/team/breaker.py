"""The zero-tool-call breaker: a role whose turns call no tool is paused for a cooldown.

``zero_tool_limit`` turns in a row without a single tool call (an agent that only
chats) trip it: the role's row records until when it is paused (it holds across a
restart), an ISSUE tells the human, and the role's jobs are parked (no longer busy,
so ``--until-idle`` can end) and queued again when the cooldown ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from baton.events.sequencer import utc_now
from baton.store import team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.activity import Activity
from baton.team.attention import Escalations
from baton.team.jobs import Job
from baton.team.records import RoleRecord
from baton.team.slots import Slot, Slots
from baton.team_config import TeamConfig

__all__ = ["Breaker"]


@dataclass(kw_only=True, eq=False)
class Breaker:
    team: TeamConfig
    store: Store
    slots: Slots
    escalations: Escalations
    activity: Activity
    enqueue: Callable[[Job], None]
    wall_clock: Callable[[], float]
    _parked: dict[str, list[Job]] = field(default_factory=dict, init=False)
    timers: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def open_until(self, role: str) -> float:
        """Until when ``role`` is paused (0: it is not). Blocking: run in a thread."""
        row = self.store.read_tx(lambda tx: team_sql.ROLES.get(tx, role))
        if row is None:
            return 0.0
        return RoleRecord.from_row(row).breaker_until or 0.0

    async def trip(self, slot: Slot, task_id: str, job: Job) -> None:
        """``slot``'s role tripped it on ``task_id``: record, ISSUE, park ``job``."""
        role = slot.spec.name
        until = self.wall_clock() + self.team.zero_tool_cooldown
        record = RoleRecord(role=role, updated_at=utc_now(), breaker_until=until)

        def write(tx: Tx) -> None:
            team_sql.ROLES.upsert(tx, record.row())

        await self.slots.commit(slot, None, also=write, zero_tool_streak=0)
        await self.escalations.issue(
            task_id,
            f"{role}: {self.team.zero_tool_limit} turns in a row without a single tool call; "
            f"pausing {role} for {self.team.zero_tool_cooldown:.0f}s (zero-tool-call breaker)",
        )
        self.park(role, job, until)

    def park(self, role: str, job: Job, until: float) -> None:
        """Hold a job while ``role``'s breaker is open; it no longer counts as busy."""
        jobs = self._parked.setdefault(role, [])
        jobs.append(job)
        self.activity.end()
        if len(jobs) == 1:
            delay = max(0.0, until - self.wall_clock())
            timer = asyncio.get_running_loop().create_task(self._unpark(role, delay))
            self.timers.add(timer)
            timer.add_done_callback(self.timers.discard)

    async def _unpark(self, role: str, delay: float) -> None:
        await asyncio.sleep(delay)
        for job in self._parked.pop(role, []):
            self.enqueue(job)
        self.activity.kick()
