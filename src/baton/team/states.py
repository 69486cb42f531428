"""The team loop's lifecycles as data: a task, a role slot, a dispatch. No I/O.

Each is a :class:`~baton.statetable.StateTable`, like every lifecycle in baton
(h11's ``_state.py`` rule): everything that
decides whether something may move lives in one table per lifecycle, the
store keeps the state verbatim, and an illegal move raises
:class:`IllegalTeamTransition` naming the machine, the state and the event.
``docs/coordination.md`` shows a diagram generated from each table
(``scripts/gen-state-diagrams``; a test fails when the docs are stale).

**A task as baton sees it** (FCoP's stage is the lifecycle authority; this is
baton's progress on it)::

    seen → (waiting_prerequisites →) claimed → dispatched → turn_running → turn_finished
         → waiting_children → consolidating → (dispatched …) → in_review → settled

plus ``waiting_prerequisites`` (a delegated TASK whose ``after:`` siblings have
not finished: left unclaimed in the inbox; see :mod:`baton.workflow.ordering`),
``refused`` (the doorbell would not dispatch it), ``waiting_human`` (an
``ask_human`` question is open), ``interrupted`` (the team loop stopped or died
during its turn: re-prompted with context on the next start),
``needs_attention`` (baton cannot proceed without a human: shown in ``status``,
a request in the inbox and an FCoP ISSUE), ``needs_budget`` ("needs attention: budget":
a budget limit is reached; back to ``claimed`` when the human raises it or its window
lets it go on, ``baton.budgets``) and ``failed`` (the agent's turn
failed and its retries are spent). Both of the last two go back to ``claimed``
when the human asks for a retry. ``dropped`` is final: the human abandoned the TASK's
tree (``baton task drop``).

**A question** (a role's ``ask_human``): ``pending`` until its answer is delivered
to the role as a turn. **The owner** (the one ``baton up`` of a project):
``running`` ⇄ ``stopped``; a dead owner's ``running`` row is taken over.

**A role slot** (one concurrent session of a role): ``idle`` (no session: no
work, no wake) → ``starting`` → ``ready`` ⇄ ``working``; ``failed`` when its
session dies (the next job starts a new one); ``closed`` when the team loop stops.

**A dispatch** (one turn of a role on a task: a prompt given to a slot): ``dispatched`` → ``running`` →
``finished`` (its outcome stored with it), or ``interrupted`` when the team loop
stops or dies first. A finished turn is never run again.

Length: the team's four lifecycles as tables, each beside the words for its states.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from baton.fcop_errors import CoordinationError
from baton.statetable import StateTable, from_each

__all__ = [
    "DISPATCH",
    "MACHINES",
    "OWNER",
    "QUESTION",
    "SLOT",
    "TASK",
    "DispatchEvent",
    "DispatchState",
    "IllegalTeamTransition",
    "OwnerEvent",
    "OwnerState",
    "QuestionEvent",
    "QuestionState",
    "SlotEvent",
    "SlotState",
    "TaskEvent",
    "TaskState",
]

S = TypeVar("S", bound=StrEnum)
E = TypeVar("E", bound=StrEnum)


class IllegalTeamTransition(CoordinationError):
    """A team lifecycle move that the table does not allow (a bug, never agent input)."""

    def __init__(self, message: str, *, machine: str, state: str | None, event: str) -> None:
        super().__init__(message)
        self.machine = machine
        self.state = state
        self.event = event


def _illegal(message: str, state: str | None, event: str, *, machine: str) -> Exception:
    return IllegalTeamTransition(message, machine=machine, state=state, event=event)


def _table(
    name: str, states: type[S], events: type[E], transitions: Mapping[tuple[S | None, E], S]
) -> StateTable[S, E]:
    """A team lifecycle: a :class:`~baton.statetable.StateTable` raising
    :class:`IllegalTeamTransition`."""
    return StateTable(
        name, states, events, transitions, illegal=functools.partial(_illegal, machine=name)
    )


# ---------------------------------------------------------------------------- task


class TaskState(StrEnum):
    SEEN = "seen"
    WAITING_PREREQUISITES = "waiting_prerequisites"
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
    NEEDS_BUDGET = "needs_budget"
    FAILED = "failed"
    DROPPED = "dropped"


class TaskEvent(StrEnum):
    SEE = "see"
    """The doorbell (or recovery) found the TASK, routed to a role."""
    REFUSE = "refuse"
    """The doorbell will not dispatch it (unknown recipient, invalid file...)."""
    WAIT_PREREQUISITES = "wait_prerequisites"
    """A sibling it declares it needs (``after:``) has not finished: not claimed yet."""
    CLAIM = "claim"
    """T2 made the attempt (or recovery found the TASK already active)."""
    DISPATCH = "dispatch"
    """A turn was assigned to a slot (persisted before the prompt is sent)."""
    START = "start"
    """The prompt was handed to the session."""
    FINISH = "finish"
    """The turn ended with an outcome (persisted per dispatch)."""
    INTERRUPT = "interrupt"
    """The team loop stopped, or died, before the turn finished."""
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
    PARK = "park"
    """A budget limit of its tree, role, run or window is reached: no turn until the human
    raises it or the window lets it go on (then ``resume``)."""
    DROP = "drop"
    """The human abandoned its task tree (``baton task drop``): no agent works on it again;
    its branch's work is kept under ``refs/baton/salvage/``."""


