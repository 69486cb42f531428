"""A task tree's worktree record (``team_worktrees``), frozen: a move is a new record."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from baton.store import team_sql
from baton.store.tx import Row
from baton.worktrees.states import WorktreeState

__all__ = ["MergeRule", "WorktreeRecord"]

MergeRule = Literal["merge", "squash", "ff"]
"""How an approved tree reaches its base (``[team] merge``)."""


@dataclass(frozen=True, slots=True)
class WorktreeRecord:
    root_task: str
    """The root TASK (a human filed it); its children work here too."""
    state: WorktreeState
    branch: str
    """``baton/<short-id>-<slug>``."""
    path: str
    """The worktree folder (absolute)."""
    base_ref: str
    """The branch it came from and merges into (``refs/heads/…``)."""
    base_commit: str
    """The base's commit when the branch was made."""
    created_at: str
    updated_at: str
    head_commit: str | None = None
    """The branch head after the last checkpoint."""
    merge_commit: str | None = None
    """While merging and after: the commit the base moves to."""
    merge_rule: MergeRule | None = None
    salvage_ref: str | None = None
    reason: str | None = None
    """Why it was dropped, or why its last merge was refused."""
    version: int = 1

    @property
    def worktree(self) -> Path:
        return Path(self.path)

    @property
    def base_branch(self) -> str:
        """``main`` for ``refs/heads/main``."""
        return self.base_ref.removeprefix("refs/heads/")

    def row(self) -> dict[str, Any]:  # Any: a store row's column values (SQL edge)
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "state": self.state.value}

    @classmethod
    def from_row(cls, row: Row) -> WorktreeRecord:
        values = dict(zip(team_sql.WORKTREE_COLUMNS, row, strict=True))
        values["state"] = WorktreeState(values["state"])
        return cls(**values)
