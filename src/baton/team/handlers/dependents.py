"""What a finished TASK wakes: its parent (consolidation) and siblings gated on it (``after:``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort

__all__ = ["Dependents"]

log = logging.getLogger("baton.team.handlers")


@dataclass(frozen=True, slots=True)
class Dependents:
    port: FcopPort
    schedule: Callable[[str], None]

    async def release(self, parent: str | None) -> None:
        """A sibling finished: the TASKs still in the inbox under ``parent`` that wait for
        siblings look at their gate again."""
        if parent is None:
            return
        try:
            waiting = await asyncio.to_thread(self.port.children, parent, ("inbox",))
        except CoordinationError:
            log.exception("listing the children of %s failed", parent)
            return
        for task in waiting:
            if task.references:
                self.schedule(task.task_id)

    async def finished(self, parent: str | None) -> None:
        """A TASK settled: its parent is evaluated again and its gated siblings released."""
        if parent:
            self.schedule(parent)
            await self.release(parent)
