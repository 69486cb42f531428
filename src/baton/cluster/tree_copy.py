"""A role holder's copy of its task tree: the worktree on the worker, its branch pushed back.

With ``[team] isolation = "worktree"`` on a cluster the coordinator keeps only a tree's
branch (:class:`baton.team.workspaces.Workspaces`, remote mode); the worktree the agent
works in lives on the worker host that holds the role, in that host's checkout of the
project (:attr:`HolderSpec.workspace <baton.cluster.actor.HolderSpec>`, at the same path as
on the coordinator). The holder:

- at start fetches the branch's head from the coordinator's repository (the pushed head:
  a re-placed role continues there, never on what an older copy left on some host) and
  opens its copy detached at it; a leftover copy of this slot that differs is saved under
  ``refs/baton/stale/<task>/<slot>/before-e<epoch>`` first
  (:func:`baton.worktrees.travel.open_copy`);
- before every turn moves a copy that holds nothing of its own to the branch's newest head
  (another role of the tree pushed meanwhile: :meth:`TreeCopy.refresh`);
- after every turn commits what the agent left (the one checkpoint rule:
  :meth:`Repository.checkpoint <baton.worktrees.repo.Repository.checkpoint>`), then, under
  its epoch (the store check every fenced act passes), pushes the head as a
  compare-and-set of the branch (``--force-with-lease`` on the head it started from or
  last pushed). A push the branch refuses is a fenced-out outcome: the copy's commits
  stay under its stale ref on this host, the coordinator's branch is not moved.

Each slot has its own copy (``<label>@<slot>``): two roles of one tree on one host never
share a folder; they meet on the branch, whose every move is a compare-and-set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from baton.worktrees.git import GitFailed
from baton.worktrees.naming import ref_safe
from baton.worktrees.repo import Repository
from baton.worktrees.travel import Remote, fetch, open_copy, publish, stale_ref

__all__ = ["TreeCopy", "TreeSpec"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TreeSpec:
    """The task tree a holder works on, as the coordinator's record names it."""

    task: str
    """The tree's root TASK."""
    branch: str
    head: str
    """The record's head when the holder was specified (the pushed head may be newer)."""
    path: str
    """The tree's worktree relative to the project (``.baton/worktrees/<label>``)."""
    remote: str
    """The coordinator's repository as the workers reach it (``[cluster] git_remote``)."""


@dataclass
class TreeCopy:
    """One slot's copy of its tree on this host, for one epoch."""

    repo: Repository
    remote: Remote
    tree: TreeSpec
    worktree: Path
    cwd: Path
    """Where the agent works: the copy, at the project's place inside the repository."""
    pushed: str
    """The branch head this copy started from or last pushed (the lease of the next push)."""
    stale: str
    """Where this epoch keeps a head the coordinator's branch refused (``…/e<epoch>``)."""
    saved: str | None = None
    """The stale ref a differing leftover copy was saved under when this one opened."""

    @classmethod
    def open(cls, workspace: Path, tree: TreeSpec, *, slot: str, epoch: int) -> TreeCopy:
        """The copy at the branch's pushed head (blocking: the holder runs it in a thread)."""
        repo = Repository.find(workspace)
        if repo is None:
            raise GitFailed(("rev-parse",), 1, f"{workspace} is not a git checkout on this host")
        remote = Remote.of(repo, tree.remote)
        head = fetch(repo, remote, tree.task, tree.branch)
        if head != tree.head and not repo.is_ancestor(tree.head, head):
            log.warning("%s no longer holds %s: continuing on its head", tree.branch, tree.head)
        base = workspace / tree.path
        worktree = base.with_name(f"{base.name}@{ref_safe(slot, empty='slot')}")
        repo.exclude(worktree.parent)
        saved = open_copy(
            repo,
            worktree,
            head,
            stale=stale_ref(tree.task, slot, epoch, leftover=True),
            message=f"baton: {slot}'s leftover copy of {tree.task}, saved as epoch {epoch} began",
        )
        try:
            inside = workspace.resolve().relative_to(repo.root.resolve())
        except ValueError:
            inside = Path()
        stale = stale_ref(tree.task, slot, epoch)
        return cls(repo, remote, tree, worktree, worktree / inside, head, stale, saved)

    def refresh(self) -> bool:
        """Before a turn: the copy moved to the branch's newest head when another role of
        the tree pushed since, if the copy holds nothing of its own (clean, at the head it
        pushed); whether it moved. A copy with unpushed work stays: its push decides."""
        head = fetch(self.repo, self.remote, self.tree.task, self.tree.branch)
        if head == self.pushed:
            return False
        if self.repo.dirty(self.worktree) or self.repo.head(self.worktree) != self.pushed:
            return False
        self.repo.inside(self.worktree).run("checkout", "-q", "--detach", head)
        self.pushed = head
        return True

    def commit(self, message: str) -> str:
        """What the agent left, committed (as baton); the copy's head."""
        return self.repo.checkpoint(self.worktree, message)

    def push(self, head: str) -> bool:
        """The branch moved to ``head`` if it is still where this copy last saw it; else
        False, and ``head`` kept under :attr:`stale` (nothing is lost on a refusal)."""
        if publish(self.repo, self.remote, self.tree.branch, head, self.pushed):
            self.pushed = head
            return True
        self.stale = self.repo.save(self.stale, head)
        return False

    def close(self) -> None:
        """Remove the copy when nothing in it is only here (clean, its head pushed); else
        it stays for the next holder of the slot on this host, which saves it first. The
        removal is git's clean-only one: a file written after the look refuses it."""
        if not self.worktree.exists():
            return
        if self.repo.dirty(self.worktree) or self.repo.head(self.worktree) != self.pushed:
            return
        self.repo.git.run("worktree", "remove", str(self.worktree), check=False)
