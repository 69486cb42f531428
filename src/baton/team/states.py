"""The team loop's lifecycles as data: a task, a role slot, a turn. No I/O.

Like :mod:`baton.requests.states` (h11's ``_state.py`` rule), everything that
decides whether something may move lives in one table per lifecycle, the
store keeps the state verbatim, and an illegal move raises
:class:`IllegalTeamTransition` naming the machine, the state and the event.
``docs/coordination.md`` shows a diagram generated from each table
(``scripts/gen-state-diagrams``; a test fails when the docs are stale).

**A task as baton sees it** (FCoP's stage is the lifecycle authority; this is
baton's progress on it)::

    seen → claimed → dispatched → turn_running → turn_finished → waiting_children
         → consolidating → (dispatched …) → in_review → settled

plus ``refused`` (the doorbell would not dispatch it), ``waiting_human`` (an
``ask_human`` question is open), ``interrupted`` (the daemon stopped or died
during its turn: re-prompted with context on the next start),
``needs_attention`` (baton cannot proceed without a human: shown in ``status``,
a request in the inbox and an FCoP ISSUE) and ``failed`` (the agent's turn
failed and its retries are spent). Both of the last two go back to ``claimed``
when the human asks for a retry.

**A role slot** (one concurrent session of a role): ``idle`` (no session: no
work, no wake) → ``starting`` → ``ready`` ⇄ ``working``; ``failed`` when its
session dies (the next job starts a new one); ``closed`` when the daemon stops.

**A turn** (one dispatch of a prompt to a slot): ``dispatched`` → ``running`` →
``finished`` (its outcome stored with it), or ``interrupted`` when the daemon
stops or dies first. A finished turn is never run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from baton.coordination.errors import CoordinationError

__all__ = [
    "MACHINES",
    "SLOT",
    "TASK",
    "TURN",
    "IllegalTeamTransition",
    "Machine",
    "SlotEvent",
    "SlotState",
    "TaskEvent",
    "TaskState",
    "TurnEvent",
    "TurnState",
]


class IllegalTeamTransition(CoordinationError):
    """A team lifecycle move that the table does not allow (a bug, never agent input)."""

    def __init__(self, message: str, *, machine: str, state: str | None, event: str) -> None:
        super().__init__(message)
        self.machine = machine
        self.state = state
        self.event = event


S = TypeVar("S", bound=StrEnum)
E = TypeVar("E", bound=StrEnum)


@dataclass(frozen=True, slots=True)
class Machine(Generic[S, E]):
    """One transition table: ``(state, event) -> state``; ``None`` is "not yet known"."""

    name: str
    states: type[S]
    events: type[E]
    transitions: Mapping[tuple[S | None, E], S]

    @property
    def initial(self) -> frozenset[S]:
        return frozenset(dst for (src, _), dst in self.transitions.items() if src is None)

    @property
    def terminal(self) -> frozenset[S]:
        """States with no way out, derived from the table so they cannot drift from it."""
        return frozenset(s for s in self.states if not any(src == s for src, _ in self.transitions))

    def allowed(self, state: S | None) -> frozenset[E]:
        return frozenset(e for (src, e) in self.transitions if src == state)

    def next(self, state: S | None, event: E) -> S:
        """The state after ``event``, or raise naming the machine, state and event."""
        try:
            return self.transitions[(state, event)]
        except KeyError:
            shown = "nothing" if state is None else repr(state.value)
            allowed = ", ".join(sorted(e.value for e in self.allowed(state))) or "nothing"
            raise IllegalTeamTransition(
                f"illegal {self.name} transition: event {event.value!r} in state {shown} "
                f"(allowed: {allowed})",
                machine=self.name,
                state=None if state is None else state.value,
                event=event.value,
            ) from None

    def path(self, state: S | None, target: S) -> tuple[E, ...]:
        """The shortest event sequence from ``state`` to ``target`` (empty when already there).

        Recovery derives where a TASK *is* from FCoP, then walks baton's record
        there through legal moves only (each one recorded); raises when no such
        walk exists.
        """
        if state == target:
            return ()
        frontier: list[tuple[S | None, tuple[E, ...]]] = [(state, ())]
        seen: set[S | None] = {state}
        while frontier:
            nxt: list[tuple[S | None, tuple[E, ...]]] = []
            for src, events in frontier:
                for (from_state, event), dst in self.transitions.items():
                    if from_state != src or dst in seen:
                        continue
                    walk = (*events, event)
                    if dst == target:
                        return walk
                    seen.add(dst)
                    nxt.append((dst, walk))
            frontier = nxt
        shown = "nothing" if state is None else repr(state.value)
        raise IllegalTeamTransition(
            f"no {self.name} transition path from {shown} to {target.value!r}",
            machine=self.name,
            state=None if state is None else state.value,
            event=f"->{target.value}",
        )

    def mermaid(self) -> str:
        """The state diagram, generated from the table (``docs/coordination.md``)."""
        lines = ["stateDiagram-v2"]
        for (src, event), dst in self.transitions.items():
            left = "[*]" if src is None else src.value
            lines.append(f"    {left} --> {dst.value}: {event.value}")
        lines += [f"    {s.value} --> [*]" for s in self.states if s in self.terminal]
        return "\n".join(lines)


# ---------------------------------------------------------------------------- task


class TaskState(StrEnum):
    SEEN = "seen"
    CLAIMED = "claimed"
    DISPATCHED = "dispatched"
    TURN_RUNNING = "turn_running"
    TURN_FINISHED = "turn_finished"
    WAITING_CHILDREN = "waiting_children"
    CONSOLIDATING = "consolidating"
    WAITING_HUMAN = "waiting_human"
    IN_REVIEW = "in_review"
    SETTLED = "settled"
    REFUSED = "refused"
    INTERRUPTED = "interrupted"
    NEEDS_ATTENTION = "needs_attention"
    FAILED = "failed"


class TaskEvent(StrEnum):
    SEE = "see"
    """The doorbell (or recovery) found the TASK, routed to a role."""
    REFUSE = "refuse"
    """The doorbell will not dispatch it (unknown recipient, invalid file...)."""
    CLAIM = "claim"
    """T2 made the attempt (or recovery found the TASK already active)."""
    DISPATCH = "dispatch"
    """A turn was assigned to a slot (persisted before the prompt is sent)."""
    START = "start"
    """The prompt was handed to the session."""
    FINISH = "finish"
    """The turn ended with an outcome (persisted per dispatch)."""
    INTERRUPT = "interrupt"
    """The daemon stopped, or died, before the turn finished."""
    WAIT_CHILDREN = "wait_children"
    """No report yet: delegated children are still being worked on."""
    CONSOLIDATE = "consolidate"
    """Every child reported: the leader consolidates."""
    WAIT_HUMAN = "wait_human"
    """No report yet: an ``ask_human`` question is open."""
    ANSWER = "answer"
    """The human answered the question: the answer goes to the role as a turn."""
    SUBMIT = "submit"
    """T3: the report is in review with its reviewer."""
    APPROVE = "approve"
    """T4: accepted; baton is done with the task."""
    REJECT = "reject"
    """T5: sent back for rework; a new attempt."""
    RESUME = "resume"
    """Back to work: an interrupted turn on restart, or a human's retry."""
    ATTENTION = "attention"
    """baton cannot proceed without a human (stalled, unresolvable FCoP state...)."""
    FAIL = "fail"
    """The agent's turn failed and no retry is left."""


