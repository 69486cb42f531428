"""What the doorbell emits: a TASK that arrived for a role, or an inbox entry it refused.

The team loop stores each refusal as a ``security.payload_rejected`` event
(:func:`refusal_payload`), display-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from baton.events.model import SecurityPayloadRejected
from baton.intake.screen import ScreenReason
from baton.security.display import neutralize_terminal

__all__ = ["DoorbellEvent", "RefusalReason", "TaskArrived", "TaskRefused", "refusal_payload"]


RefusalReason = Literal[
    ScreenReason,
    "bad_name",
    "invalid_envelope",
    "invalid_relation",
    "unknown_recipient",
    "state_ambiguous",
    "doorbell_error",
]


@dataclass(frozen=True, slots=True)
class TaskArrived:
    """A valid inbox TASK for a configured role (or for the human)."""

    task_id: str
    recipient: str
    role: str
    """The role it routes to (the human's name when ``for_human``)."""
    for_human: bool
    sender: str
    subject: str
    parent: str | None
    priority: str
    source: Literal["drain", "watch", "rescan"]
    detected_at: float
    """``time.monotonic()`` when the doorbell learned of the file."""
    emitted_at: float
    published_ns: int = 0
    """Wall-clock ns when the file was linked into the inbox (its ``st_ctime``)."""


@dataclass(frozen=True, slots=True)
class TaskRefused:
    """An inbox entry baton will not dispatch, and what it did about it."""

    name: str
    reason: RefusalReason
    message: str
    task_id: str | None = None
    recipient: str | None = None
    issue_id: str | None = None
    quarantined_to: Path | None = None
    emitted_at: float = 0.0


DoorbellEvent = TaskArrived | TaskRefused


def refusal_payload(event: TaskRefused) -> SecurityPayloadRejected:
    """The stored event for a refusal (``security.payload_rejected``, control ``fcop_intake``)."""
    where = (
        f"; quarantined to {event.quarantined_to}" if event.quarantined_to else "; left in place"
    )
    issue = f"; {event.issue_id}" if event.issue_id else ""
    return SecurityPayloadRejected(
        control="fcop_intake",
        subject=neutralize_terminal(event.name),
        reason=f"{event.reason}: {neutralize_terminal(event.message)}{where}{issue}",
    )
