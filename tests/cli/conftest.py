"""Running the real ``baton`` entry point as a user would, in a fresh project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.project import without_isolation


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: a PATH, a home, a terminal width; no BATON_*."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "COLUMNS": "80",
        "LANG": "C.UTF-8",
        **extra,
    }


def baton_cli(
    cwd: Path, *args: str, home: Path, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton", *args],
        cwd=cwd,
        env=user_env(home),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def user_home(isolated_home: Path) -> Path:
    return isolated_home


@pytest.fixture
def project(tmp_path: Path, user_home: Path) -> Path:
    """A fresh git repository made a baton project with `baton init`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=user_env(user_home))
    result = baton_cli(repo, "init", home=user_home)
    assert result.returncode == 0, result.stderr
    without_isolation(repo)
    return repo


def spawn_baton(
    cwd: Path, *args: str, home: Path, stdin: bool = False, stderr: bool = True
) -> subprocess.Popen[str]:
    """``baton ARGS`` in the background (text pipes), as a second shell would start it."""
    return subprocess.Popen(
        [sys.executable, "-m", "baton", *args],
        cwd=cwd,
        env=user_env(home),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
        text=True,
    )