_T = TaskState
_E = TaskEvent
_ACTIVE_WORK = (_T.CLAIMED, _T.TURN_FINISHED, _T.WAITING_CHILDREN, _T.WAITING_HUMAN)
_LIVE = (
    _T.SEEN,
    _T.CLAIMED,
    _T.DISPATCHED,
    _T.TURN_RUNNING,
    _T.TURN_FINISHED,
    _T.WAITING_CHILDREN,
    _T.CONSOLIDATING,
    _T.WAITING_HUMAN,
    _T.IN_REVIEW,
    _T.INTERRUPTED,
)


def _task_table() -> dict[tuple[TaskState | None, TaskEvent], TaskState]:
    table: dict[tuple[TaskState | None, TaskEvent], TaskState] = {
        (None, _E.SEE): _T.SEEN,
        (None, _E.REFUSE): _T.REFUSED,
        (_T.REFUSED, _E.SEE): _T.SEEN,
        (_T.SEEN, _E.REFUSE): _T.REFUSED,
        (_T.SEEN, _E.CLAIM): _T.CLAIMED,
        (_T.CLAIMED, _E.DISPATCH): _T.DISPATCHED,
        (_T.DISPATCHED, _E.START): _T.TURN_RUNNING,
        (_T.DISPATCHED, _E.FINISH): _T.TURN_FINISHED,  # the session could not start
        (_T.TURN_RUNNING, _E.FINISH): _T.TURN_FINISHED,
        (_T.DISPATCHED, _E.INTERRUPT): _T.INTERRUPTED,
        (_T.TURN_RUNNING, _E.INTERRUPT): _T.INTERRUPTED,
        (_T.INTERRUPTED, _E.RESUME): _T.CLAIMED,
        (_T.TURN_FINISHED, _E.DISPATCH): _T.DISPATCHED,  # a reminder or a retry
        (_T.TURN_FINISHED, _E.WAIT_CHILDREN): _T.WAITING_CHILDREN,
        (_T.TURN_FINISHED, _E.WAIT_HUMAN): _T.WAITING_HUMAN,
        (_T.TURN_FINISHED, _E.FAIL): _T.FAILED,
        (_T.WAITING_CHILDREN, _E.CONSOLIDATE): _T.CONSOLIDATING,
        (_T.CONSOLIDATING, _E.DISPATCH): _T.DISPATCHED,
        (_T.WAITING_HUMAN, _E.ANSWER): _T.CLAIMED,
        (_T.IN_REVIEW, _E.APPROVE): _T.SETTLED,
        (_T.IN_REVIEW, _E.REJECT): _T.CLAIMED,
        (_T.NEEDS_ATTENTION, _E.RESUME): _T.CLAIMED,
        (_T.FAILED, _E.RESUME): _T.CLAIMED,
    }
    # Recovery derives the state from FCoP, so work may be found in any of these.
    for state in (_T.SEEN, *_ACTIVE_WORK, _T.CONSOLIDATING):
        table[(state, _E.SUBMIT)] = _T.IN_REVIEW
    for state in (_T.SEEN, _T.CLAIMED, _T.WAITING_HUMAN):
        table[(state, _E.WAIT_CHILDREN)] = _T.WAITING_CHILDREN
    table[(_T.CLAIMED, _E.WAIT_HUMAN)] = _T.WAITING_HUMAN
    table[(_T.CLAIMED, _E.CONSOLIDATE)] = _T.CONSOLIDATING
    for state in (_T.SEEN, *_ACTIVE_WORK, _T.CONSOLIDATING, _T.INTERRUPTED, _T.NEEDS_ATTENTION):
        table[(state, _E.APPROVE)] = _T.SETTLED  # found already done (decided elsewhere)
    for state in _LIVE:
        table[(state, _E.ATTENTION)] = _T.NEEDS_ATTENTION
    return table


