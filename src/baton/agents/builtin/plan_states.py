"""A plan entry of the built-in agent as a lifecycle table: one entry per runbook step.

The agent shows its runbook as an ACP plan (``pending`` → ``in_progress`` →
``completed``, ACP's own words): every step is planned, started once, finished once.
How the step ended (succeeded, failed, denied, cancelled) is the tool call's status,
not the plan's: ACP's plan entry has no failed state.
"""

from __future__ import annotations

from enum import StrEnum

from baton.statetable import StateTable

__all__ = ["PLAN_ENTRY", "EntryEvent", "EntryState"]


class EntryState(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class EntryEvent(StrEnum):
    PLAN = "plan"
    """The runbook was read: every step is in the plan."""
    START = "start"
    FINISH = "finish"
    """The step ended, however it ended (its tool call says how)."""


PLAN_ENTRY: StateTable[EntryState, EntryEvent] = StateTable(
    "plan_entry",
    EntryState,
    EntryEvent,
    {
        (None, EntryEvent.PLAN): EntryState.PENDING,
        (EntryState.PENDING, EntryEvent.START): EntryState.IN_PROGRESS,
        (EntryState.IN_PROGRESS, EntryEvent.FINISH): EntryState.COMPLETED,
    },
)
