"""A tree's branch between the coordinator's repository and a worker's clone, with git itself.

The coordinator's repository (``repo``) keeps the branch; a worker's clone at another path
fetches it, works in a detached copy, and pushes back as a compare-and-set; a copy that
differs from the pushed head is saved under ``refs/baton/stale/`` before it is reset.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from baton.worktrees.git import GitFailed
from baton.worktrees.repo import Repository
from baton.worktrees.travel import Remote, fetch, open_copy, publish, stale_ref
from tests.worktrees.conftest import planned, sh

TASK = "TASK-20261206-aaaa1111"


def clone(repo: Repository, where: Path) -> Repository:
    where.parent.mkdir(parents=True)
    sh(where.parent, "clone", "-q", str(repo.root), str(where))
    found = Repository.find(where)
    assert found is not None
    return found


@pytest.fixture
def worker(repo: Repository, tmp_path: Path) -> Repository:
    return clone(repo, tmp_path / "worker" / "project")


def branch_made(repo: Repository) -> str:
    record = planned(repo)
    repo.create_branch(record)
    repo.create_branch(record)  # a rerun is a no-op
    assert repo.worktrees().keys() == {repo.root.resolve()}  # no worktree on the coordinator
    return record.branch


def test_a_worker_clone_fetches_works_and_pushes_the_branch(
    repo: Repository, worker: Repository
) -> None:
    branch = branch_made(repo)
    remote = Remote.of(worker, str(repo.root))
    assert not remote.same
    head = fetch(worker, remote, TASK, branch)
    assert head == repo.resolve(f"refs/heads/{branch}")
    assert worker.resolve(f"refs/baton/trees/{TASK}") == head  # kept from gc

    copy = worker.root / ".baton" / "worktrees" / "aaaa1111-fix@DEV"
    assert (
        open_copy(worker, copy, head, stale=stale_ref(TASK, "DEV", 1, leftover=True), message="m")
        is None
    )
    assert worker.head(copy) == head
    assert sh(copy, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached
    (copy / "feature.py").write_text("x = 1\n")
    turn = worker.checkpoint(copy, "baton: TASK DEV turn")
    assert publish(worker, remote, branch, turn, head)
    assert repo.resolve(f"refs/heads/{branch}") == turn
    assert sh(repo.root, "show", f"{branch}:feature.py") == "x = 1"
    assert not (repo.root / "feature.py").exists()  # the coordinator's checkout untouched


def test_a_push_from_a_stale_head_is_refused_and_moves_nothing(
    repo: Repository, worker: Repository, tmp_path: Path
) -> None:
    branch = branch_made(repo)
    remote = Remote.of(worker, str(repo.root))
    head = fetch(worker, remote, TASK, branch)
    newer = clone(repo, tmp_path / "other" / "project")
    other = newer.root / ".baton" / "worktrees" / "x@DEV"
    open_copy(
        newer, other, fetch(newer, remote, TASK, branch), stale="refs/baton/stale/x", message="m"
    )
    (other / "a.txt").write_text("a\n")
    moved = newer.checkpoint(other, "newer")
    assert publish(newer, remote, branch, moved, head)

    mine = worker.root / ".baton" / "worktrees" / "x@DEV"
    open_copy(worker, mine, head, stale="refs/baton/stale/y", message="m")
    (mine / "b.txt").write_text("b\n")
    late = worker.checkpoint(mine, "late")
    assert publish(worker, remote, branch, late, head) is False  # the lease: head moved
    assert repo.resolve(f"refs/heads/{branch}") == moved


def test_a_differing_leftover_copy_is_saved_then_reset_to_the_pushed_head(
    repo: Repository, worker: Repository
) -> None:
    branch = branch_made(repo)
    remote = Remote.of(worker, str(repo.root))
    head = fetch(worker, remote, TASK, branch)
    copy = worker.root / ".baton" / "worktrees" / "x@DEV"
    open_copy(worker, copy, head, stale=stale_ref(TASK, "DEV", 1, leftover=True), message="m")
    (copy / "committed.txt").write_text("c\n")
    unpushed = worker.checkpoint(copy, "a commit made, its push never happened")
    (copy / "loose.txt").write_text("l\n")  # and a file left uncommitted

    ref = stale_ref(TASK, "DEV", 2, leftover=True)
    assert ref == f"refs/baton/stale/{TASK}/DEV/before-e2"
    assert stale_ref(TASK, "DEV", 2) == f"refs/baton/stale/{TASK}/DEV/e2"  # a refused push
    assert open_copy(worker, copy, head, stale=ref, message="saved as epoch 2 began") == ref
    assert worker.head(copy) == head and not worker.dirty(copy)
    assert not (copy / "committed.txt").exists() and not (copy / "loose.txt").exists()
    saved = worker.resolve(ref)
    assert saved is not None and worker.is_ancestor(unpushed, saved)
    assert sh(worker.root, "show", f"{ref}:loose.txt") == "l"
    assert sh(worker.root, "show", f"{ref}:committed.txt") == "c"


def test_a_clean_older_copy_moves_forward_without_a_stale_ref(
    repo: Repository, worker: Repository
) -> None:
    branch = branch_made(repo)
    remote = Remote.of(worker, str(repo.root))
    first = fetch(worker, remote, TASK, branch)
    copy = worker.root / ".baton" / "worktrees" / "x@DEV"
    open_copy(worker, copy, first, stale=stale_ref(TASK, "DEV", 1, leftover=True), message="m")
    (copy / "a.txt").write_text("a\n")
    pushed = worker.checkpoint(copy, "turn")
    assert publish(worker, remote, branch, pushed, first)
    sh(copy, "checkout", "-q", "--detach", first)  # this host's copy is behind, and clean
    assert (
        open_copy(worker, copy, pushed, stale=stale_ref(TASK, "DEV", 2, leftover=True), message="m")
        is None
    )
    assert (
        worker.head(copy) == pushed
        and worker.resolve(stale_ref(TASK, "DEV", 2, leftover=True)) is None
    )


def test_within_the_coordinators_own_repository_refs_are_set_in_place(
    repo: Repository,
) -> None:
    branch = branch_made(repo)
    remote = Remote.of(repo, str(repo.root))
    assert remote.same
    head = fetch(repo, remote, TASK, branch)
    assert repo.resolve(f"refs/baton/trees/{TASK}") is None  # nothing fetched
    copy = repo.root / ".baton" / "worktrees" / "x@DEV"
    open_copy(repo, copy, head, stale=stale_ref(TASK, "DEV", 1, leftover=True), message="m")
    (copy / "a.txt").write_text("a\n")
    turn = repo.checkpoint(copy, "turn")
    assert repo.resolve(f"refs/heads/{branch}") == head  # a commit in the copy moves no branch
    assert publish(repo, remote, branch, turn, head)
    assert repo.resolve(f"refs/heads/{branch}") == turn
    (copy / "b.txt").write_text("b\n")
    again = repo.checkpoint(copy, "turn 2")
    assert publish(repo, remote, branch, again, head) is False  # from a stale head: refused
    assert repo.resolve(f"refs/heads/{branch}") == turn


def test_a_missing_branch_or_an_occupied_folder_is_an_error(
    repo: Repository, worker: Repository
) -> None:
    remote = Remote.of(worker, str(repo.root))
    with pytest.raises(GitFailed):
        fetch(worker, remote, TASK, "baton/nothing-here")
    occupied = worker.root / "occupied"
    occupied.mkdir()
    (occupied / "mine.txt").write_text("the user's\n")
    head = worker.resolve("HEAD")
    assert head is not None
    with pytest.raises(GitFailed, match="not a worktree"):
        open_copy(worker, occupied, head, stale="refs/baton/stale/z", message="m")
    assert (occupied / "mine.txt").read_text() == "the user's\n"


def test_removing_a_remote_trees_branch_leaves_every_worktree_alone(repo: Repository) -> None:
    record = planned(repo)
    repo.create_branch(record)
    folder = Path(record.path)
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("k\n")
    kept = repo.remove(
        dataclasses.replace(record), expected=record.head_commit, delete_branch=True, worktree=False
    )
    assert kept == ()
    assert repo.resolve(f"refs/heads/{record.branch}") is None
    assert (folder / "keep.txt").exists()


def test_a_remote_that_is_a_url_is_never_the_same_repository(worker: Repository) -> None:
    assert not Remote.of(worker, "ssh://10.0.0.5/srv/project").same
    assert not Remote.of(worker, "relative/path").same
