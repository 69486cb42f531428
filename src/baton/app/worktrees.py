"""Task trees from the command line and the page: read their change, drop one, restore one.

The composition root's worktree surface: what ``baton diff``, ``baton worktrees``,
``baton task drop`` and ``baton salvage restore`` (and the dashboard) call, wired
here once over the store, the team's records and :mod:`baton.worktrees`. Reads need
only the store and git; a drop goes to the running ``baton up`` as a control row, or,
when none runs, is done here under the project's ownership (no loop can start
meanwhile); a restore records its move in a short run of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from baton.app.root import Baton
from baton.errors import BatonError
from baton.events.sequencer import utc_now
from baton.fcop_port.project import open_context
from baton.request_model.documents import ReviewRequest
from baton.requests.ledger import RequestRecord
from baton.store import team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.controls import request_drop
from baton.team.drop import DropReport
from baton.team.facts import tree_root
from baton.team.records import TaskRecord
from baton.team.workspaces import Workspaces
from baton.worktrees.git import GitError
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.repo import Preflight, Repository, TreeChange
from baton.worktrees.states import WorktreeState

__all__ = [
    "FULL_DIFF_BYTES",
    "DropPosted",
    "NoTree",
    "all_trees",
    "approval_refusal",
    "change_of",
    "drop_tree",
    "preflight_of",
    "restore_tree",
    "tree_of",
]

FULL_DIFF_BYTES = 64 * 1024 * 1024
"""What ``baton diff`` shows at most (larger: git's own ``git diff`` is the way)."""


class NoTree(BatonError):
    """The TASK's tree has no branch of its own (isolation off, or not started yet)."""


@dataclass(frozen=True, slots=True)
class DropPosted:
    """The running ``baton up`` was asked to drop the tree (an outbox row)."""

    task_id: str
    outbox_id: int


def tree_of(store: Store, task_id: str) -> tuple[str, WorktreeRecord | None]:
    """``task_id``'s tree root and that tree's worktree record (None: it has none)."""

    def read(tx: Tx) -> tuple[str, WorktreeRecord | None]:
        row = team_sql.TASKS.get(tx, task_id)
        record = TaskRecord.from_row(row) if row is not None else None
        root = tree_root(tx, task_id, record)
        found = team_sql.WORKTREES.get(tx, root)
        return root, WorktreeRecord.from_row(found) if found is not None else None

    return store.read_tx(read)


def all_trees(store: Store) -> list[WorktreeRecord]:
    rows = store.read_tx(lambda tx: team_sql.WORKTREES.where(tx, "", ()))
    return sorted((WorktreeRecord.from_row(r) for r in rows), key=lambda r: r.created_at)


def _repo(project: Path) -> Repository:
    repo = Repository.find(project)
    if repo is None:
        raise NoTree(f"{project} is not a git repository: its tasks have no branches")
    return repo


def change_of(project: Path, record: WorktreeRecord, *, full: bool = False) -> TreeChange:
    """The tree's change against its base (the review's bound, or ``full``'s)."""
    repo = _repo(project)
    if full:
        return repo.change(record, max_diff_bytes=FULL_DIFF_BYTES)
    return repo.change(record)


def preflight_of(project: Path, store: Store, record: WorktreeRecord) -> Preflight | None:
    """The merge tried against the base tip and every other live branch (live trees only)."""
    if record.state is not WorktreeState.LIVE:
        return None
    others = [r for r in all_trees(store) if r.state is WorktreeState.LIVE]
    return _repo(project).preflight(record, others)


def approval_refusal(project: Path, store: Store, record: RequestRecord) -> str | None:
    """Why approving this review could not merge now (None: it could, or it has no tree).

    The merge step refuses a tree whose branch conflicts with its base tip (and opens the
    review again); the CLI and the page ask first, so the request stays pending with the
    reason instead of an approval that comes back.
    """
    doc = record.document
    if not isinstance(doc, ReviewRequest) or doc.changes is None:
        return None
    _, tree = tree_of(store, doc.task_id)
    if tree is None:
        return None
    try:
        preflight = preflight_of(project, store, tree)
    except (GitError, NoTree):
        return None  # the merge step decides and says why (the review opens again)
    if preflight is None or preflight.clean:
        return None
    files = ", ".join(preflight.base_conflicts[:10])
    more = len(preflight.base_conflicts) - 10
    return f"not merged: {tree.branch} conflicts with {tree.base_branch} in {files}" + (
        f" (and {more} more)" if more > 0 else ""
    )


async def drop_tree(project: Path, task_id: str, reason: str) -> DropReport | DropPosted:
    """Drop ``task_id``'s tree: through the running ``baton up``, else right here."""
    async with Baton.open(project) as baton:
        posted = request_drop(baton.store, task_id, reason=reason, via="cli")
        if posted is not None:
            return DropPosted(task_id, posted)
        ctx = open_context(project)
        from baton.team.loop import TeamLoop

        async def no_sessions(*_: object) -> object:  # a drop never starts an agent
            raise BatonError("a drop does not start role sessions")

        async with baton.run(kind="drop", agent="-", cwd=ctx.project_dir) as run:
            loop = TeamLoop(
                port=ctx.port,
                team=ctx.team,
                factory=no_sessions,  # type: ignore[arg-type]
                store=baton.store,
                journal=run.emitter,
                run_id=run.run_id,
                ledger=baton.ledger,
                state_dir=ctx.state_dir,
            )
            try:
                report = await loop.drop_now(task_id, reason)
            finally:
                loop.sweeper.close()
            run.status = "completed"
            return report


async def restore_tree(
    project: Path, task_id: str, branch: str | None
) -> tuple[WorktreeRecord, str]:
    """A dropped tree's saved head back as a branch (its old name unless ``branch``)."""
    async with Baton.open(project) as baton:
        root, _ = tree_of(baton.store, task_id)
        ctx = open_context(project)
        async with baton.run(kind="salvage", agent="-", cwd=ctx.project_dir) as run:
            workspaces = Workspaces.open(
                ctx.project_dir,
                ctx.team.isolation,
                store=baton.store,
                journal=run.emitter,
                now=utc_now,
            )
            restored = await workspaces.restore(root, branch)
            run.status = "completed"
            return restored
