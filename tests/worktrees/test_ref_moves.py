"""Every ref baton moves or deletes is a compare-and-set against what its decision read.

A merge reads the branch head, merges it, then removes the worktree and the branch. Work
that lands in between (an agent's commit or a file in the worktree on one machine, a
holder's fenced push on a cluster) was not approved and must not go with the branch: it
is kept (the branch stays where it moved to, a worktree's own head goes under
``refs/baton/kept/``), the record says ``kept`` and the human is told. A dropped tree's
branch that moves after its save is saved again before it goes. Real git, a real SQLite
store; the late work is injected at the very step that deletes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from baton.events.sequencer import Sequencer, utc_now
from baton.runner.emitter import EventEmitter
from baton.store import team_sql
from baton.store.sqlite import SqliteStore
from baton.store.tx import Tx
from baton.team.workspaces import Workspaces
from baton.team_config import Isolation
from baton.worktrees.git import BATON_IDENTITY, GitFailed
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.naming import kept_ref, salvage_ref
from baton.worktrees.repo import Kept, Repository
from baton.worktrees.states import WorktreeState
from baton.worktrees.travel import Remote, publish
from tests.support.records import run_record
from tests.worktrees.conftest import planned, sh

ROOT = "TASK-20261206-aaaa1111"


class Told:
    """What the workspaces told the human (``on_kept``)."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    async def __call__(self, root: str, note: str) -> None:
        self.notes.append((root, note))


def keeper(repo: Repository, tmp_path: Path, *, remote: bool) -> tuple[Workspaces, Told]:
    store = SqliteStore.open(tmp_path / "state" / "baton.db")
    store.create_run(run_record("run-1", kind="up"))
    workspaces = Workspaces(
        repo=repo,
        isolation=Isolation(remote=remote),
        project=repo.root,
        store=store,
        journal=EventEmitter(Sequencer("run-1"), store),
        now=utc_now,
    )
    told = Told()
    workspaces.on_kept = told
    return workspaces, told


@pytest.fixture
async def local(repo: Repository, tmp_path: Path) -> AsyncIterator[tuple[Workspaces, Told]]:
    workspaces, told = keeper(repo, tmp_path, remote=False)
    yield workspaces, told
    workspaces.store.close()


@pytest.fixture
async def remote(repo: Repository, tmp_path: Path) -> AsyncIterator[tuple[Workspaces, Told]]:
    workspaces, told = keeper(repo, tmp_path, remote=True)
    yield workspaces, told
    workspaces.store.close()


def before_step(
    monkeypatch: pytest.MonkeyPatch,
    workspaces: Workspaces,
    point: str,
    late: Callable[[], object],
    *,
    times: int = 1,
) -> None:
    """``late`` runs right before the git step ``point`` (the first ``times`` times)."""
    original = workspaces._git
    left = [times]

    async def step(run: Callable[[Repository], Any], name: str) -> Any:
        if name == point and left[0] > 0:
            left[0] -= 1
            late()
        return await original(run, name)

    monkeypatch.setattr(workspaces, "_git", step)


def pushed(repo: Repository, parent: str, name: str) -> str:
    """A commit on top of ``parent`` as a holder's push brings it (no worktree here)."""
    blob = repo.git.run("hash-object", "-w", "--stdin", input=f"{name}\n".encode()).stdout
    listing = repo.git.text("ls-tree", parent)
    entry = f"100644 blob {blob.decode().strip()}\t{name}\n"
    tree = repo.git.run("mktree", input=(listing + "\n" + entry).encode()).stdout.decode().strip()
    made = repo.git.run("commit-tree", tree, "-p", parent, "-m", name, env=BATON_IDENTITY)
    return made.stdout.decode().strip()


def branch_of(repo: Repository, record: WorktreeRecord) -> str | None:
    return repo.resolve(f"refs/heads/{record.branch}")


def changes(workspaces: Workspaces) -> list[Any]:
    return [
        e.payload
        for e in workspaces.store.iter_events("run-1")
        if e.type == "team.worktree.changed"
    ]


# ------------------------------------------------------------------ the git steps


def test_a_branch_moved_past_the_decided_head_is_kept_and_one_behind_it_goes(
    repo: Repository,
) -> None:
    record = planned(repo)
    repo.create(record)
    decided = repo.checkpoint(record.worktree, "the turn")
    (record.worktree / "late.txt").write_text("after the decision\n")  # never committed
    kept = repo.remove(record, expected=decided, delete_branch=True)
    newer = branch_of(repo, record)
    assert newer is not None and newer != decided and repo.is_ancestor(decided, newer)
    assert kept == (Kept(f"refs/heads/{record.branch}", newer),)
    assert sh(repo.root, "show", f"{record.branch}:late.txt") == "after the decision"
    assert not record.worktree.exists()  # everything it held is on the branch

    again = planned(repo, task="TASK-20261206-bbbb2222", subject="other")
    repo.create(again)
    older = branch_of(repo, again)
    assert older is not None
    ahead = pushed(repo, older, "saved.txt")  # the decision was made on a newer head
    assert repo.remove(again, expected=ahead, delete_branch=True) == ()
    assert branch_of(repo, again) is None


