"""``baton diff``, ``baton worktrees``, ``baton task drop`` and ``baton salvage restore``,
as a user runs them: the real CLI, the built-in agent, a real git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.project import baton_in, commit_all

TASK = """Write the feature.

```sh
printf 'feature = True\\n' > feature.py
printf 'bell \\033]0;title\\007 \\033[2J here\\n' > hostile.txt
```
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def worked(tmp_path: Path) -> tuple[Path, str]:
    """A project whose DEV task ran on its own branch and waits for review."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    assert baton_in(repo, "init").returncode == 0
    commit_all(repo)
    (repo / "TASK.md").write_text(TASK)
    created = baton_in(
        repo, "task", "new", "--to", "DEV", "--subject", "Feature", "--body-file", "TASK.md"
    )
    assert created.returncode == 0, created.stderr
    up = baton_in(repo, "up", "--until-idle")
    assert up.returncode == 0, up.stderr[-2000:]
    return repo, created.stdout.split()[0]


def test_diff_and_worktrees_show_the_trees_change_display_safe(worked: tuple[Path, str]) -> None:
    repo, task = worked
    rows = [json.loads(line) for line in baton_in(repo, "worktrees", "--json").stdout.splitlines()]
    assert [(r["task_id"], r["state"]) for r in rows] == [(task, "live")]
    assert not (repo / "feature.py").exists()
    data = json.loads(baton_in(repo, "diff", task[:12], "--json").stdout)
    assert {f["path"] for f in data["files"]} == {"feature.py", "hostile.txt"}
    assert data["preflight"]["clean"] and data["base"] == "main"
    assert "+feature = True" in data["diff"]
    shown = baton_in(repo, "diff", task)
    assert shown.returncode == 0, shown.stderr
    assert "+feature = True" in shown.stdout and "merges cleanly into main" in shown.stdout
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout  # agent text made safe
    shown_task = baton_in(repo, "task", "show", task)
    assert "branch baton/" in shown_task.stdout and "2 file(s) +2 -0" in shown_task.stdout
    data = json.loads(baton_in(repo, "task", "show", task, "--json").stdout)
    assert data["branch"]["state"] == "live" and data["branch"]["stat"]["files"] == 2
    stat = baton_in(repo, "diff", task, "--stat")
    assert "feature.py" in stat.stdout and "+feature" not in stat.stdout


def test_drop_keeps_the_work_and_restore_brings_it_back(worked: tuple[Path, str]) -> None:
    repo, task = worked
    dropped = baton_in(repo, "task", "drop", task, "--reason", "not now")
    assert dropped.returncode == 0, dropped.stderr
    assert f"refs/baton/salvage/{task}" in dropped.stdout
    rows = [json.loads(line) for line in baton_in(repo, "worktrees", "--json").stdout.splitlines()]
    assert [(r["state"], r["worktree"]) for r in rows] == [("salvaged", None)]
    assert git(repo, "branch", "--list", "baton/*") == ""
    status = json.loads(baton_in(repo, "task", "show", task, "--json").stdout)
    assert status["baton_status"] == "dropped"
    restored = baton_in(repo, "salvage", "restore", task, "--branch", "kept/feature")
    assert restored.returncode == 0, restored.stderr
    assert git(repo, "show", "kept/feature:feature.py") == "feature = True"
    again = baton_in(repo, "up", "--until-idle")  # nothing runs on a dropped tree
    assert again.returncode == 0, again.stderr[-2000:]
    assert git(repo, "branch", "--list", "baton/*") == ""  # no new branch, no new worktree
    status = json.loads(baton_in(repo, "task", "show", task, "--json").stdout)
    assert status["baton_status"] == "dropped"


def test_diff_of_a_task_without_a_branch_says_why(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert baton_in(repo, "init").returncode == 0
    (repo / "T.md").write_text("x")
    created = baton_in(repo, "task", "new", "--to", "DEV", "--subject", "S", "--body-file", "T.md")
    shown = baton_in(repo, "diff", created.stdout.split()[0])
    assert shown.returncode == 1
    assert "has no branch of its own" in shown.stderr and shown.stderr[-1] == "\n"


def test_worktrees_prints_a_kept_trees_note_display_safe(worked: tuple[Path, str]) -> None:
    """A merged tree whose branch moved after the merge (``kept``): the table says so and
    the note under it tells what to do (the note is recorded text: shown safe)."""
    import sqlite3

    repo, task = worked
    note = (
        "needs attention: baton/x moved after abc was merged into main \x1b[2J`git merge baton/x`"
    )
    db = sqlite3.connect(repo / ".baton" / "baton.db")
    with db:
        db.execute(
            "UPDATE team_worktrees SET state = 'kept', reason = ? WHERE root_task = ?", (note, task)
        )
    db.close()
    shown = baton_in(repo, "worktrees")
    assert shown.returncode == 0, shown.stderr
    assert "kept" in shown.stdout and "`git merge baton/x`" in shown.stdout
    assert "\x1b" not in shown.stdout
    # ``baton status`` names it among what needs the human, safe too.
    status = baton_in(repo, "status")
    assert status.returncode == 0, status.stderr
    (line,) = [ln for ln in status.stdout.splitlines() if ln.startswith("tree ")]
    assert task in line and "`git merge baton/x`" in line and "`baton worktrees`" in line
    assert "\x1b" not in status.stdout
    (kept,) = json.loads(baton_in(repo, "status", "--json").stdout)["kept_trees"]
    assert kept["task_id"] == task and kept["reason"] == note
