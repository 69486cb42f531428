"""``baton run``/``probe`` failures are typed, non-zero, printed with --json, stored as failed."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from tests.support.project import baton_in


def _project(tmp_path: Path, *args: str, family: str = "builtin") -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    command = [sys.executable, "-m", "baton.testing.fake_agent", *args]
    (repo / "baton.toml").write_text(
        f'[profiles.fault]\ncommand = {json.dumps(command)}\nfamily = "{family}"\n'
    )
    return repo


def _run_status(repo: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(repo / ".baton" / "baton.db")
    try:
        return list(db.execute("SELECT kind, status FROM runs"))
    finally:
        db.close()


def test_a_session_new_error_exits_3_with_ndjson(tmp_path: Path) -> None:
    repo = _project(tmp_path, "--scenario", "session-new-error")
    result = baton_in(repo, "run", "hi", "--agent", "fault", "--json")
    assert result.returncode == 3, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [failed] = [e for e in events if e["type"] == "session.failed"]
    assert failed["payload"]["error_type"] == "SessionRejected"
    assert "session store unavailable" in failed["payload"]["message"]
    assert _run_status(repo) == [("run", "failed")]


def test_a_refused_probe_prints_json_exits_non_zero_and_is_stored_failed(tmp_path: Path) -> None:
    repo = _project(tmp_path, "--scenario", "ok", "--mode", "auto", family="claude")
    result = baton_in(repo, "probe", "fault", "--json")
    assert result.returncode == 4, result.stderr
    out = json.loads(result.stdout)
    assert "auto" in out["session_error"] and out["error_type"] == "SecurityError"
    assert _run_status(repo) == [("probe", "failed")]


def test_a_probe_of_a_session_new_error_exits_3(tmp_path: Path) -> None:
    repo = _project(tmp_path, "--scenario", "session-new-error")
    result = baton_in(repo, "probe", "fault", "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout)["error_type"] == "SessionRejected"
    assert _run_status(repo) == [("probe", "failed")]
