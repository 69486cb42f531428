"""The pure parts: names, parsers, the lifecycle, the after-crash decision."""

from __future__ import annotations

import dataclasses

import pytest

from baton.worktrees.model import WorktreeRecord
from baton.worktrees.naming import branch_name, salvage_ref, short_id, slug
from baton.worktrees.parse import (
    GitOutputUnreadable,
    changed_files,
    conflicted_paths,
    status_entries,
)
from baton.worktrees.recovery import AfterCrash, GitFacts, after_crash, salvage_head
from baton.worktrees.states import WORKTREE, IllegalWorktreeMove, WorktreeEvent, WorktreeState


def test_branch_names_are_short_readable_and_valid() -> None:
    assert short_id("TASK-20261206-120000-9A2B7128") == "9a2b7128"
    assert slug("Fix the ÜTF-8 bug: now!") == "fix-the-utf-8-bug-now"
    assert slug("/// ..") == "work"
    assert len(slug("word " * 50)) <= 40
    name = branch_name("TASK-1-abc", "Release check")
    assert name.startswith("baton/") and ".." not in name and " " not in name
    assert salvage_ref("TASK-1/../x") == "refs/baton/salvage/TASK-1_.._x"


def test_changed_files_joins_name_status_and_numstat_with_renames() -> None:
    files = changed_files(
        ["M", "a.py", "R087", "old.md", "new.md", "A", "bin"],
        ["1\t2\ta.py", "3\t0\t", "old.md", "new.md", "-\t-\tbin"],
    )
    assert [(f.status, f.path, f.old_path, f.added, f.removed) for f in files] == [
        ("M", "a.py", None, 1, 2),
        ("R", "new.md", "old.md", 3, 0),
        ("A", "bin", None, None, None),
    ]


@pytest.mark.parametrize("bad", [["Z", "x"], ["M"], ["R100", "only-one"]])
def test_unknown_shapes_are_refused_not_guessed(bad: list[str]) -> None:
    with pytest.raises(GitOutputUnreadable):
        changed_files(bad, [])


def test_status_and_merge_tree_outputs() -> None:
    entries = status_entries([" M app.py", "R  new.py", "old.py", "?? notes.txt"])
    assert [(e.path, e.old_path, e.untracked) for e in entries] == [
        ("app.py", None, False),
        ("new.py", "old.py", False),
        ("notes.txt", None, True),
    ]
    assert conflicted_paths(["tree", "f", "g", "", "1", "f", "CONFLICT"]) == ("tree", ("f", "g"))
    assert conflicted_paths(["tree"]) == ("tree", ())
    with pytest.raises(GitOutputUnreadable):
        conflicted_paths([""])


def test_the_lifecycle_refuses_a_merge_of_a_salvaged_tree() -> None:
    assert WORKTREE.next(WorktreeState.LIVE, WorktreeEvent.CHECKPOINT) is WorktreeState.LIVE
    with pytest.raises(IllegalWorktreeMove):
        WORKTREE.next(WorktreeState.SALVAGED, WorktreeEvent.MERGE)
    assert WORKTREE.terminal == {WorktreeState.REMOVED, WorktreeState.RESTORED, WorktreeState.KEPT}


def _record(state: WorktreeState) -> WorktreeRecord:
    return WorktreeRecord("T", state, "baton/x", "/p", "refs/heads/main", "b", "t", "t", "h")


def _facts(**kw: object) -> GitFacts:
    base: dict[str, object] = dict(
        branch_head="h", registered=True, dirty=False, base_holds=False, salvaged_head=None
    )
    base.update(kw)
    return GitFacts(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "facts", "action"),
    [
        (WorktreeState.CREATING, {}, AfterCrash.CREATE),
        (WorktreeState.LIVE, {"dirty": True}, AfterCrash.CHECKPOINT),
        (WorktreeState.LIVE, {}, AfterCrash.NOTHING),
        (WorktreeState.LIVE, {"branch_head": "newer"}, AfterCrash.CHECKPOINT),
        (WorktreeState.LIVE, {"registered": False}, AfterCrash.CREATE),
        (WorktreeState.LIVE, {"branch_head": None}, AfterCrash.LOST),
        (WorktreeState.MERGING, {"base_holds": True}, AfterCrash.MARK_MERGED),
        (WorktreeState.MERGING, {}, AfterCrash.UNDO_MERGE),
        (WorktreeState.MERGED, {}, AfterCrash.REMOVE),
        (WorktreeState.SALVAGING, {}, AfterCrash.SALVAGE),
        (WorktreeState.SALVAGED, {}, AfterCrash.NOTHING),
        (WorktreeState.KEPT, {}, AfterCrash.NOTHING),
    ],
)
def test_after_a_crash_each_state_has_one_answer(
    state: WorktreeState, facts: dict[str, object], action: AfterCrash
) -> None:
    assert after_crash(_record(state), _facts(**facts)) is action


@pytest.mark.parametrize(
    ("state", "action"),
    [
        (WorktreeState.CREATING, AfterCrash.SALVAGE),
        (WorktreeState.LIVE, AfterCrash.SALVAGE),
        (WorktreeState.SALVAGING, AfterCrash.SALVAGE),
        (WorktreeState.MERGING, AfterCrash.UNDO_MERGE),
        (WorktreeState.SALVAGED, AfterCrash.NOTHING),
    ],
)
def test_a_tree_whose_root_was_dropped_is_salvaged_after_a_crash(
    state: WorktreeState, action: AfterCrash
) -> None:
    """A drop cut short after its TASKs were dropped, before its salvage began."""
    assert after_crash(_record(state), _facts(dirty=True), dropped=True) is action


def test_a_resumed_salvage_never_saves_an_older_head_than_git_holds() -> None:
    record = dataclasses.replace(_record(WorktreeState.SALVAGING), head_commit="old")
    head = salvage_head
    assert head(record, checkpointed="new", branch_head="mid", saved="mid") == "new"
    assert head(record, checkpointed=None, branch_head="new", saved="mid") == "new"
    # the worktree and branch are gone: what is saved stays (it holds the uncommitted work)
    assert head(record, checkpointed=None, branch_head=None, saved="new") == "new"
    assert head(record, checkpointed=None, branch_head=None, saved=None) == "old"
