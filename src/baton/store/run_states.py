"""A run's status as a lifecycle table: born ``running``, finished once.

A run (a ``baton run``, a ``baton up``, a role holder's run ...) is recorded
``running`` by its owner and finished by it with how it went, or found
``interrupted`` by a later baton when its owner died (:mod:`baton.app.recovery`).
Every status but ``running`` is terminal: finishing a run again with another status
is illegal and raises :class:`~baton.errors.StoreError` (repeating the same one is
a no-op, and a judge other than the owner leaves a finished run alone: both are the
caller's rules, :func:`baton.store.core_tables.finish_run_tx`).

:data:`RunStatus` is the same set spelled as the literals callers write
(``run.status = "completed"``); :data:`RUN_STATUSES` is derived from the table.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal

from baton.errors import StoreError
from baton.statetable import StateTable

__all__ = [
    "FINISH",
    "RUN_STATUSES",
    "TABLE",
    "TERMINAL_RUN_STATUSES",
    "RunEvent",
    "RunState",
    "RunStatus",
]


class RunState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    """The process that owned the run died (found on the next start)."""


class RunEvent(StrEnum):
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    INTERRUPT = "interrupt"


def _illegal(message: str, state: str | None, event: str) -> Exception:
    return StoreError(message)


TABLE: StateTable[RunState, RunEvent] = StateTable(
    "run",
    RunState,
    RunEvent,
    {
        (RunState.RUNNING, RunEvent.COMPLETE): RunState.COMPLETED,
        (RunState.RUNNING, RunEvent.FAIL): RunState.FAILED,
        (RunState.RUNNING, RunEvent.CANCEL): RunState.CANCELLED,
        (RunState.RUNNING, RunEvent.INTERRUPT): RunState.INTERRUPTED,
    },
    starts=frozenset({RunState.RUNNING}),
    illegal=_illegal,
)

FINISH: Final = {dst: event for (_, event), dst in TABLE.transitions.items()}
"""The event that finishes a run with each terminal status."""

RunStatus = Literal["running", "completed", "failed", "cancelled", "interrupted"]
""":class:`RunState` as the literals callers write (a test holds the two together)."""

RUN_STATUSES: Final[frozenset[str]] = frozenset(s.value for s in RunState)
TERMINAL_RUN_STATUSES: Final[frozenset[str]] = frozenset(s.value for s in TABLE.terminal)
