"""What the pages show of a task tree on its own branch: its change, the preflight now,
and where its merge stands.

The review document carries the change as it was when the review opened
(:class:`~baton.request_model.documents.ReviewChanges`); the base and the other branches move
after that (another tree merged), so a pending review card asks git again for the
merge preflight (:func:`baton.app.worktrees.preflight_of`) and falls back to the
document's when git cannot answer. The task page reads the tree's change itself
(:func:`baton.app.worktrees.change_of`), shaped like a review's by
:func:`~baton.worktrees.review.review_changes`, so one renderer draws both
(:mod:`baton.web.diffview`). Blocking git and store reads run in worker threads.

A send-back to rebase is a rejection whose reason is the preflight's own prompt
(:meth:`~baton.worktrees.repo.Preflight.rebase_prompt`, with the conflicting files):
the role owning the branch reads it in its revision prompt, as any rejection reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from baton.app.facade.fcop import SlotAccess
from baton.app.facade.requests import (
    BranchConflict,
    RequestRecord,
    ReviewAnswer,
    ReviewChanges,
    ReviewRequest,
    State,
)
from baton.app.facade.store import Store
from baton.app.facade.worktrees import (
    GitError,
    Preflight,
    WorktreeRecord,
    WorktreeState,
    review_changes,
)
from baton.app.worktrees import NoTree, change_of, preflight_of, tree_of
from baton.jsontypes import JsonObject

__all__ = [
    "TASK_PAGE_BUDGET",
    "ReviewTree",
    "TaskTree",
    "merge_state",
    "rebase_reason",
    "review_tree",
    "task_tree",
]

TASK_PAGE_BUDGET: Final = 2 * 1024 * 1024
"""What a tree's change may take on its task page (the diff itself is bounded by git's read)."""
_DONE: Final = (WorktreeState.MERGED, WorktreeState.REMOVED, WorktreeState.KEPT)
_DROPPED: Final = (WorktreeState.SALVAGING, WorktreeState.SALVAGED, WorktreeState.RESTORED)


def rebase_reason(base: str, conflicts: tuple[str, ...]) -> str:
    """The reason a review is sent back to rebase with: the preflight's prompt."""
    return Preflight(base_tip="", base_conflicts=conflicts).rebase_prompt(base)


def merge_state(
    record: WorktreeRecord | None, request: RequestRecord | None, *, team_loop_running: bool
) -> str | None:
    """Where the tree's merge stands, in one sentence (None: nothing to say)."""
    if record is None:
        return None
    branch, base = record.branch, record.base_branch
    if record.state in _DONE:
        commit = f" ({record.merge_commit[:10]})" if record.merge_commit else ""
        note = record.reason if record.state is WorktreeState.KEPT else None
        kept = f" {note[:1].upper()}{note[1:]}." if note else ""
        return f"Merged into {base}{commit}.{kept}"
    if record.state is WorktreeState.MERGING:
        return f"Merging {branch} into {base}…"
    if record.state in _DROPPED:
        kept = f" under {record.salvage_ref}" if record.salvage_ref else ""
        return f"Dropped: its work is kept{kept}."
    answer = request.answer if request is not None else None
    if not isinstance(answer, ReviewAnswer) or answer.decision != "approve":
        return None
    assert request is not None
    if request.state is State.ANSWERED:
        if team_loop_running:
            return f"Accepted: baton up is merging {branch} into {base}."
        return f"Accepted: {branch} is merged into {base} when `baton up` runs."
    if record.reason:  # acted on and still live: the merge was refused, a new review is open
        return f"Not merged: {record.reason}. The review is open again."
    return None


@dataclass(frozen=True, slots=True)
class ReviewTree:
    """A review card's tree: the change to show, how fresh its preflight is, and the
    merge's state (a settled card) or the rebase reason (a pending one in conflict)."""

    changes: ReviewChanges
    when: str | None
    """How fresh its preflight is; None: none to show (merged or dropped)."""
    merge: str | None = None
    rebase: str | None = None
    waiting: bool = False
    """An accepted tree not merged yet: the page refreshes the card when it moves."""


