"""The coordinator's side of trees whose worktrees live on worker hosts (``[cluster]``).

:class:`Workspaces` in remote mode keeps the branch only: preparing makes no worktree, a
checkpoint records the head a holder pushed, and recovery after a crash, in each record
state, finishes or undoes the step from the branch refs without ever making a worktree
in the coordinator's checkout (the real git repository, a real SQLite store).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.events.sequencer import Sequencer, utc_now
from baton.runner.emitter import EventEmitter
from baton.store import team_sql
from baton.store.sqlite import SqliteStore
from baton.store.tx import Tx
from baton.team.workspaces import Workspaces
from baton.team_config import Isolation
from baton.worktrees.git import BATON_IDENTITY
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.naming import salvage_ref
from baton.worktrees.recovery import AfterCrash
from baton.worktrees.repo import Repository
from baton.worktrees.states import WorktreeState
from tests.support.records import run_record
from tests.worktrees.conftest import planned, sh

ROOT = "TASK-20261206-aaaa1111"


@pytest.fixture
async def workspaces(repo: Repository, tmp_path: Path) -> AsyncIterator[Workspaces]:
    store = SqliteStore.open(tmp_path / "state" / "baton.db")
    store.create_run(run_record("run-1", kind="up"))
    yield Workspaces(
        repo=repo,
        isolation=Isolation(remote=True),
        project=repo.root,
        store=store,
        journal=EventEmitter(Sequencer("run-1"), store),
        now=utc_now,
    )
    store.close()


def pushed(repo: Repository, parent: str, name: str = "pushed.txt") -> str:
    """A commit on top of ``parent`` as a holder's push brings it (no worktree here)."""
    blob = repo.git.run("hash-object", "-w", "--stdin", input=b"from a worker\n").stdout
    listing = repo.git.text("ls-tree", parent)
    entry = f"100644 blob {blob.decode().strip()}\t{name}\n"
    tree = repo.git.run("mktree", input=(listing + "\n" + entry).encode()).stdout.decode().strip()
    made = repo.git.run(
        "commit-tree", tree, "-p", parent, "-m", "a worker's turn", env=BATON_IDENTITY
    )
    return made.stdout.decode().strip()


async def put(workspaces: Workspaces, record: WorktreeRecord) -> None:
    def write(tx: Tx) -> None:
        team_sql.WORKTREES.insert(tx, record.row())

    await workspaces.journal.commit([], write)


def no_worktree_here(repo: Repository, record: WorktreeRecord) -> None:
    assert repo.worktrees().keys() == {repo.root.resolve()}
    assert not record.worktree.exists()


async def test_prepare_makes_the_branch_only_and_a_checkpoint_records_the_pushed_head(
    repo: Repository, workspaces: Workspaces
) -> None:
    record = await workspaces.prepare(ROOT, "Fix the bug")
    assert record.state is WorktreeState.LIVE
    assert repo.resolve(f"refs/heads/{record.branch}") == record.base_commit
    no_worktree_here(repo, record)
    assert workspaces.cwd(record) == record.worktree  # the label the workers lay out alike

    same = await workspaces.checkpoint(ROOT, "nothing pushed yet")
    assert same is not None and same.version == record.version  # no move, no commit
    head = pushed(repo, record.base_commit)
    sh(repo.root, "update-ref", f"refs/heads/{record.branch}", head)
    after = await workspaces.checkpoint(ROOT, "after a turn")
    assert after is not None and after.head_commit == head
    assert repo.resolve(f"refs/heads/{record.branch}") == head  # nothing committed here
    no_worktree_here(repo, record)


async def test_recovery_in_each_state_never_makes_a_worktree_here(
    repo: Repository, workspaces: Workspaces
) -> None:
    base = repo.resolve("refs/heads/main")
    assert base is not None
    cases: list[tuple[WorktreeRecord, AfterCrash, WorktreeState]] = []

    def tree(n: int, state: WorktreeState, **changes: object) -> WorktreeRecord:
        record = planned(repo, task=f"TASK-20261206-0000000{n}", subject=f"tree {n}")
        return dataclasses.replace(record, state=state, **changes)  # type: ignore[arg-type]

    creating = tree(1, WorktreeState.CREATING)  # crashed before the branch was made
    cases.append((creating, AfterCrash.CREATE, WorktreeState.LIVE))

    live = tree(2, WorktreeState.LIVE)  # a push landed, its checkpoint was not recorded
    sh(repo.root, "update-ref", f"refs/heads/{live.branch}", pushed(repo, base))
    cases.append((live, AfterCrash.CHECKPOINT, WorktreeState.LIVE))

    quiet = tree(3, WorktreeState.LIVE)  # nothing here but the branch: that is all there is
    sh(repo.root, "update-ref", f"refs/heads/{quiet.branch}", base)
    cases.append((quiet, AfterCrash.NOTHING, WorktreeState.LIVE))

    undone = tree(4, WorktreeState.MERGING, merge_commit=pushed(repo, base, "x.txt"))
    sh(repo.root, "update-ref", f"refs/heads/{undone.branch}", base)
    cases.append((undone, AfterCrash.UNDO_MERGE, WorktreeState.LIVE))

    salvaging = tree(5, WorktreeState.SALVAGING, salvage_ref=salvage_ref("TASK-20261206-00000005"))
    salvaged_head = pushed(repo, base, "kept.txt")
    sh(repo.root, "update-ref", f"refs/heads/{salvaging.branch}", salvaged_head)
    cases.append((salvaging, AfterCrash.SALVAGE, WorktreeState.SALVAGED))

    merged_head = pushed(repo, base, "merged.txt")
    merged = tree(6, WorktreeState.MERGED, head_commit=merged_head, merge_commit=merged_head)
    sh(repo.root, "update-ref", f"refs/heads/{merged.branch}", merged_head)
    cases.append((merged, AfterCrash.REMOVE, WorktreeState.REMOVED))

    merging = tree(7, WorktreeState.MERGING, head_commit=merged_head, merge_commit=merged_head)
    sh(repo.root, "update-ref", f"refs/heads/{merging.branch}", merged_head)
    sh(repo.root, "merge", "-q", "--ff-only", merged_head)  # the base holds it
    cases.append((merging, AfterCrash.MARK_MERGED, WorktreeState.REMOVED))

    for record, _, _ in cases:
        await put(workspaces, record)
    done = {r.root_task: action for r, action in await workspaces.recover()}
    for record, action, state in cases:
        assert done[record.root_task] is action, record.root_task
        after = workspaces.get(record.root_task)
        assert after is not None and after.state is state, (record.root_task, after)
        no_worktree_here(repo, record)
    assert repo.resolve(f"refs/heads/{creating.branch}") == base
    assert workspaces.get(live.root_task).head_commit == repo.resolve(  # type: ignore[union-attr]
        f"refs/heads/{live.branch}"
    )
    assert repo.resolve(salvage_ref("TASK-20261206-00000005")) == salvaged_head
    for gone in (salvaging, merged, merging):
        assert repo.resolve(f"refs/heads/{gone.branch}") is None
