"""What the CLI and the web use of a task tree's branch and worktree: records, preflight,
review changes."""

from baton.worktrees.git import GitError
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.repo import Preflight, TreeChange
from baton.worktrees.review import review_changes
from baton.worktrees.states import WorktreeState

__all__ = [
    "GitError",
    "Preflight",
    "TreeChange",
    "WorktreeRecord",
    "WorktreeState",
    "review_changes",
]
