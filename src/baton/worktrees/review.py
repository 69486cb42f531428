"""A task branch's change as the review document carries it, bounded to fit (pure).

The request document has a hard size limit (:data:`~baton.request_model.documents.MAX_DOCUMENT_BYTES`,
refused, never cut, at the ledger); what a review shows of a change is a view of git,
not authoritative data, so it is fitted here instead: the unified diff goes first
when the whole does not fit (the note says where to read it), then files beyond the
first ones (counted). Counts, commits and conflicts are always whole.
"""

from __future__ import annotations

from baton.request_model.documents import (
    BranchConflict,
    ChangedFileView,
    CommitView,
    ReviewChanges,
)
from baton.worktrees.repo import Preflight, TreeChange

__all__ = ["REVIEW_BUDGET_BYTES", "review_changes"]

REVIEW_BUDGET_BYTES = 150 * 1024
"""What the change may take of a review document (the rest is the summary and ids)."""
MAX_FILES = 500
MAX_COMMITS = 100


def _size(changes: ReviewChanges) -> int:
    return len(changes.model_dump_json().encode("utf-8"))


def review_changes(
    change: TreeChange,
    preflight: Preflight | None,
    *,
    task_id: str,
    merge_refused: str | None = None,
    budget: int = REVIEW_BUDGET_BYTES,
) -> ReviewChanges:
    files = [
        ChangedFileView(
            status=f.status, path=f.path, old_path=f.old_path, added=f.added, removed=f.removed
        )
        for f in change.files
    ]
    full = ReviewChanges(
        branch=change.branch,
        base=change.base,
        head=change.head,
        merge_base=change.merge_base,
        files=tuple(files[:MAX_FILES]),
        more_files=max(0, len(files) - MAX_FILES),
        added=change.added,
        removed=change.removed,
        commits=tuple(
            CommitView(commit=c.commit, author=c.author, subject=c.subject)
            for c in change.commits[:MAX_COMMITS]
        ),
        diff=change.diff,
        note=change.note,
        base_conflicts=preflight.base_conflicts if preflight else (),
        branch_conflicts=tuple(
            BranchConflict(branch=b, paths=p)
            for b, p in sorted((preflight.branch_conflicts if preflight else {}).items())
        ),
        merge_refused=merge_refused,
    )
    if _size(full) <= budget:
        return full
    where = f"`baton diff {task_id}` or `git diff {change.base}...{change.branch}`"
    fitted = full.model_copy(
        update={"diff": None, "note": f"the diff is too large to show here; read it with {where}"}
    )
    keep = len(fitted.files)
    while _size(fitted) > budget and keep > 0:
        keep //= 2
        fitted = fitted.model_copy(
            update={"files": full.files[:keep], "more_files": len(files) - keep}
        )
    return fitted
