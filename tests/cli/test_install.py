"""baton installed for real use: the wheel carries everything, including the event
schema as package data, and the installed command works outside any checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from baton.events.schema import render_schema

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_schema_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    # Built from a copy: a build writes build/ and *.egg-info beside the sources.
    source = tmp_path / "baton-src"
    shutil.copytree(
        REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("baton-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "baton/events/events.schema.json" in names
        assert archive.read("baton/events/events.schema.json").decode() == render_schema()
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        assert "baton = baton.cli.entry:main" in archive.read(entry).decode()
        archive.extractall(tmp_path / "site")
    # The unpacked wheel first on the path, the dependencies from this environment after it.
    deps = [p for p in sys.path if p.endswith("site-packages")]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ["HOME"],
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *deps]),
    }
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    installed = (
        "import sys; sys.path[:0] = __import__('os').environ['PYTHONPATH'].split(':'); "
        "from baton.cli.entry import main; main()"
    )

    def baton(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-I", "-c", installed, *args],
            cwd=outside,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    check = baton("schema", "--check")
    assert check.returncode == 0, check.stderr
    assert str(tmp_path / "site") in check.stderr  # the installed copy was checked
    schema = baton("schema")
    assert json.loads(schema.stdout)["$id"].startswith("https://baton.dev/schema/events/")
