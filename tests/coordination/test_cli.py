"""``baton init`` / ``task new`` / ``status`` / ``sessions`` through typer's CliRunner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.config import load_config
from baton.events.sequencer import Sequencer
from baton.fcop_port.project import open_context
from baton.runner.emitter import EventEmitter
from baton.store.sqlite import SqliteStore
from baton.team.loop import TeamLoop
from tests.coordination.fakes import FakeFactory
from tests.support.records import run_record

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_state_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_STATE_DIR", raising=False)


def test_init_task_status_sessions(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "-C", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "created FCoP 4.0 workspace" in result.output
    assert (tmp_path / "fcop" / "fcop.json").is_file()
    assert "[team.roles.PM]" in (tmp_path / "baton.toml").read_text()
    key = tmp_path / ".baton" / "coordination" / "authority.key"
    assert key.stat().st_mode & 0o777 == 0o600
    again = runner.invoke(app, ["init", "-C", str(tmp_path)])
    assert again.exit_code == 0 and "kept existing" in again.output

    body = tmp_path / "task.md"
    body.write_text("- [ ] @QA run tests\n")
    new = [
        "task",
        "new",
        "-C",
        str(tmp_path),
        "--to",
        "PM",
        "--subject",
        "Release",
        "--body-file",
        str(body),
        "--json",
    ]
    first = json.loads(runner.invoke(app, new).output)
    second = json.loads(runner.invoke(app, new).output)
    assert second["task_id"] == first["task_id"] and second["existing"]
    bad = runner.invoke(app, ["task", "new", "-C", str(tmp_path), "--to", "CEO", "--subject", "x"])
    assert bad.exit_code == 1 and "not a role of this team" in bad.output

    status = json.loads(runner.invoke(app, ["status", "-C", str(tmp_path), "--json"]).output)
    assert status["board"]["counts"]["inbox"] == 1
    assert status["board"]["open"][0]["task_id"] == first["task_id"]
    assert [r["role"] for r in status["roles"]] == ["PM", "DEV", "QA", "OPS"]
    assert status["workspace"]["approvals"] is True

    # Run the loop with fake sessions, then look again from "another process".
    ctx = open_context(tmp_path)

    async def run_loop() -> None:
        with SqliteStore.open(load_config(tmp_path).db_path) as store:
            store.create_run(run_record("run-up", kind="up"))
            loop = TeamLoop(
                port=ctx.port,
                team=ctx.team,
                factory=FakeFactory(store=store),
                store=store,
                journal=EventEmitter(Sequencer("run-up"), store),
                run_id="run-up",
                state_dir=ctx.state_dir,
            )
            await asyncio.wait_for(loop.run(until_idle=True), 60)

    asyncio.run(run_loop())
    status = json.loads(runner.invoke(app, ["status", "-C", str(tmp_path), "--json"]).output)
    assert [r["task_id"] for r in status["pending_reviews"]] == [first["task_id"]]
    assert status["pending_reviews"][0]["status"] == "pending"
    text = runner.invoke(app, ["status", "-C", str(tmp_path)]).output
    assert "review for ADMIN" in text and "[pending]" in text
    listed = runner.invoke(app, ["sessions", "-C", str(tmp_path), "--json"]).output
    sessions = [json.loads(line) for line in listed.splitlines()]
    by_name = {s["name"]: s for s in sessions}
    assert by_name["PM"]["turns"] == 2 and by_name["QA"]["tool_calls_count"] == 1
    assert by_name["QA"]["usage"]["availability"] == "unavailable"
    plain = runner.invoke(app, ["sessions", "-C", str(tmp_path)]).output
    assert "usage unavailable" in plain


def test_init_refuses_a_legacy_workspace_and_explains(tmp_path: Path) -> None:
    (tmp_path / "fcop" / "tasks").mkdir(parents=True)
    (tmp_path / "fcop" / "tasks" / "TASK-20260509-999-PM-to-DEV.md").write_text("legacy")
    result = runner.invoke(app, ["init", "-C", str(tmp_path)])
    assert result.exit_code == 1
    assert "git mv fcop" in result.output and "LegacyWorkspaceError" not in result.output
    assert not (tmp_path / "baton.toml").exists()
    assert sorted(p.name for p in (tmp_path / "fcop").rglob("*")) == [
        "TASK-20260509-999-PM-to-DEV.md",
        "tasks",
    ]


def test_commands_outside_a_project_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 2 and "not in a baton project" in result.output
    assert "baton init" in result.output
