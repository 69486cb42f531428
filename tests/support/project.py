"""Running ``baton`` as a user does in a project repository (isolated HOME and state)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def baton_in(
    repo: Path, *args: str, timeout: float = 240, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent / "home"),
        "XDG_STATE_HOME": str(repo.parent / "xdg"),
        "COLUMNS": "200",
        **(extra_env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "baton", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
