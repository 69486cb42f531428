"""A task tree's worktree as a lifecycle table: every git step recorded before and after.

::

    creating ──created──► live ──merge──► merging ──merged──► merged ──remove──► removed
        │                  │  ▲              │                  │
        │                  │  └───abort──────┘                  └──keep──► kept
        └───salvage───►  salvaging ◄──salvage── (live)   (the branch moved after the merge)
                           │
                        salvaged ──restore──► restored

Each arrow is one durable record move; the git work between two moves is idempotent
and re-derivable from git itself, so a crash anywhere is finished (or undone) by the
next ``baton up`` without guessing (:mod:`baton.worktrees.recovery`): ``creating``
completes the branch and worktree; ``merging`` checks whether the base already holds
the merge commit; ``salvaging`` checks whether the salvage ref already names the head.
"""

from __future__ import annotations

from enum import StrEnum

from baton.errors import BatonError
from baton.statetable import StateTable

__all__ = ["WORKTREE", "IllegalWorktreeMove", "WorktreeEvent", "WorktreeState"]


class IllegalWorktreeMove(BatonError):
    """A worktree record move the table does not allow (a bug, never user input)."""


class WorktreeState(StrEnum):
    CREATING = "creating"
    """The branch and worktree are being made (recorded before the first git command)."""
    LIVE = "live"
    """Agents work in it; every turn's end is checkpointed onto the branch."""
    MERGING = "merging"
    """Approved: the merge commit is computed and being applied to the base."""
    MERGED = "merged"
    """The base holds the work; the worktree can go."""
    SALVAGING = "salvaging"
    """Dropped: the exact head (uncommitted files included) is being saved."""
    SALVAGED = "salvaged"
    """Its head is kept under ``refs/baton/salvage/<task>``; the worktree is gone."""
    RESTORED = "restored"
    """A salvaged tree brought back as a branch (``baton salvage restore``)."""
    REMOVED = "removed"
    """Merged and cleaned up: the worktree folder and the branch are gone."""
    KEPT = "kept"
    """Merged, but the branch moved after the merge (a holder's push, an agent's commit):
    the worktree is gone, the commits the merge did not take are kept (on the branch, or
    under ``refs/baton/kept/<task>``) and a human decides what becomes of them."""


class WorktreeEvent(StrEnum):
    CREATE = "create"
    CREATED = "created"
    CHECKPOINT = "checkpoint"
    """What a turn left was committed to the branch (the head moved, the state did not)."""
    MERGE = "merge"
    MERGED = "merged"
    ABORT = "abort"
    """The merge was refused when applied (the base moved, the checkout was not clean)."""
    REMOVE = "remove"
    KEEP = "keep"
    """The removal found work newer than the merge: it is kept, the human is told."""
    SALVAGE = "salvage"
    SALVAGED = "salvaged"
    RESTORE = "restore"


_S = WorktreeState
_E = WorktreeEvent

WORKTREE: StateTable[WorktreeState, WorktreeEvent] = StateTable(
    "worktree",
    WorktreeState,
    WorktreeEvent,
    {
        (None, _E.CREATE): _S.CREATING,
        (_S.CREATING, _E.CREATED): _S.LIVE,
        (_S.LIVE, _E.CHECKPOINT): _S.LIVE,
        (_S.LIVE, _E.MERGE): _S.MERGING,
        (_S.MERGING, _E.MERGED): _S.MERGED,
        (_S.MERGING, _E.ABORT): _S.LIVE,
        (_S.MERGED, _E.REMOVE): _S.REMOVED,
        (_S.MERGED, _E.KEEP): _S.KEPT,
        (_S.CREATING, _E.SALVAGE): _S.SALVAGING,
        (_S.LIVE, _E.SALVAGE): _S.SALVAGING,
        (_S.SALVAGING, _E.SALVAGED): _S.SALVAGED,
        (_S.SALVAGED, _E.RESTORE): _S.RESTORED,
    },
    illegal=lambda message, state, event: IllegalWorktreeMove(message),
)
