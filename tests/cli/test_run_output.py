"""``baton run --json`` writes per read batch: what it printed is what it stored, line for
line, whether the turn ended or was cancelled, and a batch reaches stdout at its end
(not only when the process exits)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.project import baton_in, project_env


def _project(tmp_path: Path, *args: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    command = [sys.executable, "-m", "baton.testing.fake_agent", *args]
    (repo / "baton.toml").write_text(f"[profiles.fake]\ncommand = {json.dumps(command)}\n")
    return repo


def _stored(repo: Path) -> list[str]:
    db = sqlite3.connect(repo / ".baton" / "baton.db")
    try:
        [(run_id,)] = db.execute("SELECT run_id FROM runs")
        rows = db.execute("SELECT json FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [line for (line,) in rows]
    finally:
        db.close()


def test_a_flood_prints_exactly_the_stored_events(tmp_path: Path) -> None:
    repo = _project(tmp_path, "--scenario", "flood", "--count", "3000")
    result = baton_in(repo, "run", "go", "--agent", "fake", "--json")
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    assert len(printed) > 3000  # nothing coalesces in a mixed flood
    assert printed == _stored(repo)
    types = [json.loads(line)["type"] for line in printed]
    assert types[-2:] == ["turn.completed", "session.closed"]


def test_a_batch_reaches_stdout_before_the_turn_ends_and_a_cancel_loses_nothing(
    tmp_path: Path,
) -> None:
    repo = _project(tmp_path, "--scenario", "hang-prompt")
    proc = subprocess.Popen(
        [sys.executable, "-m", "baton", "run", "wait", "--agent", "fake", "--json"],
        cwd=repo,
        env=project_env(repo),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    seen_chunk = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if '"type":"transcript.assistant"' in line:
                seen_chunk.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # The agent sent one chunk and waits for a cancel: the chunk's batch must be on
        # stdout now, while the process is still running.
        assert seen_chunk.wait(180), f"no transcript line while the turn runs: {lines}"
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(30)
    assert proc.returncode == 130
    types = [json.loads(line)["type"] for line in lines]
    assert "turn.cancelled" in types and types[-1] == "session.closed"
    deadline = time.monotonic() + 10
    while _stored(repo) != lines and time.monotonic() < deadline:
        time.sleep(0.1)  # the store is closed before exit; this only guards a slow disk
    assert lines == _stored(repo)
