"""Running ``baton`` as a user does in a project repository (isolated HOME and state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def project_env(repo: Path) -> dict[str, str]:
    """The environment of a user's ``baton`` in ``repo``: its own HOME and state beside it."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent / "home"),
        "XDG_STATE_HOME": str(repo.parent / "xdg"),
        "COLUMNS": "200",
    }


def baton_in(
    repo: Path, *args: str, timeout: float = 240, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**project_env(repo), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "baton", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def git_repo(parent: Path, name: str = "repo") -> Path:
    """An empty git repository under ``parent`` (a project a user would ``baton init``)."""
    root = parent / name
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def without_isolation(repo: Path) -> None:
    """``[team] isolation = "none"`` in ``repo``'s ``baton.toml``: agents work in the checkout
    itself, as before task trees had their own branches (tests about something else)."""
    config = repo / "baton.toml"
    text = config.read_text(encoding="utf-8")
    assert 'isolation = "worktree"' in text, "baton init's [team] names its isolation"
    config.write_text(text.replace('isolation = "worktree"', 'isolation = "none"', 1))


def commit_all(repo: Path, message: str = "baton init") -> None:
    """What ``baton init`` tells a user to do in a new repository: commit what it wrote."""
    env = {
        "PATH": os.environ["PATH"],
        "GIT_AUTHOR_NAME": "Dana",
        "GIT_AUTHOR_EMAIL": "dana@example.org",
        "GIT_COMMITTER_NAME": "Dana",
        "GIT_COMMITTER_EMAIL": "dana@example.org",
        "HOME": str(repo.parent / "home"),
    }
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True, env=env)


def stock_fcop_validate(root: Path) -> dict[str, Any]:
    """``fcop validate --json`` of the stock CLI, in its own process (no baton code loaded)."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "fcop"), "validate", "--json", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    data: dict[str, Any] = json.loads(done.stdout)["data"]
    return data
