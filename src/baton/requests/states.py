"""The request lifecycle as data: one table, one function, no I/O.

Everything that decides whether a request may move lives here (h11's
``_state.py`` rule), so the ledger, the CLI and the tests read the same table.
``pending`` is where every request starts; ``answered`` means a decision exists
but the agent has not received it yet; ``delivered`` means the JSON-RPC response
was written to the agent's pipe. ``cancelled``, ``expired`` and ``rejected`` end a
request without delivering an answer. Terminal states absorb: no event leaves
them, and trying raises :class:`~baton.requests.errors.IllegalTransition` naming
the state and the event, so a late answer or a double delivery is loud, never a
silent overwrite.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from baton.requests.errors import IllegalTransition

__all__ = [
    "INITIAL_STATES",
    "OPEN_STATES",
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


TRANSITIONS: Mapping[tuple[State, Event], State] = MappingProxyType(
    {
        (State.PENDING, Event.ANSWER): State.ANSWERED,
        (State.PENDING, Event.CANCEL): State.CANCELLED,
        (State.PENDING, Event.EXPIRE): State.EXPIRED,
        (State.PENDING, Event.REJECT): State.REJECTED,
        (State.ANSWERED, Event.DELIVER): State.DELIVERED,
        (State.ANSWERED, Event.CANCEL): State.CANCELLED,
        (State.ANSWERED, Event.EXPIRE): State.EXPIRED,
    }
)
"""Every legal move; anything absent is illegal."""

INITIAL_STATES: frozenset[State] = frozenset({State.PENDING, State.REJECTED})
"""A request is born pending, or rejected on arrival (oversize, late for its turn)."""

TERMINAL_STATES: frozenset[State] = frozenset(
    s for s in State if not any(src == s for src, _ in TRANSITIONS)
)
"""States with no way out: derived from the table so they cannot drift from it."""

OPEN_STATES: frozenset[State] = frozenset(State) - TERMINAL_STATES
"""States a restart must resolve (``pending``, ``answered``)."""


def next_state(state: State, event: Event) -> State:
    """Return the state after ``event``, or raise naming both when the move is illegal."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        if state in TERMINAL_STATES:
            detail = f"{state.value!r} is terminal"
        else:
            allowed = ", ".join(sorted(e.value for (s, e) in TRANSITIONS if s == state))
            detail = f"from {state.value!r} only {allowed} are allowed"
        raise IllegalTransition(
            f"illegal request transition: event {event.value!r} in state {state.value!r} "
            f"({detail})",
            state=state.value,
            event=event.value,
        ) from None


def mermaid() -> str:
    """The state diagram for ``docs/requests.md``, generated from :data:`TRANSITIONS`."""
    lines = ["stateDiagram-v2"]
    lines += [f"    [*] --> {s.value}" for s in State if s in INITIAL_STATES]
    lines += [
        f"    {src.value} --> {dst.value}: {ev.value}" for (src, ev), dst in TRANSITIONS.items()
    ]
    lines += [f"    {s.value} --> [*]" for s in State if s in TERMINAL_STATES]
    return "\n".join(lines)
