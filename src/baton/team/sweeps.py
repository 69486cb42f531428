"""The intake sweep inside the team loop: what Core reads outside the inbox, judged first.

At start (before recovery), every ``sweep_interval`` and after every turn (an agent
may have written anything under ``fcop/``); a pass over unchanged files opens none
of them, and with the sweeper's change feed lists and stats none either (the feed
is read in the pass itself, so the after-turn pass sees every write the agent
made). Each finding goes through the doorbell (quarantine and ISSUE) and the
router (the refusal row and its events), like an inbox refusal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from baton.inbox.doorbell import Doorbell, DoorbellEvent
from baton.intake.stability import FileFacts
from baton.intake.sweep import Sweeper, SweepReport

__all__ = ["LoopSweeps"]

log = logging.getLogger("baton.team.sweeps")

_SETTLE_POLL_S = 0.25
"""How often the start-up sweep looks again at files still settling."""


@dataclass(eq=False)
class LoopSweeps:
    sweeper: Sweeper
    doorbell: Doorbell
    events: asyncio.Queue[DoorbellEvent]
    interval: float
    _swept: set[tuple[str, FileFacts]] = field(default_factory=set, init=False)
    _sweeping: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def at_start(
        self, stopped: Callable[[], bool], pause: Callable[[float], Awaitable[bool]]
    ) -> None:
        """The sweep before recovery, until nothing in it is still settling.

        Recovery reads every open TASK and its REPORTs through Core; a file written
        moments before ``baton up`` started (inside the settle window) is not judged by
        the first pass, so recovery would read it unjudged: a hostile one then makes its
        TASK need attention instead of being quarantined. So wait for such files (the
        settle window, ~1 s; a file that never stops changing is refused as ``unstable``
        after ``max_settle_s``) and sweep again. ``pause`` waits unless the loop stops.
        """
        while True:
            report = await self.sweep()
            if not report.settling or stopped():
                return
            await pause(_SETTLE_POLL_S)

    async def sweep(self, *, after_turn: bool = False) -> SweepReport:
        """Screen what Core reads outside the inbox; refuse (quarantine, ISSUE) what fails."""
        async with self._sweeping:
            # After a turn, what the agent wrote is complete: judge it now, not in 1 s.
            report = await asyncio.to_thread(
                self.sweeper.sweep, require_stable=False if after_turn else None
            )
            for finding in report.refused:
                key = (finding.origin, finding.facts)
                if key in self._swept:
                    continue  # left in place (quarantine off): said once
                self._swept.add(key)
                event = await asyncio.to_thread(self.doorbell.refuse_file, finding)
                if event.quarantined_to is not None:
                    self.sweeper.forget(finding.origin)
                await self.events.put(event)
            return report

    async def after_turn(self) -> None:
        try:
            await self.sweep(after_turn=True)
        except Exception:  # a failed pass is logged; the next one (or the timer's) retries
            log.exception("intake sweep after a turn failed")

    async def every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except Exception:  # as after_turn: the next pass retries
                log.exception("intake sweep failed")