@dataclass(frozen=True, slots=True)
class TaskTree:
    """A task page's tree: its root, record, change (None: git could not say) and note."""

    root: str
    record: WorktreeRecord
    changes: ReviewChanges | None
    when: str | None
    """How fresh the preflight is; None: there is none (the tree is not live)."""
    note: str = ""
    merge: str | None = None

    def data(self) -> JsonObject:
        """As ``GET /api/tasks/{id}`` serves it (``changes``: a review's shape)."""
        r = self.record
        return {
            "root_task": self.root,
            "state": r.state.value,
            "branch": r.branch,
            "base": r.base_branch,
            "head": r.head_commit,
            "merge_commit": r.merge_commit,
            "salvage_ref": r.salvage_ref,
            "reason": r.reason,
            "merge": self.merge,
            "changes": self.changes.model_dump(mode="json") if self.changes else None,
            "preflight": self.when,
            "note": self.note,
        }


def _team_loop_running(store: Store) -> bool:
    return SlotAccess(store, "").team_loop_alive()


def _fresh(
    project: Path, store: Store, record: WorktreeRecord
) -> tuple[Preflight | None, str | None]:
    """The preflight now, or why git could not say."""
    try:
        return preflight_of(project, store, record), None
    except (GitError, NoTree) as exc:
        return None, str(exc)


def _with_preflight(changes: ReviewChanges, preflight: Preflight) -> ReviewChanges:
    return changes.model_copy(
        update={
            "base_conflicts": preflight.base_conflicts,
            "branch_conflicts": tuple(
                BranchConflict(branch=b, paths=p)
                for b, p in sorted(preflight.branch_conflicts.items())
            ),
        }
    )


def _review_tree(
    project: Path | None, store: Store, record: RequestRecord, doc: ReviewRequest
) -> ReviewTree | None:
    changes = doc.changes
    if changes is None:
        return None
    when: str | None = "when the review opened"
    tree: WorktreeRecord | None = None
    if project is not None:
        _, tree = tree_of(store, doc.task_id)
    pending = record.state is State.PENDING
    if pending and project is not None and tree is not None:
        preflight, failed = _fresh(project, store, tree)
        if preflight is not None:
            changes, when = _with_preflight(changes, preflight), "checked just now"
        elif failed:
            when = f"when the review opened; now: {failed}"
    if pending:
        rebase = (
            rebase_reason(changes.base, changes.base_conflicts) if changes.base_conflicts else None
        )
        return ReviewTree(changes, when, rebase=rebase)
    merge = merge_state(tree, record, team_loop_running=_team_loop_running(store))
    if tree is not None and tree.state in (*_DONE, *_DROPPED):
        when = None  # merged or dropped: no merge to preflight any more
    approved = isinstance(record.answer, ReviewAnswer) and record.answer.decision == "approve"
    waiting = tree is not None and (
        tree.state is WorktreeState.MERGING or (approved and record.state is State.ANSWERED)
    )
    return ReviewTree(changes, when, merge=merge, waiting=waiting)


async def review_tree(
    project: Path | None, store: Store, record: RequestRecord
) -> ReviewTree | None:
    """A review card's tree (None: the review's task has no branch of its own)."""
    doc = record.document
    if not isinstance(doc, ReviewRequest) or doc.changes is None:
        return None
    return await asyncio.to_thread(_review_tree, project, store, record, doc)


def _task_tree(project: Path, store: Store, task_id: str) -> TaskTree | None:
    root, record = tree_of(store, task_id)
    if record is None:
        return None
    merge = merge_state(record, None, team_loop_running=False)
    # Merged: the base holds the branch, so "what the branch adds to the base" is
    # nothing now; what it brought is its head against where it started.
    shown = (
        dataclasses.replace(record, base_ref=record.base_commit)
        if record.state in _DONE
        else record
    )
    try:
        change = change_of(project, shown)
    except (GitError, NoTree) as exc:
        return TaskTree(root, record, None, None, note=f"git cannot show its change: {exc}")
    change = dataclasses.replace(change, base=record.base_branch)
    preflight, failed = _fresh(project, store, record)
    when = "checked just now" if preflight is not None else None
    note = f"the merge preflight could not run: {failed}" if failed else ""
    changes = review_changes(change, preflight, task_id=root, budget=TASK_PAGE_BUDGET)
    return TaskTree(root, record, changes, when, note=note, merge=merge)


async def task_tree(project: Path | None, store: Store, task_id: str) -> TaskTree | None:
    """A task's tree and its change (None: no branch of its own, or no project here)."""
    if project is None:
        return None
    return await asyncio.to_thread(_task_tree, project, store, task_id)