_T = TaskState
_E = TaskEvent
_ACTIVE_WORK = (_T.CLAIMED, _T.TURN_FINISHED, _T.WAITING_CHILDREN, _T.WAITING_HUMAN)
_LIVE = (
    _T.SEEN,
    _T.WAITING_PREREQUISITES,
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
        (_T.SEEN, _E.WAIT_PREREQUISITES): _T.WAITING_PREREQUISITES,
        (_T.WAITING_PREREQUISITES, _E.CLAIM): _T.CLAIMED,  # ready, or claimed to report not-run
        (_T.WAITING_PREREQUISITES, _E.REFUSE): _T.REFUSED,
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
    table |= from_each((_T.SEEN, *_ACTIVE_WORK, _T.CONSOLIDATING), _E.SUBMIT, _T.IN_REVIEW)
    table |= from_each(
        (_T.SEEN, _T.CLAIMED, _T.WAITING_HUMAN), _E.WAIT_CHILDREN, _T.WAITING_CHILDREN
    )
    table[(_T.CLAIMED, _E.WAIT_HUMAN)] = _T.WAITING_HUMAN
    table[(_T.CLAIMED, _E.CONSOLIDATE)] = _T.CONSOLIDATING
    found_done = (
        _T.SEEN,
        _T.WAITING_PREREQUISITES,
        *_ACTIVE_WORK,
        _T.CONSOLIDATING,
        _T.INTERRUPTED,
        _T.NEEDS_ATTENTION,
    )
    table |= from_each(found_done, _E.APPROVE, _T.SETTLED)  # found already done (decided elsewhere)
    for state in _LIVE:
        table[(state, _E.ATTENTION)] = _T.NEEDS_ATTENTION
        table[(state, _E.PARK)] = _T.NEEDS_BUDGET
    table[(_T.NEEDS_BUDGET, _E.RESUME)] = _T.CLAIMED
    table[(_T.NEEDS_BUDGET, _E.ATTENTION)] = _T.NEEDS_ATTENTION
    table[(_T.NEEDS_BUDGET, _E.APPROVE)] = _T.SETTLED
    droppable = (*_LIVE, _T.NEEDS_ATTENTION, _T.NEEDS_BUDGET, _T.FAILED, _T.REFUSED)
    table |= from_each(droppable, _E.DROP, _T.DROPPED)
    return table


TASK: StateTable[TaskState, TaskEvent] = _table("task", TaskState, TaskEvent, _task_table())


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
    """The team loop started (or restarted) and owns the slot; no session yet."""
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
    """The team loop released the session."""
    RELEASE = "release"
    """The session was closed to work elsewhere (another task tree's worktree)."""


_S = SlotState
_SE = SlotEvent
SLOT: StateTable[SlotState, SlotEvent] = _table(
    "slot",
    SlotState,
    SlotEvent,
    {
        (None, _SE.OPEN): _S.IDLE,
        **from_each(SlotState, _SE.OPEN, _S.IDLE),
        (_S.IDLE, _SE.START): _S.STARTING,
        (_S.FAILED, _SE.START): _S.STARTING,
        (_S.STARTING, _SE.READY): _S.READY,
        (_S.STARTING, _SE.FAIL): _S.FAILED,
        (_S.READY, _SE.PROMPT): _S.WORKING,
        (_S.WORKING, _SE.TURN_END): _S.READY,
        (_S.WORKING, _SE.FAIL): _S.FAILED,
        (_S.READY, _SE.FAIL): _S.FAILED,
        **from_each((_S.IDLE, _S.STARTING, _S.READY, _S.WORKING, _S.FAILED), _SE.CLOSE, _S.CLOSED),
        (_S.READY, _SE.RELEASE): _S.IDLE,
        (_S.FAILED, _SE.RELEASE): _S.IDLE,
    },
)


# ------------------------------------------------------------------------ dispatch


class DispatchState(StrEnum):
    DISPATCHED = "dispatched"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"


class DispatchEvent(StrEnum):
    DISPATCH = "dispatch"
    START = "start"
    FINISH = "finish"
    INTERRUPT = "interrupt"


_U = DispatchState
_UE = DispatchEvent
DISPATCH: StateTable[DispatchState, DispatchEvent] = _table(
    "dispatch",
    DispatchState,
    DispatchEvent,
    {
        (None, _UE.DISPATCH): _U.DISPATCHED,
        (_U.DISPATCHED, _UE.START): _U.RUNNING,
        (_U.DISPATCHED, _UE.FINISH): _U.FINISHED,
        (_U.RUNNING, _UE.FINISH): _U.FINISHED,
        (_U.DISPATCHED, _UE.INTERRUPT): _U.INTERRUPTED,
        (_U.RUNNING, _UE.INTERRUPT): _U.INTERRUPTED,
    },
)


# ------------------------------------------------------------------------ question


class QuestionState(StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    """Its request was answered: a fact derived from the request (and kept in rows
    migrated from the first team loop), never written by the loop itself."""
    DELIVERED = "delivered"


class QuestionEvent(StrEnum):
    ASK = "ask"
    """A role's ``ask_human`` reached the loop: a request waits for the human."""
    ANSWER = "answer"
    """The human answered its request."""
    DELIVER = "deliver"
    """The answer went to the role as a turn."""


_Q = QuestionState
_QE = QuestionEvent
QUESTION: StateTable[QuestionState, QuestionEvent] = _table(
    "question",
    QuestionState,
    QuestionEvent,
    {
        (None, _QE.ASK): _Q.PENDING,
        (_Q.PENDING, _QE.ANSWER): _Q.ANSWERED,
        (_Q.PENDING, _QE.DELIVER): _Q.DELIVERED,
        (_Q.ANSWERED, _QE.DELIVER): _Q.DELIVERED,
    },
)


# --------------------------------------------------------------------------- owner


class OwnerState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"


class OwnerEvent(StrEnum):
    TAKE = "take"
    """A ``baton up`` became the project's one team loop."""
    TAKE_OVER = "take_over"
    """The recorded owner is dead (its process is gone): a new ``baton up`` takes its place."""
    RELEASE = "release"
    """The owner stopped and let go of the project."""


_O = OwnerState
_OE = OwnerEvent
OWNER: StateTable[OwnerState, OwnerEvent] = _table(
    "owner",
    OwnerState,
    OwnerEvent,
    {
        (None, _OE.TAKE): _O.RUNNING,
        (_O.STOPPED, _OE.TAKE): _O.RUNNING,
        (_O.RUNNING, _OE.TAKE_OVER): _O.RUNNING,
        (_O.RUNNING, _OE.RELEASE): _O.STOPPED,
    },
)

MACHINES: tuple[StateTable[Any, Any], ...] = (TASK, SLOT, DISPATCH, QUESTION, OWNER)
"""Every team lifecycle, in the order the docs show them."""
