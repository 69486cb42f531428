"""Issue 9's failures of ``baton up``, reproduced as a user meets them (real CLI, built-in agent).

Each test was written against the pre-store daemon first and failed there:
agents outliving a SIGKILLed daemon, Ctrl-C leaving ``[working]`` with exit 0,
``status`` showing ``[waiting_human]`` after the answer, ``sessions`` without the
agent's session id, a leftover ``.fcop-create-*.tmp`` breaking ``fcop``'s
validator.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.project import baton_in, without_isolation

SLOW_STEP = """Do something slow.

```sh
echo started > started.txt
sleep 30
echo finished > finished.txt
```
"""

HEARTBEAT_STEP = """Keep working.

```sh
echo started > started.txt
while true; do date +%s.%N >> heartbeat.txt; sleep 0.05; done
```
"""

QUICK = """Check quickly.

```sh
echo ok
```
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert baton_in(root, "init").returncode == 0
    without_isolation(root)  # these are about signals and deaths, in the checkout itself
    return root


def _env(repo: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent / "home"),
        "XDG_STATE_HOME": str(repo.parent / "xdg"),
        "COLUMNS": "200",
    }


def _new_task(repo: Path, to: str, subject: str, body: str) -> str:
    (repo / "BODY.md").write_text(body)
    done = baton_in(repo, "task", "new", "--to", to, "--subject", subject, "--body-file", "BODY.md")
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


def _start_up(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "baton", "up", *args],
        cwd=repo,
        env=_env(repo),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait for a condition the system under test makes true (an observable file, a process)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _processes_in(directory: Path) -> list[tuple[int, str]]:
    """Live processes whose working directory is ``directory`` (agents, steps, MCP servers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) != directory:
                continue
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X"):
            continue
        found.append((int(entry.name), cmdline))
    return found


def _status(repo: Path) -> dict[str, object]:
    done = baton_in(repo, "status", "--json")
    assert done.returncode == 0, done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


def _board_row(repo: Path, task_id: str) -> dict[str, object]:
    board = _status(repo)["board"]
    assert isinstance(board, dict)
    rows = [r for r in board["open"] if r["task_id"] == task_id]
    assert rows, f"{task_id} is not on the board"
    row: dict[str, object] = rows[0]
    return row


def test_the_daemons_death_ends_its_agents_within_a_second(repo: Path) -> None:
    """After a SIGKILL of ``baton up``, its agents and their steps do no more work (a step's
    own heartbeat stops within 1 s), and no process of theirs is left."""
    _new_task(repo, "QA", "Busy", HEARTBEAT_STEP)
    up = _start_up(repo)
    try:
        _wait_for(lambda: (repo / "started.txt").exists(), 120, "the step to start")
        _wait_for(lambda: (repo / "heartbeat.txt").exists(), 30, "the heartbeat")
        assert _processes_in(repo), "the agent and its step run in the project"
        killed_at = time.time()
        os.kill(up.pid, signal.SIGKILL)
        up.wait(10)
        _wait_for(lambda: not _processes_in(repo), 10, f"the agents to stop: {_processes_in(repo)}")
        beats = [float(line) for line in (repo / "heartbeat.txt").read_text().split()]
        assert beats[-1] - killed_at < 1.0, (
            f"the step still worked {beats[-1] - killed_at:.2f}s later"
        )
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(10)
        for pid, _ in _processes_in(repo):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_shuts_up_down_and_status_says_interrupted(
    repo: Path, sig: signal.Signals
) -> None:
    task = _new_task(repo, "QA", "Slow", SLOW_STEP)
    up = _start_up(repo)
    try:
        _wait_for(lambda: (repo / "started.txt").exists(), 120, "the step to start")
        os.kill(up.pid, sig)
        code = up.wait(30)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(10)
    assert code == 128 + sig, (code, (up.stderr.read() if up.stderr else "")[-6000:])
    _wait_for(lambda: not _processes_in(repo), 5, "the agents to stop")
    row = _board_row(repo, task)
    assert row["baton_status"] == "interrupted", row
    assert not (repo / "finished.txt").exists()


def test_status_reflects_an_answer_at_once_and_sessions_show_the_agent_session(
    repo: Path,
) -> None:
    task = _new_task(repo, "QA", "Quick", QUICK)
    up = baton_in(repo, "up", "--until-idle")
    assert up.returncode == 0, up.stderr[-2000:]
    assert _board_row(repo, task)["baton_status"] == "in_review"
    inbox = json.loads("[" + ",".join(baton_in(repo, "inbox", "--json").stdout.splitlines()) + "]")
    (review,) = [r for r in inbox if r["kind"] == "review"]
    answered = baton_in(repo, "answer", review["request_id"], "--accept", "--reason", "fine")
    assert answered.returncode == 0, answered.stderr
    row = _board_row(repo, task)  # no `baton up` in between
    assert row["baton_status"] == "review_answered", row
    assert row["review"] == {"request_id": review["request_id"], "state": "answered"}

    sessions = [
        json.loads(line) for line in baton_in(repo, "sessions", "--json").stdout.splitlines()
    ]
    qa = [s for s in sessions if s["name"] == "QA"]
    assert qa and isinstance(qa[0]["session_id"], str) and qa[0]["session_id"], sessions


def test_a_leftover_publication_temp_is_cleaned_and_the_workspace_stays_valid(
    repo: Path,
) -> None:
    from baton.fcop_port.recovery import validate_workspace

    task = _new_task(repo, "QA", "Quick", QUICK)
    leftover = repo / "fcop" / "_lifecycle" / "active" / f".fcop-create-{task}-abc123.tmp"
    leftover.write_bytes(b"half a TASK")
    old = time.time() - 3600
    os.utime(leftover, (old, old))
    assert not validate_workspace(repo)["valid"]
    up = baton_in(repo, "up", "--until-idle")
    assert up.returncode == 0, up.stderr[-2000:]
    assert not leftover.exists()
    assert validate_workspace(repo)["valid"], validate_workspace(repo)["errors"]
