"""Where one TASK is, and baton's claim of it: what :func:`~.inspect.inspect` finds."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TaskLocation"]


@dataclass(frozen=True, slots=True)
class TaskLocation:
    """One TASK's location and baton's claim of it, found in O(1) without writing."""

    task_id: str
    stages: tuple[str, ...]
    """Every stage holding ``TASK-….md`` (two during a move's window, none if absent)."""
    claim_receipt: str | None
    """Workspace-relative path of baton's T2 receipt, when one exists."""
    claim_stage: str | None = None
    """That receipt's stage: PREPARED, TARGET_DURABLE or COMMITTED."""
    claim_state: str | None = None
    """fcop's classification of it (``fcop.v4.receipts.classify``): NOT_COMMITTED,
    RECOVERABLE_DUPLICATE, COMMITTED, DIVERGENT_DUPLICATE or INDETERMINATE."""
    temporaries: tuple[str, ...] = ()
    """fcop ``publish`` temporaries of this TASK left in ``inbox/`` or ``active/`` by a crash."""

    @property
    def two_stage(self) -> bool:
        return len(self.stages) > 1

    @property
    def needs_recovery(self) -> bool:
        """A crash left something :meth:`Lifecycle.recover` settles."""
        return (
            self.two_stage
            or bool(self.temporaries)
            or (self.claim_stage is not None and self.claim_stage != "COMMITTED")
        )
