"""The request lifecycle as data: one table, one function, no I/O.

Everything that decides whether a request may move lives here (h11's
``_state.py`` rule), so the ledger, the CLI and the tests read the same table.
``pending`` is where every request starts; ``answered`` means a decision exists
but the agent has not received it yet; ``delivered`` means the JSON-RPC response
was written to the agent's pipe. ``cancelled``, ``expired`` and ``rejected`` end a
request without delivering an answer. Terminal states absorb: no event leaves
them, and trying raises :class:`~baton.request_model.errors.IllegalTransition` naming
the state and the event, so a late answer or a double delivery is loud, never a
silent overwrite.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from baton.request_model.errors import IllegalTransition
from baton.statetable import StateTable

__all__ = [
    "INITIAL_STATES",
    "OPEN_STATES",
    "TABLE",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "Event",
    "State",
    "mermaid",
    "next_state",
]


class State(StrEnum):
    """Where a request is in its life; stored verbatim in ``requests.state``."""

    PENDING = "pending"
    ANSWERED = "answered"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    REJECTED = "rejected"


class Event(StrEnum):
    """What can happen to a request."""

    ANSWER = "answer"
    """A human, the policy or the headless fallback decided."""
    DELIVER = "deliver"
    """The response was written to the agent's pipe."""
    CANCEL = "cancel"
    """The turn ended (or was cancelled) before the answer reached the agent."""
    EXPIRE = "expire"
    """The agent connection is gone (restart, crash) or the wait timed out."""
    REJECT = "reject"
    """The request itself is refused (late for its turn, duplicate, invalid)."""


TABLE: StateTable[State, Event] = StateTable(
    "request",
    State,
    Event,
    {
        (State.PENDING, Event.ANSWER): State.ANSWERED,
        (State.PENDING, Event.CANCEL): State.CANCELLED,
        (State.PENDING, Event.EXPIRE): State.EXPIRED,
        (State.PENDING, Event.REJECT): State.REJECTED,
        (State.ANSWERED, Event.DELIVER): State.DELIVERED,
        (State.ANSWERED, Event.CANCEL): State.CANCELLED,
        (State.ANSWERED, Event.EXPIRE): State.EXPIRED,
    },
    # A request is born pending, or rejected on arrival (oversize, late for its turn).
    starts=frozenset({State.PENDING, State.REJECTED}),
    illegal=lambda message, state, event: IllegalTransition(message, state=state, event=event),
)
"""Every legal move; anything absent is illegal."""

TRANSITIONS: Mapping[tuple[State | None, Event], State] = TABLE.transitions
INITIAL_STATES: frozenset[State] = TABLE.initial
TERMINAL_STATES: frozenset[State] = TABLE.terminal
OPEN_STATES: frozenset[State] = TABLE.open
"""States a restart must resolve (``pending``, ``answered``)."""

next_state = TABLE.next
mermaid = TABLE.mermaid
