"""A real git repository per test (git itself, never a fake), with a commit on ``main``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from baton.worktrees.git import BATON_IDENTITY, Git
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.naming import branch_name, tree_label
from baton.worktrees.repo import Repository
from baton.worktrees.states import WorktreeState

USER = {
    "GIT_AUTHOR_NAME": "Dana",
    "GIT_AUTHOR_EMAIL": "dana@example.org",
    "GIT_COMMITTER_NAME": "Dana",
    "GIT_COMMITTER_EMAIL": "dana@example.org",
}


def sh(cwd: Path, *args: str) -> str:
    """The user's own git, as they would type it."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**USER, "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Repository:
    root = tmp_path / "project"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("print('hello')\n")
    (root / "README.md").write_text("# project\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-qm", "first")
    found = Repository.find(root)
    assert found is not None
    return found


def planned(
    repo: Repository, task: str = "TASK-20261206-aaaa1111", subject: str = "Fix the bug"
) -> WorktreeRecord:
    base = repo.resolve("refs/heads/main")
    assert base is not None
    return WorktreeRecord(
        root_task=task,
        state=WorktreeState.LIVE,
        branch=branch_name(task, subject),
        path=str(repo.root / ".baton" / "worktrees" / tree_label(task, subject)),
        base_ref="refs/heads/main",
        base_commit=base,
        created_at="t",
        updated_at="t",
        head_commit=base,
    )


__all__ = ["BATON_IDENTITY", "Git", "planned", "repo", "sh"]
