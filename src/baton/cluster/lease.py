"""The holder's lease: renewed in the store, and its watchdog when the store is gone.

A role actor holds its slot under a lease (``cluster_placements.lease_expires_at``)
that it renews every third of its length. Each tick asks the pure
:func:`baton.cluster.placement.watchdog` for a verdict from the *monotonic* time
since the last confirmed renewal (counted from when that renewal was sent):
renew, or, when the store has not confirmed one for about the lease, *pause* the
agent (its process group frozen), since by then the coordinator may have placed a
new copy and a frozen agent acts no more. The keeper then asks the store to take
the placement up again (``resume``: the store must still name the epoch as placed,
its lapsed lease aside: nobody moved the slot, and nothing acted after the lease
could have lapsed); granted, the agent goes on where it was (a store restart, ridden
out); refused, it is stopped for good. A renewal the store refuses
(:class:`FencedOut`: a newer epoch) stops the agent at once.

A renewal that hangs (the store's host is cut off) is never doubled: the next
try starts only once the previous one ended, so a partition does not pile up
blocked connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from baton.cluster.placement import FencedOut, LeaseLapsed, Watchdog, watchdog
from baton.errors import StoreError

__all__ = ["LeaseKeeper"]

log = logging.getLogger(__name__)

TICKS_PER_LEASE: Final = 10


class LeaseKeeper:
    """Renews one holder's lease; calls ``on_lost(reason)`` once when it may no longer act."""

    def __init__(
        self,
        renew: Callable[[], Awaitable[object]],
        *,
        lease_s: float,
        on_lost: Callable[[str], Awaitable[None]],
        on_pause: Callable[[str], Awaitable[None]] | None = None,
        on_resume: Callable[[], Awaitable[None]] | None = None,
        resume: Callable[[], Awaitable[object]] | None = None,
        margin_s: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._renew = renew
        self._resume = resume or renew
        self.lease_s = lease_s
        self.margin_s = margin_s if margin_s is not None else min(1.0, lease_s / 4)
        self._on_lost = on_lost
        self._on_pause = on_pause
        self._on_resume = on_resume
        self.paused: str | None = None
        """Why the agent is frozen right now (None: it acts)."""
        self.pauses = 0
        self._monotonic = monotonic
        self._confirmed = monotonic()
        """When the last confirmed renewal was sent (the placement itself, at start)."""
        self._inflight: asyncio.Task[None] | None = None
        self.lost: str | None = None
        self.renewals = 0

    def confirmed(self, sent_at: float) -> None:
        """A renewal (or the placement) sent at ``sent_at`` was committed."""
        self._confirmed = max(self._confirmed, sent_at)

    def since_renewal(self) -> float:
        return self._monotonic() - self._confirmed

    async def _attempt(self) -> None:
        sent = self._monotonic()
        paused = self.paused is not None
        try:
            await (self._resume() if paused else self._renew())
        except LeaseLapsed as exc:
            if self.paused is None:  # it acted up to now: the lapse ends it
                await self._lose(f"the store refused the renewal: {exc}")
            return  # a renewal sent before the pause, answered after it: resume next
        except FencedOut as exc:
            await self._lose(f"the store refused the renewal: {exc}")
            return
        except (StoreError, OSError) as exc:
            log.warning("lease renewal failed (store unreachable?): %s", exc)
            return
        self.renewals += 1
        self.confirmed(sent)
        if paused:
            log.warning("the store confirmed the epoch again: the agent goes on")
            self.paused = None
            if self._on_resume is not None:
                await self._on_resume()

    async def take_up(self) -> None:
        """Take the placement up again now (the store must still name the epoch); the agent
        goes on if it was paused. Raises :class:`FencedOut` (the agent then stops) when
        the slot moved."""
        sent = self._monotonic()
        try:
            await self._resume()
        except FencedOut as exc:
            await self._lose(f"the store refused the epoch: {exc}")
            raise
        self.confirmed(sent)
        if self.paused is not None:
            self.paused = None
            if self._on_resume is not None:
                await self._on_resume()

    async def _lose(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
            await self._on_lost(reason)

    async def step(self) -> Watchdog:
        """One tick: the verdict, acted on (a renewal is started, or the agent stopped)."""
        if self.lost is not None:
            return Watchdog.KILL
        verdict = watchdog(
            lease_s=self.lease_s, since_renewal=self.since_renewal(), margin_s=self.margin_s
        )
        if verdict is Watchdog.PAUSE:
            reason = (
                f"no renewal confirmed for {self.since_renewal():.1f} s "
                f"(lease {self.lease_s:g} s): the store is unreachable"
            )
            if self._on_pause is None:
                await self._lose(reason)
                return Watchdog.KILL
            if self.paused is None:
                self.paused = reason
                self.pauses += 1
                await self._on_pause(reason)
        if verdict is not Watchdog.ACT and (self._inflight is None or self._inflight.done()):
            self._inflight = asyncio.create_task(self._attempt(), name="baton-lease-renew")
        return verdict

    async def run(self) -> None:
        """Tick until the lease is lost (or the task is cancelled)."""
        try:
            while self.lost is None:
                await self.step()
                # A lease is a clock: this sleep is the schedule, not a wait on a condition.
                await asyncio.sleep(self.lease_s / TICKS_PER_LEASE)
        finally:
            if self._inflight is not None and not self._inflight.done():
                self._inflight.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._inflight
