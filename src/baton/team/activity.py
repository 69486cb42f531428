"""What the team loop is busy with, so ``--until-idle`` knows when nothing is.

Every piece of work the loop starts (an evaluation, a queued job, a routed doorbell
event, an outbox drain, an adopted turn) is counted from its start to its end; a
change of the count wakes whoever waits for idleness. Background tasks are kept
here too, so the loop can cancel every one of them when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

__all__ = ["Activity"]


class Activity:
    """A busy count, its condition, and the background tasks it owns."""

    def __init__(self) -> None:
        self.busy = 0
        self.background: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()

    def begin(self) -> None:
        self.busy += 1

    def end(self) -> None:
        self.busy -= 1
        self.kick()

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """Busy for the block's length."""
        self.begin()
        try:
            yield
        finally:
            self.end()

    def kick(self) -> None:
        """Wake the idle waiters to look at the count again."""

        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        with contextlib.suppress(RuntimeError):  # no running loop: nobody waits
            asyncio.get_running_loop().create_task(notify())

    # Any: a coroutine's yield and send types, as asyncio's create_task takes them.
    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``coro`` in the background, busy until it ends."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.background.add(task)
        self.begin()

        def done(t: asyncio.Task[None]) -> None:
            self.background.discard(t)
            self.end()

        task.add_done_callback(done)

    async def wait(self, idle: Callable[[], bool]) -> None:
        """Until ``idle()`` holds (checked at every change of the count)."""
        async with self._changed:
            await self._changed.wait_for(idle)

    async def settle_background(self) -> None:
        """Until every background task (and any it started) has ended."""
        while self.background:
            await asyncio.gather(*list(self.background), return_exceptions=True)
