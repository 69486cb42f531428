"""After a crash: what each worktree record needs, decided from git's answers alone.

Pure: :func:`after_crash` takes the record and what git says now (:class:`GitFacts`)
and names one action; the team's workspace keeper performs it and moves the record.
A record is never left in a transient state and no work is ever dropped: leftovers
in a live worktree are checkpointed, a merge is either found done or undone (the
approval then merges again from scratch), a salvage is finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from baton.worktrees.model import WorktreeRecord
from baton.worktrees.states import WorktreeState

__all__ = ["AfterCrash", "GitFacts", "after_crash", "salvage_head"]


@dataclass(frozen=True, slots=True)
class GitFacts:
    branch_head: str | None
    """The branch's commit (None: the branch does not exist)."""
    registered: bool
    """A worktree of that branch is registered at the record's path."""
    dirty: bool
    """The worktree holds uncommitted work (untracked files included)."""
    base_holds: bool
    """The base already holds the merge commit (or the head)."""
    salvaged_head: str | None
    """What the salvage ref names (None: not saved)."""


class AfterCrash(Enum):
    NOTHING = "nothing"
    CREATE = "create"
    """Finish making the branch and worktree (each part that exists is kept)."""
    CHECKPOINT = "checkpoint"
    """A live worktree holds uncommitted work: commit it to the branch (or the branch
    moved past the record's head: a checkpoint, or the agent's own commit, made and not
    yet recorded): the record's head follows the branch."""
    MARK_MERGED = "mark_merged"
    """The base holds the merge: record it merged (then remove)."""
    UNDO_MERGE = "undo_merge"
    """The base does not hold it: back to live; the approval merges again from scratch."""
    REMOVE = "remove"
    """Merged: the worktree folder and the branch go."""
    SALVAGE = "salvage"
    """Finish saving the exact head (uncommitted work included), then remove (a live
    tree whose root was dropped: begin the salvage first)."""
    LOST = "lost"
    """The branch is gone (deleted outside baton): a human must look."""


def after_crash(record: WorktreeRecord, git: GitFacts, *, dropped: bool = False) -> AfterCrash:
    """``dropped``: the tree's root TASK was dropped (a drop that stopped before its
    salvage began is finished: the tree can never work again)."""
    state = record.state
    if dropped and state in (WorktreeState.CREATING, WorktreeState.LIVE):
        return AfterCrash.SALVAGE
    if state is WorktreeState.CREATING:
        return AfterCrash.CREATE
    if state is WorktreeState.LIVE:
        if git.branch_head is None:
            return AfterCrash.LOST
        if not git.registered:
            return AfterCrash.CREATE  # the folder was removed by hand: made again
        if git.dirty or git.branch_head != record.head_commit:
            return AfterCrash.CHECKPOINT  # leftovers, or a commit made and not yet recorded
        return AfterCrash.NOTHING
    if state is WorktreeState.MERGING:
        return AfterCrash.MARK_MERGED if git.base_holds else AfterCrash.UNDO_MERGE
    if state is WorktreeState.MERGED:
        return AfterCrash.REMOVE
    if state is WorktreeState.SALVAGING:
        return AfterCrash.SALVAGE
    return AfterCrash.NOTHING


def salvage_head(
    record: WorktreeRecord,
    *,
    checkpointed: str | None,
    branch_head: str | None,
    saved: str | None,
) -> str | None:
    """The head a salvage saves: the newest the tree had, never an older one.

    The salvage checkpoint (the worktree still there) is the newest; else the branch
    (it holds every checkpoint, the record's head may lag one); else what the salvage
    ref names already (a crash after the worktree and branch went: saving the record's
    head then would move the ref back and lose the salvage checkpoint, the dropped
    tree's uncommitted work); the record's head only when git has none of these.
    """
    return checkpointed or branch_head or saved or record.head_commit
