"""Budgets as a user meets them: ``baton run --budget`` (exit 7), a team TASK held by its
tree's ``turns`` and let go on by ``baton budget raise``, and spend after ``baton up`` was
SIGKILLed equal to the usage the store kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import baton_in, commit_all, project_env

GROW = (
    "\n[profiles.grow]\n"
    f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
    '"usage-growing", "--count", "8"]\n'
)
TASK = """Release check.

- [ ] @OPS Check the environment
  ```sh
  echo env-ok
  ```
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert baton_in(root, "init").returncode == 0
    commit_all(root)
    return root


def append(repo: Path, text: str) -> None:
    with (repo / "baton.toml").open("a", encoding="utf-8") as toml:
        toml.write(text)


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_a_run_over_its_budget_is_cancelled_and_exits_7(repo: Path) -> None:
    append(repo, GROW)
    done = baton_in(repo, "run", "--agent", "grow", "--budget", "cost_usd=0.6", "--json", "go")
    assert done.returncode == 7, done.stderr
    stream = events(done.stdout)
    [exceeded] = [e["payload"] for e in stream if e["type"] == "budget.exceeded"]
    assert (exceeded["spend"], exceeded["limit"], exceeded["action"]) == (0.75, 0.6, "cancelled")
    [cancelled] = [e["payload"] for e in stream if e["type"] == "turn.cancelled"]
    assert "budget" in cancelled["reason"]
    assert "budget exceeded" in done.stderr and "baton budget raise run" in done.stderr
    bad = baton_in(repo, "run", "--agent", "grow", "--budget", "dollars=1", "go")
    assert bad.returncode == 2 and "unknown keys dollars" in bad.stderr


def test_an_agent_without_usage_is_held_by_turns_until_a_raise(repo: Path) -> None:
    """The built-in agent reports no usage: its tree's turns hold the delegated TASK."""
    append(repo, "\n[budget]\nper_task = { turns = 1 }\n")
    (repo / "TASK.md").write_text(TASK.replace("- [ ] @OPS", "- [ ] @OPS", 1))
    created = baton_in(
        repo,
        "task",
        "new",
        "--to",
        "PM",
        "--subject",
        "Release",
        "--body-file",
        "TASK.md",
        "--json",
    )
    root = json.loads(created.stdout)["task_id"]
    up = baton_in(repo, "up", "--until-idle", "--json")
    assert up.returncode == 0, up.stderr[-2000:]
    stream = events(up.stdout)
    assert sum(e["type"] == "turn.submitted" for e in stream) == 1, "PM's one turn only"
    unmetered = [e["payload"] for e in stream if e["type"] == "budget.unmetered"]
    assert unmetered == [], "turns only: nothing unmetered to say"
    shown = json.loads(baton_in(repo, "budget", "show", "--json").stdout)
    [tree] = [s for s in shown["scopes"] if s["scope"] == "task"]
    assert tree["key"] == root and tree["spend"]["turns"] == 1
    assert tree["breaches"] == [{"dimension": "turns", "level": "hard", "spend": 1, "limit": 1}]
    raised = baton_in(repo, "budget", "raise", "task", root, "--turns", "10")
    assert raised.returncode == 0, raised.stderr
    again = baton_in(repo, "up", "--until-idle", "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    outputs = " ".join(
        (e["payload"].get("output") or {}).get("tail", "")
        for e in events(again.stdout)
        if e["type"] == "tool.execution.completed"
    )
    assert "env-ok" in outputs, "OPS ran once the limit was raised"
    status = json.loads(baton_in(repo, "status", "--json").stdout)
    assert status["pending_reviews"], "the tree reached the human's review"


def test_spend_after_a_sigkill_of_baton_up_is_the_stored_usage(repo: Path) -> None:
    append(repo, GROW.replace('"8"]', '"400"]'))
    config = (repo / "baton.toml").read_text()
    config = config.replace('agent = "builtin"', 'agent = "grow"', 1)  # the leader: PM
    (repo / "baton.toml").write_text(config)
    created = baton_in(repo, "task", "new", "--to", "PM", "--subject", "Spend money")
    assert created.returncode == 0, created.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "baton", "up", "--json"],
        cwd=repo,
        env=project_env(repo),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    watchdog = threading.Timer(180, lambda: os.killpg(proc.pid, signal.SIGKILL))
    watchdog.start()  # the read below ends with the process, whatever it does
    try:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            if '"usage.counted"' in line and '"entry":"usage"' in line.replace(" ", ""):
                seen += 1
                if seen == 5:
                    break
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert seen == 5, "the agent's spend was streamed before the kill"
    shown = json.loads(baton_in(repo, "budget", "show", "--json").stdout)
    [role] = [s for s in shown["scopes"] if s["scope"] == "role" and s["key"] == "PM"]
    runs = [r for r in _ndjson(baton_in(repo, "runs", "--json").stdout) if r["kind"] == "up"]
    stored = []
    for run in runs:
        log = baton_in(repo, "log", run["run_id"], "--json").stdout
        stored += [e["payload"] for e in events(log) if e["type"] == "usage.counted"]
    assert stored, "usage was stored before the kill"
    assert role["spend"]["cost_usd"] == pytest.approx(sum(p["cost_usd"] or 0 for p in stored))
    assert role["spend"]["turns"] == sum(p["turns"] for p in stored) == 1
    assert role["spend"]["cost_usd"] >= 1.25


def _ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_crash_after_the_crossing_leaves_the_task_parked(repo: Path) -> None:
    """``baton up`` is SIGKILLed as soon as the usage that crossed ``per_task`` is streamed
    (before or while it cancels the turn): the next ``baton up`` recovers the turn as
    interrupted and parks the TASK at its budget, never prompting it again."""
    append(repo, GROW.replace('"8"]', '"400"]') + "\n[budget]\nper_task = { cost_usd = 1.0 }\n")
    config = (repo / "baton.toml").read_text()
    (repo / "baton.toml").write_text(config.replace('agent = "builtin"', 'agent = "grow"', 1))
    created = baton_in(repo, "task", "new", "--to", "PM", "--subject", "Spend", "--json")
    assert created.returncode == 0, created.stderr
    root = json.loads(created.stdout)["task_id"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "baton", "up", "--json"],
        cwd=repo,
        env=project_env(repo),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    watchdog = threading.Timer(180, lambda: os.killpg(proc.pid, signal.SIGKILL))
    watchdog.start()
    crossed = False
    try:
        assert proc.stdout is not None
        spent = 0.0
        for line in proc.stdout:
            if line.startswith("{") and '"usage.counted"' in line:
                spent += json.loads(line)["payload"].get("cost_usd") or 0.0
                if spent >= 1.0:
                    crossed = True
                    break
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert crossed, "the crossing usage was stored and streamed before the kill"
    again = baton_in(repo, "up", "--until-idle", "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    stream = events(again.stdout)
    assert not any(e["type"] == "turn.submitted" for e in stream), "not prompted again"
    shown = json.loads(baton_in(repo, "task", "show", root, "--json").stdout)
    assert shown["baton_status"] == "needs_budget", shown
    assert "budget: per_task" in shown["note"] and "of $1.00" in shown["note"]