TASK: Machine[TaskState, TaskEvent] = Machine(
    "task", TaskState, TaskEvent, MappingProxyType(_task_table())
)


# ---------------------------------------------------------------------------- slot


class SlotState(StrEnum):
    IDLE = "idle"
    STARTING = "starting"
    READY = "ready"
    WORKING = "working"
    FAILED = "failed"
    CLOSED = "closed"


class SlotEvent(StrEnum):
    OPEN = "open"
    """The daemon started (or restarted) and owns the slot; no session yet."""
    START = "start"
    """The first job arrived: the session is being created (or resumed)."""
    READY = "ready"
    """The session is up."""
    PROMPT = "prompt"
    """A turn runs on the session."""
    TURN_END = "turn_end"
    """The turn ended; the session stays for the next job."""
    FAIL = "fail"
    """The session could not start, or died."""
    CLOSE = "close"
    """The daemon released the session."""


_S = SlotState
_SE = SlotEvent
SLOT: Machine[SlotState, SlotEvent] = Machine(
    "slot",
    SlotState,
    SlotEvent,
    MappingProxyType(
        {
            (None, _SE.OPEN): _S.IDLE,
            **{(s, _SE.OPEN): _S.IDLE for s in SlotState},
            (_S.IDLE, _SE.START): _S.STARTING,
            (_S.FAILED, _SE.START): _S.STARTING,
            (_S.STARTING, _SE.READY): _S.READY,
            (_S.STARTING, _SE.FAIL): _S.FAILED,
            (_S.READY, _SE.PROMPT): _S.WORKING,
            (_S.WORKING, _SE.TURN_END): _S.READY,
            (_S.WORKING, _SE.FAIL): _S.FAILED,
            (_S.READY, _SE.FAIL): _S.FAILED,
            (_S.IDLE, _SE.CLOSE): _S.CLOSED,
            (_S.STARTING, _SE.CLOSE): _S.CLOSED,
            (_S.READY, _SE.CLOSE): _S.CLOSED,
            (_S.WORKING, _SE.CLOSE): _S.CLOSED,
            (_S.FAILED, _SE.CLOSE): _S.CLOSED,
        }
    ),
)


# ---------------------------------------------------------------------------- turn


class TurnState(StrEnum):
    DISPATCHED = "dispatched"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"


class TurnEvent(StrEnum):
    DISPATCH = "dispatch"
    START = "start"
    FINISH = "finish"
    INTERRUPT = "interrupt"


_U = TurnState
_UE = TurnEvent
TURN: Machine[TurnState, TurnEvent] = Machine(
    "turn",
    TurnState,
    TurnEvent,
    MappingProxyType(
        {
            (None, _UE.DISPATCH): _U.DISPATCHED,
            (_U.DISPATCHED, _UE.START): _U.RUNNING,
            (_U.DISPATCHED, _UE.FINISH): _U.FINISHED,
            (_U.RUNNING, _UE.FINISH): _U.FINISHED,
            (_U.DISPATCHED, _UE.INTERRUPT): _U.INTERRUPTED,
            (_U.RUNNING, _UE.INTERRUPT): _U.INTERRUPTED,
        }
    ),
)

MACHINES: tuple[Machine[Any, Any], ...] = (TASK, SLOT, TURN)
"""Every team lifecycle, in the order the docs show them."""
