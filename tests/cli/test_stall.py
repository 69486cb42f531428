"""A stalled turn on the terminal surfaces (issue 12 item 4): the live view of ``baton run``
and ``baton up`` says so in one line and again when the agent speaks; ``baton status``
shows a running turn that is stalled, with how long, until the agent speaks again.

The CLI test runs the real ``baton`` command with the fake agent's ``silent`` scenario
(it says nothing until cancelled) and waits on the NDJSON stream, never on a sleep.
"""

from __future__ import annotations

import io
import json
import signal
import sys
from pathlib import Path

from rich.console import Console

from baton.cli.render import HumanRenderer
from baton.events.model import TurnResumed, TurnStalled
from baton.events.sequencer import Sequencer
from tests.cli.conftest import baton_cli, spawn_baton


def _view(labeler: str | None = None) -> tuple[HumanRenderer, io.StringIO]:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, color_system=None, width=120)
    return HumanRenderer(
        console, live=False, labeler=(lambda _e: labeler) if labeler else None
    ), buffer


def test_the_live_view_says_a_turn_stalled_and_when_it_resumed() -> None:
    stamp = Sequencer("run-view").stamp
    view, buffer = _view()
    view(stamp(TurnStalled(silent_ms=60_000, threshold_ms=60_000, timeout_in_ms=3_540_000)))
    view(stamp(TurnResumed(silent_ms=65_400)))
    view.close()
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "⏳ the agent has said nothing for 1m 0s (turn timeout in 59m 0s)",
        "▸ the agent spoke again after 1m 5s of silence",
    ]


def test_baton_up_labels_the_stall_with_its_role() -> None:
    view, buffer = _view(labeler="DEV")
    view(Sequencer("run-up").stamp(TurnStalled(silent_ms=75_000, threshold_ms=60_000)))
    view.close()
    assert buffer.getvalue().splitlines() == ["DEV ▏⏳ the agent has said nothing for 1m 15s"]


def _silent_profile(project: Path) -> None:
    with (project / "baton.toml").open("a") as toml:
        toml.write(
            "\n[profiles.silent]\n"
            f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
            '"silent"]\n'
        )


def test_status_shows_a_stalled_turn_until_the_agent_speaks(project: Path, user_home: Path) -> None:
    _silent_profile(project)
    run = spawn_baton(
        project,
        "run",
        "--agent",
        "silent",
        "--stall-timeout",
        "0.2",
        "--timeout",
        "300",
        "--json",
        "go",
        home=user_home,
    )
    try:
        assert run.stdout is not None
        seen: list[str] = []
        for line in run.stdout:  # bounded: the turn timeout ends the run at the latest
            seen.append(json.loads(line)["type"])
            if seen[-1] == "turn.stalled":
                break
        assert seen[-1] == "turn.stalled", seen
        status = baton_cli(project, "status", home=user_home)
        assert status.returncode == 0, status.stderr
        assert "turns running:" in status.stdout
        stalled = [ln for ln in status.stdout.splitlines() if "⏳ stalled" in ln]
        assert len(stalled) == 1 and "the agent has said nothing for" in stalled[0], status.stdout
        assert "turn timeout in" in stalled[0]
        data = json.loads(baton_cli(project, "status", "--json", home=user_home).stdout)
        [turn] = data["turns"]
        assert turn["stalled"] and turn["silent_ms"] >= 200 and turn["role"] is None
        run.send_signal(signal.SIGINT)  # session/cancel: the silent agent speaks once
        rest, err = run.communicate(timeout=120)
        types = seen + [json.loads(line)["type"] for line in rest.splitlines()]
        assert types.count("turn.stalled") == 1 and types.count("turn.resumed") == 1, types
        assert types.index("turn.resumed") < types.index("turn.cancelled")
        assert run.returncode == 130, err
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    after = json.loads(baton_cli(project, "status", "--json", home=user_home).stdout)
    assert after["turns"] == []
    assert "⏳" not in baton_cli(project, "status", home=user_home).stdout


def test_up_status_and_sessions_show_a_silent_role(project: Path, user_home: Path) -> None:
    _silent_profile(project)
    toml = project / "baton.toml"
    with toml.open("a") as f:
        f.write("stall_timeout = 0.2\n")  # still inside [profiles.silent]
    text = toml.read_text()
    dev = text.index("[team.roles.DEV]")
    toml.write_text(text[:dev] + text[dev:].replace('agent = "builtin"', 'agent = "silent"', 1))
    up = spawn_baton(project, "up", "--json", home=user_home)
    try:
        created = baton_cli(
            project, "task", "new", "--to", "DEV", "--subject", "Think", "--body-file", "-",
            home=user_home, stdin="Think, then report.\n",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        assert up.stdout is not None
        for line in up.stdout:  # bounded: the role's turn timeout ends the turn at the latest
            if line.startswith("{") and json.loads(line)["type"] == "turn.stalled":
                break
        else:
            raise AssertionError("baton up ended without a turn.stalled")
        sessions = baton_cli(project, "sessions", home=user_home)
        [row] = [ln for ln in sessions.stdout.splitlines() if ln.startswith("DEV")]
        assert "STALLED" in row, sessions.stdout
        status = baton_cli(project, "status", home=user_home).stdout
        [line] = [ln for ln in status.splitlines() if "⏳ stalled" in ln]
        assert line.strip().startswith("DEV turn-"), status
        [turn] = json.loads(baton_cli(project, "status", "--json", home=user_home).stdout)["turns"]
        assert turn["role"] == "DEV" and turn["stalled"]
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.communicate(timeout=120)
        except Exception:
            up.kill()
            up.communicate()
