"""One prompt turn as data: a state table, the causes of a cancel, and how it ends.

Everything that decides where a turn goes lives here, sans-I/O (h11's ``_state.py``
rule): the driver (:mod:`baton.runner.turn_driver`) reports what happened, this
module answers what that means. A turn starts ``running``; asking the agent to stop
makes it ``cancelling``; stopping the agent's process makes it ``killed``. Exactly one
of ``completed``, ``failed``, ``cancelled`` ends it, and terminal states absorb, so
the stream can never carry two endings for one turn however the agent, a timeout and
a user's Ctrl-C race. Illegal moves raise :class:`~baton.errors.LocalProtocolError`
naming the state and the event (a bug in baton, never the agent's fault).

:func:`settle` is the one rule that turns the way the prompt request ended into the
terminal event's kind: an error or an exit after baton killed the agent is a forced
cancel, not an agent failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from baton.errors import LocalProtocolError
from baton.statetable import StateTable, from_each

__all__ = [
    "TABLE",
    "TERMINAL_TURN_STATES",
    "TRANSITIONS",
    "CancelCause",
    "Ending",
    "PromptEnd",
    "Turn",
    "TurnEvent",
    "TurnState",
    "mermaid",
    "next_state",
    "settle",
]


class TurnState(StrEnum):
    RUNNING = "running"
    """``session/prompt`` was sent; no stop was asked."""
    CANCELLING = "cancelling"
    """``session/cancel`` was sent; the agent should answer ``cancelled`` soon."""
    KILLED = "killed"
    """baton stopped the agent's process; no ordinary answer will come."""
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TurnEvent(StrEnum):
    CANCEL = "cancel"
    """baton sent ``session/cancel`` (see :class:`CancelCause` for why)."""
    KILL = "kill"
    """baton stopped the agent's process group."""
    COMPLETE = "complete"
    """The agent answered the prompt with a stop reason other than ``cancelled``."""
    CANCELLED = "cancelled"
    """The agent answered ``cancelled``, or the killed agent went away."""
    FAIL = "fail"
    """The prompt ended in an error, a timeout, an exit or a malformed answer."""


class CancelCause(StrEnum):
    """Why baton asked the agent to stop; it shapes the turn's ending, not a string prefix."""

    USER = "user"
    """Someone asked (Ctrl-C, the API's ``cancel()``)."""
    TIMEOUT = "timeout"
    """The turn exceeded its deadline."""
    CLOSING = "closing"
    """The session is being closed with a turn still open."""
    INTERRUPTED = "interrupted"
    """The caller awaiting the turn was itself cancelled."""
    IGNORED = "ignored"
    """The agent did not stop on ``session/cancel`` in time."""
    BUDGET = "budget"
    """A budget's hard limit was reached during the turn (``baton.runner.budget_watch``)."""


_OPEN = (TurnState.RUNNING, TurnState.CANCELLING, TurnState.KILLED)

TABLE: StateTable[TurnState, TurnEvent] = StateTable(
    "turn",
    TurnState,
    TurnEvent,
    {
        (TurnState.RUNNING, TurnEvent.CANCEL): TurnState.CANCELLING,
        (TurnState.CANCELLING, TurnEvent.CANCEL): TurnState.CANCELLING,
        (TurnState.KILLED, TurnEvent.CANCEL): TurnState.KILLED,
        **from_each(_OPEN, TurnEvent.KILL, TurnState.KILLED),
        **from_each(_OPEN, TurnEvent.COMPLETE, TurnState.COMPLETED),
        **from_each(_OPEN, TurnEvent.CANCELLED, TurnState.CANCELLED),
        **from_each(_OPEN, TurnEvent.FAIL, TurnState.FAILED),
    },
    starts=frozenset({TurnState.RUNNING}),
    illegal=lambda message, state, event: LocalProtocolError(message),
)
"""Every legal move; anything absent is illegal. A second cancel or kill is absorbed."""

TRANSITIONS: Mapping[tuple[TurnState | None, TurnEvent], TurnState] = TABLE.transitions
TERMINAL_TURN_STATES: frozenset[TurnState] = TABLE.terminal
next_state = TABLE.next
mermaid = TABLE.mermaid


class PromptEnd(StrEnum):
    """How the ``session/prompt`` request itself ended, as the driver saw it."""

    ANSWERED = "answered"
    """A schema-valid answer arrived (its stop reason is passed beside)."""
    MALFORMED = "malformed"
    """An answer arrived that does not match the ACP schema."""
    REMOTE_ERROR = "remote_error"
    """The agent answered with a JSON-RPC error."""
    EXITED = "exited"
    """The agent's process or connection went away."""
    TIMED_OUT = "timed_out"
    """The deadline passed (the driver sent cancel, and killed if it was ignored)."""


@dataclass(frozen=True, slots=True)
class Ending:
    """The terminal event to emit: its kind, and for a cancel whether it was forced."""

    event: TurnEvent
    forced: bool = False


def settle(state: TurnState, end: PromptEnd, stop_reason: str | None = None) -> Ending:
    """The one rule from "how the prompt ended" to "how the turn ends"."""
    if end is PromptEnd.ANSWERED:
        if stop_reason == "cancelled":
            return Ending(TurnEvent.CANCELLED, forced=False)
        return Ending(TurnEvent.COMPLETE)
    if end in (PromptEnd.REMOTE_ERROR, PromptEnd.EXITED) and state is TurnState.KILLED:
        return Ending(TurnEvent.CANCELLED, forced=True)
    return Ending(TurnEvent.FAIL)


@dataclass(slots=True)
class Turn:
    """One turn's identity, state and counters; transitions only through :meth:`fire`."""

    turn_id: str
    started_ms: float
    state: TurnState = TurnState.RUNNING
    cause: CancelCause | None = None
    """Why a stop was first asked for, if it was."""
    reason: str | None = None
    """The same in words, shown in ``turn.cancelled`` (redacted by whoever set it)."""
    request: asyncio.Future[Any] | None = None
    """The ``session/prompt`` request, once sent."""
    late_updates: int = 0

    @property
    def answered(self) -> bool:
        """The agent answered the prompt: updates from now on are late for this turn.

        Read from the request itself, not a callback, so an update decoded in the same
        read as the answer is already late.
        """
        return self.request is not None and self.request.done()

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_TURN_STATES

    @property
    def killed(self) -> bool:
        return self.state is TurnState.KILLED

    def elapsed_ms(self, now_ms: float) -> int:
        return max(0, int(now_ms - self.started_ms))

    def fire(self, event: TurnEvent) -> TurnState:
        self.state = next_state(self.state, event)
        return self.state

    def ask_stop(self, cause: CancelCause, reason: str) -> None:
        """Record the first cause of a stop (later ones do not overwrite it) and cancel."""
        if self.cause is None:
            self.cause, self.reason = cause, reason
        self.fire(TurnEvent.CANCEL)

    def mark_killed(self, reason: str) -> None:
        self.reason = f"killed: {reason}"
        if self.cause is None:
            self.cause = CancelCause.IGNORED
        self.fire(TurnEvent.KILL)
