"""Riding out a store outage: what counts as one, how long to wait, and who may ask.

A PostgreSQL restart, a connection cut by the network, SQLite's disk filling up or its
file locked past the wait: none of these is a reason to fail the team. While the store is
out, the writer keeps every queued write (producers wait only at ``queue_max``, never
lose one), tries to reconnect after 0.1 s, then doubling up to every 2 s
(:data:`BACKOFF`), and replays the batch it was committing once the store answers; a
batch whose COMMIT was cut short is first asked about (:meth:`Backend.committed`), so a
committed batch is never applied twice. Reads wait the same way. After
:data:`OUTAGE_LIMIT_S` without the store (5 minutes by default) it gives up as before:
one clear error, every later write refused.

:class:`Health` is what the rest of baton sees of it: whether the store is out now, since
when and why (``baton up`` pauses new claims and placements meanwhile; turns that do not
need the store go on).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from baton.errors import StoreError

__all__ = ["BACKOFF", "OUTAGE_LIMIT_S", "Health", "Outage", "OutageGaveUp", "ride"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

OUTAGE_LIMIT_S: Final = 300.0
"""How long the store may be out before baton stops waiting for it."""
BACKOFF: Final = (0.1, 2.0)
"""The first pause between two tries and the longest (doubling in between)."""


class OutageGaveUp(StoreError):
    """The store stayed out longer than the outage limit."""


@dataclass
class Outage:
    """One outage being ridden out (the writer's or a reader's)."""

    reason: str
    started: float
    tries: int = 0

    def pause(self) -> float:
        """The pause before the next try: 0.1 s, doubling, at most 2 s."""
        return float(min(BACKOFF[0] * 2.0 ** min(self.tries, 16), BACKOFF[1]))

    def over(self, now: float, limit: float) -> bool:
        return now - self.started >= limit


class Health:
    """Whether the store is out right now (thread-safe; the writer and readers report)."""

    def __init__(self, label: str, *, limit: float = OUTAGE_LIMIT_S) -> None:
        self.label = label
        self.limit = limit
        self._lock = threading.Lock()
        self._out: dict[int, Outage] = {}
        self.outages = 0
        """Outages ridden out so far (each logged once when it starts and when it ends)."""

    @property
    def outage(self) -> Outage | None:
        """The oldest outage in progress, or None while the store answers."""
        with self._lock:
            return min(self._out.values(), key=lambda o: o.started, default=None)

    def begin(self, reason: str, now: float) -> Outage:
        who = threading.get_ident()
        with self._lock:
            known = self._out.get(who)
            if known is not None:
                return known
            outage = self._out[who] = Outage(reason, now)
            first = len(self._out) == 1
        if first:
            self.outages += 1
            _log.error(
                "baton: the store %s is unreachable (%s) — writes wait and resume when it is "
                "back; baton gives up after %.0f s",
                self.label,
                reason,
                self.limit,
            )
        return outage

    def end(self, now: float) -> None:
        who = threading.get_ident()
        with self._lock:
            outage = self._out.pop(who, None)
            last = not self._out
        if outage is not None and last:
            _log.warning(
                "store %s is back after %.1f s (%d tries)",
                self.label,
                now - outage.started,
                outage.tries,
            )


def ride(
    health: Health,
    attempt: Callable[[], T],
    transient: Callable[[BaseException], str | None],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``attempt()`` until it succeeds, riding out transient failures (a reader's loop).

    ``transient(exc)`` names the outage, or None for an error that is not one (raised at
    once). Past the health's limit the last error is raised as :class:`OutageGaveUp`.
    """
    outage: Outage | None = None
    while True:
        try:
            result = attempt()
        except BaseException as exc:
            reason = transient(exc)
            if reason is None:
                raise
            now = clock()
            if outage is None:
                outage = health.begin(reason, now)
            if outage.over(now, health.limit):
                health.end(now)
                raise OutageGaveUp(
                    f"the store {health.label} was unreachable for {health.limit:.0f} s: {reason}"
                ) from exc
            # Another process (the database server) must come back: trying again is all.
            sleep(outage.pause())
            outage.tries += 1
            continue
        if outage is not None:
            health.end(clock())
        return result
