"""A unit of work for a role's slot workers: a TASK, for its own work or for a review."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Job"]


@dataclass(frozen=True, slots=True)
class Job:
    """A TASK for a slot worker of ``role`` (its own work, or a review of it)."""

    task_id: str
    role: str
    review: bool = False
