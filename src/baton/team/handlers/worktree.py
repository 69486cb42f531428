"""A task tree's own branch: made before its first turn, merged when the human approves.

:mod:`baton.team.workspaces` does the git work, each step bracketed by record moves;
these handlers decide what the TASK does when it cannot happen: a tree that cannot
have a branch needs attention (with the reason and the fix), a merge the base cannot
take now opens a fresh review that says why (the human fixes it, or sends the work
back to rebase), never a half-merged checkout.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from baton.team import steps
from baton.team.attention import Escalations
from baton.team.book import TaskBook
from baton.team.handlers.outcome import Outcome, Then
from baton.team.handlers.review import OpenHumanReview
from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.workspaces import Workspaces, WorkspaceUnavailable
from baton.worktrees.git import GitError
from baton.worktrees.repo import MergeRefused

__all__ = ["MergeTreeBranch", "PrepareTreeWorktree"]


@dataclass(frozen=True, slots=True)
class PrepareTreeWorktree:
    book: TaskBook
    workspaces: Workspaces
    escalations: Escalations

    async def __call__(
        self, step: steps.PrepareWorktree, facts: Facts, slot: Slot | None
    ) -> Outcome:
        root = await asyncio.to_thread(self.book.facts.record, step.root)
        subject = root.subject if root is not None else facts.task.subject
        try:
            await self.workspaces.prepare(step.root, subject)
        except (WorkspaceUnavailable, GitError) as exc:
            await self.escalations.escalate_locked(
                facts.task.task_id, f"its task tree cannot have its own branch: {exc}"
            )
            return Then.STOP
        return Then.DECIDE_AGAIN


@dataclass(frozen=True, slots=True)
class MergeTreeBranch:
    """Merge before T4: the approval takes effect only once the base holds the work."""

    book: TaskBook
    workspaces: Workspaces
    reviews: OpenHumanReview
    human: str

    async def __call__(self, step: steps.MergeTree, facts: Facts, slot: Slot | None) -> Outcome:
        subject = facts.task.subject
        message = (
            f"baton: merge {facts.worktree.branch if facts.worktree else ''} — {subject}\n\n"
            f"{facts.task.task_id}, approved by {self.human}."
        )
        try:
            await self.workspaces.merge(facts.task.task_id, message)
        except MergeRefused as exc:
            await self.reviews.reopen(facts, step.request_id, merge_refused=exc.reason)
            return Then.STOP
        return Then.DECIDE_AGAIN
