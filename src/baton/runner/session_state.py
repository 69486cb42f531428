"""A session's own life as a table: ``opening → ready ⇄ prompting → closed``.

Calling ``prompt()`` during a turn, or anything after ``close()``, is a
:class:`~baton.errors.UsageError` (a bug in the caller), never the agent's fault.
"""

from __future__ import annotations

from enum import StrEnum

from baton.errors import UsageError
from baton.statetable import StateTable, from_each

__all__ = ["TABLE", "TRANSITIONS", "SessionEvent", "SessionState"]


class SessionState(StrEnum):
    OPENING = "opening"
    READY = "ready"
    PROMPTING = "prompting"
    CLOSED = "closed"


class SessionEvent(StrEnum):
    OPENED = "opened"
    PROMPT = "prompt"
    TURN_ENDED = "turn_ended"
    CLOSE = "close"


TABLE: StateTable[SessionState, SessionEvent] = StateTable(
    "session",
    SessionState,
    SessionEvent,
    {
        (SessionState.OPENING, SessionEvent.OPENED): SessionState.READY,
        (SessionState.READY, SessionEvent.PROMPT): SessionState.PROMPTING,
        (SessionState.PROMPTING, SessionEvent.TURN_ENDED): SessionState.READY,
        **from_each(
            (SessionState.OPENING, SessionState.READY, SessionState.PROMPTING),
            SessionEvent.CLOSE,
            SessionState.CLOSED,
        ),
    },
    starts=frozenset({SessionState.OPENING}),
    # Misuse by the caller, said in its words ("cannot prompt: the session is closed").
    illegal=lambda _message, state, event: UsageError(
        f"cannot {event.replace('_', ' ')}: the session is {state}"
    ),
)
TRANSITIONS = TABLE.transitions
