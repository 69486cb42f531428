"""The git operations of a task tree, on a real repository."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from baton.worktrees.git import GitFailed, GitOutputTooLarge
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.repo import MergeRefused, Repository
from tests.worktrees.conftest import planned, sh


def made(repo: Repository, **kw: str) -> WorktreeRecord:
    record = planned(repo, **kw)
    repo.create(record)
    return record


def test_create_makes_the_branch_at_the_base_and_is_idempotent(repo: Repository) -> None:
    record = made(repo)
    assert record.worktree.is_dir() and (record.worktree / "app.py").exists()
    assert repo.resolve(f"refs/heads/{record.branch}") == record.base_commit
    repo.create(record)  # again: nothing changes, nothing fails
    assert repo.worktrees()[record.worktree.resolve()] == f"refs/heads/{record.branch}"
    # the main checkout is untouched: still on main, clean
    assert sh(repo.root, "branch", "--show-current") == "main"


def test_create_after_the_folder_was_deleted_by_hand(repo: Repository) -> None:
    import shutil

    record = made(repo)
    shutil.rmtree(record.worktree)
    repo.create(record)
    assert (record.worktree / "app.py").exists()


def test_checkpoint_commits_everything_as_baton_and_keeps_agent_commits(repo: Repository) -> None:
    record = made(repo)
    wt = record.worktree
    (wt / "app.py").write_text("print('fixed')\n")
    sh(wt, "commit", "-qam", "agent's own commit")
    (wt / "new.txt").write_text("untracked\n")
    (wt / "README.md").write_text("# changed\n")
    head = repo.checkpoint(wt, "baton: TASK-x DEV turn 1")
    log = sh(wt, "log", "--format=%an|%s", f"{record.base_commit}..{head}").splitlines()
    assert log == ["baton|baton: TASK-x DEV turn 1", "Dana|agent's own commit"]
    assert not repo.dirty(wt)
    assert repo.checkpoint(wt, "again") == head  # clean: no empty commit


def test_checkpoint_of_a_staged_edit_undone_in_the_tree_commits_nothing(
    repo: Repository,
) -> None:
    record = made(repo)
    wt = record.worktree
    (wt / "app.py").write_text("print('staged')\n")
    sh(wt, "add", "app.py")
    (wt / "app.py").write_text("print('hello')\n")  # back to the committed text
    head = repo.head(wt)
    assert repo.dirty(wt)  # staged and unstaged, and nothing to commit in all
    assert repo.checkpoint(wt, "nothing") == head
    assert not repo.dirty(wt)


def test_checkpoint_of_a_clean_tree_with_a_stale_index_lock_is_the_head(
    repo: Repository,
) -> None:
    record = made(repo)
    wt = record.worktree
    lock = Path(sh(wt, "rev-parse", "--git-path", "index.lock"))
    (lock if lock.is_absolute() else wt / lock).write_text("")
    assert repo.checkpoint(wt, "clean") == repo.head(wt)
    (wt / "new.txt").write_text("work\n")
    with pytest.raises(GitFailed):  # the work stays in the tree for the next checkpoint
        repo.checkpoint(wt, "locked")
    assert (wt / "new.txt").exists()


def test_the_change_lists_files_commits_and_a_bounded_diff(repo: Repository) -> None:
    record = made(repo)
    wt = record.worktree
    (wt / "app.py").write_text("print('fixed')\nprint('more')\n")
    (wt / "data.bin").write_bytes(b"\0\1\2")
    sh(wt, "mv", "README.md", "DOCS.md")
    head = repo.checkpoint(wt, "turn")
    change = repo.change(dataclasses.replace(record, head_commit=head))
    files = {f.path: f for f in change.files}
    assert files["app.py"].status == "M" and (files["app.py"].added, files["app.py"].removed) == (
        2,
        1,
    )
    assert files["data.bin"].binary and files["data.bin"].status == "A"
    assert files["DOCS.md"].status == "R" and files["DOCS.md"].old_path == "README.md"
    assert change.diff is not None and "+print('more')" in change.diff
    assert [c.subject for c in change.commits] == ["turn"]


def test_a_diff_over_the_bound_is_not_cut_but_pointed_to(repo: Repository) -> None:
    record = made(repo)
    (record.worktree / "big.txt").write_text("line\n" * 500)
    head = repo.checkpoint(record.worktree, "big")
    change = repo.change(dataclasses.replace(record, head_commit=head), max_diff_bytes=100)
    assert change.diff is None and "baton diff" in change.note
    assert change.files[0].added == 500


def test_preflight_finds_conflicts_with_the_base_and_with_other_live_branches(
    repo: Repository,
) -> None:
    first = made(repo, task="TASK-1-aaaa1111", subject="one")
    second = made(repo, task="TASK-2-bbbb2222", subject="two")
    (first.worktree / "app.py").write_text("print('first')\n")
    first = dataclasses.replace(first, head_commit=repo.checkpoint(first.worktree, "1"))
    (second.worktree / "app.py").write_text("print('second')\n")
    second = dataclasses.replace(second, head_commit=repo.checkpoint(second.worktree, "2"))
    report = repo.preflight(second, [first, second])
    assert report.clean  # the base has not moved
    assert report.branch_conflicts == {first.branch: ("app.py",)}
    # the first is merged: now the second conflicts with the base itself
    base_tip, target = repo.merge_commit(first, "merge", "merge one")
    repo.apply_merge(first, base_tip, target)
    report = repo.preflight(second, [])
    assert report.base_conflicts == ("app.py",) and not report.clean
    assert "git merge main" in report.rebase_prompt("main")
    with pytest.raises(MergeRefused, match="conflicts with main in 1 file"):
        repo.merge_commit(second, "merge", "merge two")


@pytest.mark.parametrize("rule", ["merge", "squash", "ff"])
def test_each_merge_rule_moves_the_checked_out_base(repo: Repository, rule: str) -> None:
    record = made(repo)
    (record.worktree / "feature.py").write_text("x = 1\n")
    record = dataclasses.replace(record, head_commit=repo.checkpoint(record.worktree, "feature"))
    base_tip, target = repo.merge_commit(record, rule, "baton: merge")  # type: ignore[arg-type]
    repo.apply_merge(record, base_tip, target)
    assert (repo.root / "feature.py").read_text() == "x = 1\n"  # the main checkout has it
    parents = sh(repo.root, "log", "-1", "--format=%P").split()
    assert len(parents) == {"merge": 2, "squash": 1, "ff": 1}[rule]
    record = dataclasses.replace(record, merge_commit=target)
    assert repo.is_merged(record)
    repo.apply_merge(record, base_tip, target)  # a rerun after a crash: nothing to do


def test_ff_is_refused_once_the_base_moved(repo: Repository) -> None:
    record = made(repo)
    (record.worktree / "feature.py").write_text("x = 1\n")
    record = dataclasses.replace(record, head_commit=repo.checkpoint(record.worktree, "feature"))
    (repo.root / "other.py").write_text("y\n")
    sh(repo.root, "add", "other.py")
    sh(repo.root, "commit", "-qm", "the user moved main")
    with pytest.raises(MergeRefused, match="fast-forward is impossible"):
        repo.merge_commit(record, "ff", "m")
    base_tip, target = repo.merge_commit(record, "merge", "m")  # merge still works
    repo.apply_merge(record, base_tip, target)
    assert (repo.root / "other.py").exists() and (repo.root / "feature.py").exists()


def test_the_users_uncommitted_edits_block_only_when_the_merge_touches_them(
    repo: Repository,
) -> None:
    record = made(repo)
    (record.worktree / "app.py").write_text("print('fixed')\n")
    record = dataclasses.replace(record, head_commit=repo.checkpoint(record.worktree, "fix"))
    (repo.root / "README.md").write_text("# my own edit\n")  # elsewhere: fine
    (repo.root / "app.py").write_text("print('my edit')\n")  # the same file: refused
    base_tip, target = repo.merge_commit(record, "merge", "m")
    with pytest.raises(MergeRefused, match=r"app\.py") as refused:
        repo.apply_merge(record, base_tip, target)
    assert refused.value.paths == ("app.py",)
    assert repo.resolve("refs/heads/main") == base_tip  # nothing moved, nothing half-done
    assert (repo.root / "app.py").read_text() == "print('my edit')\n"
    sh(repo.root, "checkout", "--", "app.py")
    repo.apply_merge(record, base_tip, target)
    assert (repo.root / "app.py").read_text() == "print('fixed')\n"
    assert (repo.root / "README.md").read_text() == "# my own edit\n"  # kept


def test_a_base_not_checked_out_moves_by_compare_and_swap(repo: Repository) -> None:
    record = made(repo)
    (record.worktree / "f.txt").write_text("f\n")
    record = dataclasses.replace(record, head_commit=repo.checkpoint(record.worktree, "f"))
    sh(repo.root, "checkout", "-qb", "elsewhere")
    base_tip, target = repo.merge_commit(record, "merge", "m")
    repo.apply_merge(record, base_tip, target)
    assert repo.resolve("refs/heads/main") == target
    assert not (repo.root / "f.txt").exists()  # the user's checkout was not touched


def test_salvage_keeps_the_exact_head_with_uncommitted_work_and_restores_it(
    repo: Repository,
) -> None:
    record = made(repo)
    (record.worktree / "half.py").write_text("unfinished\n")
    head = repo.checkpoint(record.worktree, "salvage")
    assert repo.save("refs/baton/salvage/TASK-x", head) == "refs/baton/salvage/TASK-x"
    assert repo.save("refs/baton/salvage/TASK-x", head) == "refs/baton/salvage/TASK-x"  # rerun
    assert repo.remove(record, expected=head, delete_branch=True) == ()
    assert not record.worktree.exists() and repo.resolve(f"refs/heads/{record.branch}") is None
    commit = repo.restore("refs/baton/salvage/TASK-x", "restored/work")
    assert commit == head
    assert sh(repo.root, "show", "restored/work:half.py") == "unfinished"


def test_outputs_over_their_bound_are_refused(repo: Repository) -> None:
    with pytest.raises(GitOutputTooLarge):
        repo.git.run("log", "-p", max_bytes=10)


def test_no_repository_is_none(tmp_path: Path) -> None:
    assert Repository.find(tmp_path) is None


def test_repository_hooks_never_run_inside_baton(repo: Repository) -> None:
    record = made(repo)
    hooks = repo.root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    marker = repo.root / "HOOK_RAN"
    hook = hooks / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    hook.chmod(0o755)
    (record.worktree / "x").write_text("x\n")
    repo.checkpoint(record.worktree, "no hooks")
    assert not marker.exists()
