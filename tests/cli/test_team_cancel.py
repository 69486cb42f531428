"""``baton cancel SLOT``: a role's running turn in ``baton up`` is cancelled from another
terminal (the dashboard's Cancel turn, from the command line; issue 14 item 5).

The real ``baton up`` runs the fake agent's ``silent`` scenario on DEV (it says nothing
until cancelled); the test waits on ``baton up``'s NDJSON stream, never on a sleep.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import IO

from tests.cli.conftest import baton_cli, spawn_baton


def _until(stream: IO[str], event: str) -> dict[str, object]:
    for line in stream:  # bounded: the role's turn timeout ends the turn at the latest
        if line.startswith("{") and (data := json.loads(line))["type"] == event:
            return data  # type: ignore[no-any-return]
    raise AssertionError(f"baton up ended without a {event}")


def test_cancel_a_role_turn_from_the_command_line(project: Path, user_home: Path) -> None:
    toml = project / "baton.toml"
    with toml.open("a") as f:
        f.write(
            "\n[profiles.silent]\n"
            f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
            '"silent"]\n'
        )
    text = toml.read_text()
    dev = text.index("[team.roles.DEV]")
    toml.write_text(text[:dev] + text[dev:].replace('agent = "builtin"', 'agent = "silent"', 1))
    idle = baton_cli(project, "cancel", "DEV", home=user_home)
    assert idle.returncode == 1 and "no baton up is running" in idle.stderr, idle.stderr
    up = spawn_baton(project, "up", "--json", home=user_home)
    try:
        created = baton_cli(
            project, "task", "new", "--to", "DEV", "--subject", "Think", "--body-file", "-",
            "--json", home=user_home, stdin="Think, then report.\n",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        task_id = json.loads(created.stdout)["task_id"]
        assert up.stdout is not None
        _until(up.stdout, "turn.submitted")
        wrong = baton_cli(project, "cancel", "DEV", "--task", "TASK-nope", home=user_home)
        assert wrong.returncode == 1 and "no longer on TASK-nope" in wrong.stderr, wrong.stderr
        asked = baton_cli(
            project, "cancel", "DEV", "--task", task_id, "--reason", "too slow", "--json",
            home=user_home,
        )  # fmt: skip
        assert asked.returncode == 0, asked.stderr
        assert json.loads(asked.stdout)["task_id"] == task_id
        cancelled = _until(up.stdout, "turn.cancelled")
        said = "ADMIN cancelled the turn from the command line: too slow"
        assert cancelled["payload"]["reason"] == said  # type: ignore[index]
        # Not re-prompted: the task waits for the human, who is asked in the inbox.
        inbox = baton_cli(project, "inbox", "--json", home=user_home)
        assert said in inbox.stdout and task_id in inbox.stdout, inbox.stdout
        again = baton_cli(project, "cancel", "DEV", home=user_home)
        assert again.returncode == 1 and "no turn to cancel" in again.stderr, again.stderr
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.communicate(timeout=120)
        except Exception:
            up.kill()
            up.communicate()
    sessions = [
        json.loads(line)
        for line in baton_cli(project, "sessions", "--json", home=user_home).stdout.splitlines()
    ]
    assert [s["turns"] for s in sessions if s["name"] == "DEV"] == [1]