def test_a_worktrees_own_head_on_no_branch_is_saved_before_it_goes(repo: Repository) -> None:
    record = planned(repo)
    repo.create(record)
    decided = repo.checkpoint(record.worktree, "the turn")
    sh(record.worktree, "checkout", "-q", "--detach")
    (record.worktree / "detached.txt").write_text("on no branch\n")
    sh(record.worktree, "add", "-A")
    sh(record.worktree, "commit", "-qm", "an agent's commit on a detached HEAD")
    own = sh(record.worktree, "rev-parse", "HEAD")
    kept = repo.remove(record, expected=decided, delete_branch=True)
    assert kept == (Kept(kept_ref(ROOT), own),)
    assert repo.resolve(kept_ref(ROOT)) == own
    assert branch_of(repo, record) is None  # the branch itself held only the decided head
    assert not record.worktree.exists()


def test_a_save_never_moves_a_ref_that_holds_other_work(repo: Repository) -> None:
    base = repo.resolve("refs/heads/main")
    assert base is not None
    first, other = pushed(repo, base, "a.txt"), pushed(repo, base, "b.txt")
    ref = salvage_ref(ROOT)
    assert repo.save(ref, first) == ref
    assert repo.save(ref, other) == f"{ref}-2"  # not a descendant: another name
    assert repo.resolve(ref) == first and repo.resolve(f"{ref}-2") == other
    assert repo.save(ref, other) == f"{ref}-2"  # a rerun finds it
    newer = pushed(repo, first, "c.txt")
    assert repo.save(ref, newer) == ref  # forward: the same name moves
    assert repo.resolve(ref) == newer


# ------------------------------------------------------------- one machine's merge


