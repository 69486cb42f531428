"""Is the agent still talking? A silence watch for one running turn, sans-I/O.

A turn timeout is long (an hour by default) because real turns are long; an agent
that has silently hung should not look like one that is working until then. After a
configurable silence (:data:`DEFAULT_STALL_SECONDS`) the turn gets one
``turn.stalled`` diagnostic; the next frame from the agent clears it with
``turn.resumed``. Time is passed in (monotonic milliseconds); the caller owns the
timer and tells the watch what it heard.

Silence while baton itself owes the agent an answer (a permission request waiting
for a human, say) is not the agent's: :meth:`Liveness.waiting` suspends the watch.
Only protocol frames count as speaking; stderr chatter does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.events.model import TurnResumed, TurnStalled

__all__ = ["DEFAULT_STALL_SECONDS", "Liveness", "resumed_text", "span", "stall_text"]

DEFAULT_STALL_SECONDS = 60.0
"""Silence before ``turn.stalled``; ``stall_timeout`` on a profile (``baton run
--stall-timeout``) overrides it."""


@dataclass(slots=True)
class Liveness:
    threshold_ms: float
    last_heard_ms: float
    stalled_since_ms: float | None = None
    deadline_ms: float | None = None
    """When the turn timeout ends the turn (the stall says how far off it is)."""
    _waiting: int = 0

    @classmethod
    def start(
        cls, threshold_s: float, now_ms: float, *, deadline_ms: float | None = None
    ) -> Liveness:
        if threshold_s <= 0:
            raise ValueError("the stall threshold must be positive")
        return cls(threshold_ms=threshold_s * 1000.0, last_heard_ms=now_ms, deadline_ms=deadline_ms)

    @property
    def stalled(self) -> bool:
        return self.stalled_since_ms is not None

    def heard(self, now_ms: float) -> TurnResumed | None:
        """The agent sent something; clears a stall (returns what to emit, if anything)."""
        silent = now_ms - self.last_heard_ms
        self.last_heard_ms = now_ms
        if self.stalled_since_ms is None:
            return None
        self.stalled_since_ms = None
        return TurnResumed(silent_ms=max(0, int(silent)))

    def waiting(self, on_us: bool, now_ms: float) -> None:
        """baton starts (``True``) or stops owing the agent an answer; nests."""
        self._waiting += 1 if on_us else -1
        self._waiting = max(0, self._waiting)
        self.last_heard_ms = now_ms  # the silence starts over once the answer is sent

    def check(self, now_ms: float) -> TurnStalled | None:
        """``turn.stalled`` once the silence reaches the threshold (once per silence)."""
        if self.stalled_since_ms is not None:
            return None
        if self._waiting:
            self.last_heard_ms = now_ms
            return None
        silent = now_ms - self.last_heard_ms
        if silent < self.threshold_ms:
            return None
        self.stalled_since_ms = now_ms
        timeout_in = None if self.deadline_ms is None else max(0, int(self.deadline_ms - now_ms))
        return TurnStalled(
            silent_ms=int(silent), threshold_ms=int(self.threshold_ms), timeout_in_ms=timeout_in
        )

    def due_ms(self) -> float | None:
        """When :meth:`check` can next report anything; ``None`` while stalled (then only
        :meth:`heard` changes anything)."""
        if self.stalled_since_ms is not None:
            return None
        return self.last_heard_ms + self.threshold_ms


def span(ms: float) -> str:
    """``0.2s``, ``42s``, ``1m 0s``, ``2h 5m``: a duration as the stall lines say it."""
    if 0 < ms < 1000:
        return f"{ms / 1000:.1f}s"
    seconds = max(0, int(ms // 1000))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"


def stall_text(silent_ms: float, timeout_in_ms: float | None = None) -> str:
    """What every surface (``run``, ``up``, ``status``, the dashboard) says of a stall."""
    timeout = "" if timeout_in_ms is None else f" (turn timeout in {span(timeout_in_ms)})"
    return f"the agent has said nothing for {span(silent_ms)}{timeout}"


def resumed_text(silent_ms: float) -> str:
    """What every surface says when a stalled agent speaks again."""
    return f"the agent spoke again after {span(silent_ms)} of silence"
