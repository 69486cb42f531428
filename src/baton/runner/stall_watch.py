"""The I/O edge of :mod:`baton.runner.liveness`: one timer task per running turn.

:class:`StallWatch` feeds the sans-I/O :class:`~baton.runner.liveness.Liveness` what
happens: every read of inbound frames (the connection's ``on_frame`` hook), a request of this
turn starting or ending its wait for a human (the broker's ``watch_humans``), and the
clock (a task sleeping until :meth:`Liveness.due_ms`). What the watch decides is emitted
on the turn through the session's event path (stamped, stored, streamed): one
``turn.stalled`` per silence and ``turn.resumed`` before the frame that ended it.

:meth:`StallWatch.stop` ends it with the turn: the hooks are removed and the task is
woken and awaited (never cancelled mid-emit, so a ``turn.stalled`` is never lost or
written after the turn's terminal event), which costs at most one event write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from baton.acp.connection import JsonRpcConnection
from baton.events.model import Payload
from baton.runner.liveness import Liveness
from baton.runner.requests_broker import RequestBroker

__all__ = ["StallWatch"]

Clock = Callable[[], float]
"""Monotonic milliseconds."""


@dataclass(kw_only=True, eq=False)
class StallWatch:
    """The silence watch of one turn, wired to its connection, broker and clock."""

    liveness: Liveness
    turn_id: str
    emit: Callable[[Payload], Awaitable[object]]
    clock: Clock
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _stopping: bool = field(default=False, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _unhook: list[Callable[[], None]] = field(default_factory=list, init=False)

    def start(self, conn: JsonRpcConnection, requests: RequestBroker) -> None:
        """Listen to ``conn``'s frames and ``requests``' human waits; start the timer."""
        if self._task is not None:
            return
        conn.on_frame = self.heard

        def unhook_frames() -> None:
            if conn.on_frame == self.heard:
                conn.on_frame = None

        self._unhook = [unhook_frames, requests.watch_humans(self._human)]
        self._task = asyncio.create_task(self._run(), name=f"stall-watch-{self.turn_id}")

    def heard(self) -> Awaitable[None] | None:
        """A frame arrived: the ``turn.resumed`` to emit before it is handled, if stalled."""
        resumed = self.liveness.heard(self.clock())
        if resumed is None or self._stopping:
            return None
        self._wake.set()  # while stalled the timer sleeps without a deadline
        return self._announce(resumed)

    async def _announce(self, payload: Payload) -> None:
        await self.emit(payload)

    def _human(self, turn_id: str | None, waiting: bool) -> None:
        if turn_id == self.turn_id and not self._stopping:
            self.liveness.waiting(waiting, self.clock())
            self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            due = self.liveness.due_ms()
            delay = None if due is None else max(0.0, (due - self.clock()) / 1000.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()
            if self._stopping:
                return
            stalled = self.liveness.check(self.clock())
            if stalled is not None:
                await self._announce(stalled)

    async def stop(self) -> None:
        """End the watch with its turn (idempotent); what it emitted is written by now."""
        self._stopping = True
        for unhook in self._unhook:
            unhook()
        self._unhook = []
        task, self._task = self._task, None
        if task is not None:
            self._wake.set()
            await task