async def test_a_commit_made_in_the_worktree_during_the_merge_survives_and_is_told(
    repo: Repository, local: tuple[Workspaces, Told], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspaces, told = local
    record = await workspaces.prepare(ROOT, "Fix the bug")
    (record.worktree / "fix.txt").write_text("approved\n")
    record = await workspaces.checkpoint(ROOT, "the turn") or record
    approved = record.head_commit

    def a_turn_still_running() -> None:  # another role's turn in the tree, mid-merge
        (record.worktree / "late.txt").write_text("committed by the agent\n")
        sh(record.worktree, "add", "late.txt")
        sh(record.worktree, "commit", "-qm", "an agent's commit after the approval")
        (record.worktree / "loose.txt").write_text("never committed\n")

    before_step(monkeypatch, workspaces, "worktree.remove", a_turn_still_running)
    done = await workspaces.merge(ROOT, "baton: merge")

    assert (repo.root / "fix.txt").read_text() == "approved\n"  # the approved work is merged
    assert not (repo.root / "late.txt").exists()  # what was not approved is not
    kept = branch_of(repo, record)
    assert kept is not None, "the commits after the merge were deleted with the branch"
    assert sh(repo.root, "show", f"{record.branch}:late.txt") == "committed by the agent"
    assert sh(repo.root, "show", f"{record.branch}:loose.txt") == "never committed"
    assert approved is not None and repo.is_ancestor(approved, kept)
    assert done.state is WorktreeState.KEPT
    assert not record.worktree.exists()  # its contents are on the branch
    assert done.reason is not None and record.branch in done.reason
    assert f"git merge {record.branch}" in done.reason
    assert told.notes == [(ROOT, done.reason)]
    assert changes(workspaces)[-1].to_state == "kept"
    assert changes(workspaces)[-1].reason == done.reason


async def test_a_clean_merge_still_removes_the_worktree_and_the_branch(
    repo: Repository, local: tuple[Workspaces, Told]
) -> None:
    workspaces, told = local
    record = await workspaces.prepare(ROOT, "Fix the bug")
    (record.worktree / "fix.txt").write_text("approved\n")
    done = await workspaces.merge(ROOT, "baton: merge")
    assert done.state is WorktreeState.REMOVED
    assert branch_of(repo, record) is None and not record.worktree.exists()
    assert told.notes == []


# ------------------------------------------------------------------- a cluster's


async def test_a_push_between_the_merge_and_the_delete_survives_and_is_told(
    repo: Repository, remote: tuple[Workspaces, Told], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspaces, told = remote
    record = await workspaces.prepare(ROOT, "Add a feature")
    first = pushed(repo, record.base_commit, "first.txt")
    assert publish(
        repo, Remote(str(repo.root), same=True), record.branch, first, record.base_commit
    )
    late: list[str] = []

    def a_holder_pushes() -> None:  # its turn was running at approval time
        late.append(pushed(repo, first, "late.txt"))
        assert publish(repo, Remote(str(repo.root), same=True), record.branch, late[0], first)

    before_step(monkeypatch, workspaces, "worktree.remove", a_holder_pushes)
    done = await workspaces.merge(ROOT, "baton: merge")

    assert (repo.root / "first.txt").exists() and not (repo.root / "late.txt").exists()
    assert branch_of(repo, record) == late[0], "the pushed commit was deleted with the branch"
    assert done.state is WorktreeState.KEPT and done.head_commit == first
    assert done.reason is not None and late[0][:10] in done.reason
    assert told.notes == [(ROOT, done.reason)]


async def test_recovery_of_a_merged_tree_whose_branch_moved_keeps_it(
    repo: Repository, remote: tuple[Workspaces, Told]
) -> None:
    """A crash after the merge, a push, then ``baton up``: the removal keeps the push."""
    workspaces, told = remote
    base = repo.resolve("refs/heads/main")
    assert base is not None
    merged_head = pushed(repo, base, "merged.txt")
    sh(repo.root, "merge", "-q", "--ff-only", merged_head)
    record = dataclasses.replace(
        planned(repo), state=WorktreeState.MERGED, head_commit=merged_head, merge_commit=merged_head
    )
    newer = pushed(repo, merged_head, "late.txt")
    sh(repo.root, "update-ref", f"refs/heads/{record.branch}", newer)

    def write(tx: Tx) -> None:
        team_sql.WORKTREES.insert(tx, record.row())

    await workspaces.journal.commit([], write)
    await workspaces.recover()
    after = workspaces.get(ROOT)
    assert after is not None and after.state is WorktreeState.KEPT
    assert branch_of(repo, record) == newer
    assert [root for root, _ in told.notes] == [ROOT]


async def test_a_push_landing_after_a_drops_save_is_saved_before_the_branch_goes(
    repo: Repository, remote: tuple[Workspaces, Told], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspaces, told = remote
    record = await workspaces.prepare(ROOT, "Add a feature")
    first = pushed(repo, record.base_commit, "first.txt")
    sh(repo.root, "update-ref", f"refs/heads/{record.branch}", first)
    late: list[str] = []

    def a_late_push() -> None:  # the holder's turn ended after the drop cancelled it
        late.append(pushed(repo, first, "late.txt"))
        assert publish(repo, Remote(str(repo.root), same=True), record.branch, late[0], first)

    before_step(monkeypatch, workspaces, "worktree.salvage.remove", a_late_push)
    done = await workspaces.salvage(ROOT, "not needed")
    assert done is not None and done.state is WorktreeState.SALVAGED
    assert repo.resolve(salvage_ref(ROOT)) == late[0], "the late push was not saved"
    assert done.head_commit == late[0]
    assert branch_of(repo, record) is None
    assert told.notes == []


def test_a_folder_that_is_no_worktree_any_more_is_saved_before_it_goes(
    repo: Repository,
) -> None:
    """An agent deleted the worktree's ``.git`` file: git forgets the worktree, its files
    stay; they are saved under the kept ref, never just deleted."""
    record = planned(repo)
    repo.create(record)
    decided = repo.checkpoint(record.worktree, "the turn")
    (record.worktree / ".git").unlink()
    (record.worktree / "orphan.txt").write_text("written after the .git file went\n")
    kept = repo.remove(record, expected=decided, delete_branch=True)
    assert [k.ref for k in kept] == [kept_ref(ROOT)]
    assert sh(repo.root, "show", f"{kept_ref(ROOT)}:orphan.txt") == (
        "written after the .git file went"
    )
    assert not record.worktree.exists() and branch_of(repo, record) is None

    same = planned(repo, task="TASK-20261206-cccc3333", subject="same")
    repo.create(same)
    (same.worktree / ".git").unlink()  # nothing but the decided head's files: nothing kept
    assert repo.remove(same, expected=same.head_commit, delete_branch=True) == ()
    assert not same.worktree.exists()


def test_git_in_a_worktree_whose_git_file_is_gone_never_reaches_the_users_checkout(
    repo: Repository,
) -> None:
    """Without the worktree's ``.git`` file, git would find the user's repository above it:
    a checkpoint would commit what the user staged there. It is an error instead."""
    record = planned(repo)
    repo.create(record)
    (repo.root / "app.py").write_text("print('staged by the user')\n")
    sh(repo.root, "add", "app.py")
    main = repo.resolve("refs/heads/main")
    (record.worktree / ".git").unlink()
    with pytest.raises(GitFailed):
        repo.checkpoint(record.worktree, "a checkpoint")
    assert repo.resolve("refs/heads/main") == main  # nothing committed on the user's branch
    assert sh(repo.root, "diff", "--cached", "--name-only") == "app.py"  # still staged
