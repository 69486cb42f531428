"""The command line end to end, as a user runs it: subprocesses, real agents, real store."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from baton.events.model import CanonicalEvent
from baton.events.schema import render_schema

REPO = Path(__file__).resolve().parents[2]

RUNBOOK = """Make a file and look at it.

```sh
echo hello-from-step-one
```

```file out/note.txt
note body
```

```sh
cat out/note.txt
```
"""


def env_for(tmp: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp / "home"),
        "BATON_STATE_DIR": str(tmp / "state"),
        "COLUMNS": "200",
    }


def start_baton(tmp: Path, *args: str, stdin: str | None = None) -> subprocess.Popen[str]:
    """``baton ARGS`` running in the background, NDJSON on its stdout."""
    runner = subprocess.Popen(
        [sys.executable, "-m", "baton", *args],
        cwd=tmp / "ws",
        env=env_for(tmp),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if stdin is not None:
        assert runner.stdin is not None
        runner.stdin.write(stdin)
        runner.stdin.close()
    return runner


def baton(tmp: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = env_for(tmp)
    return subprocess.run(
        [sys.executable, "-m", "baton", *args],
        cwd=tmp / "ws",
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    return tmp_path


def events_of(stdout: str) -> list[CanonicalEvent]:
    return [CanonicalEvent.model_validate_json(line) for line in stdout.splitlines() if line]


def test_run_json_emits_valid_canonical_events_and_does_the_work(tmp: Path) -> None:
    result = baton(tmp, "run", "--approve", "all", "--json", "-", stdin=RUNBOOK)
    assert result.returncode == 0, result.stderr
    events = events_of(result.stdout)
    types = [e.type for e in events]
    assert types[0] == "session.started" and types[-2:] == ["turn.completed", "session.closed"]
    assert types.count("turn.completed") == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    schema = json.loads(render_schema())
    for event in events:
        jsonschema.validate(json.loads(event.to_json()), schema)
    assert (tmp / "ws" / "out" / "note.txt").read_text() == "note body\n"
    completed = [e.payload for e in events if e.type == "tool.execution.completed"]
    assert [c.status for c in completed] == ["completed", "completed", "completed"]
    assert "hello-from-step-one" in completed[0].output.tail


def test_with_nobody_to_ask_escalations_are_denied_headlessly(tmp: Path) -> None:
    result = baton(tmp, "run", "--json", "--wait-timeout", "0", "-", stdin=RUNBOOK)
    events = events_of(result.stdout)
    answered = [e.payload for e in events if e.type == "request.answered"]
    assert answered and answered[0].answer["decision"] == "deny"
    assert answered[0].decided_by == "headless" and "no-human" in (answered[0].rule or "")
    assert not (tmp / "ws" / "out").exists()
    assert result.returncode == 6  # the turn completed, but a step was denied (documented)


def test_a_waiting_permission_is_answered_from_another_process(tmp: Path) -> None:
    """The durable-requests promise end to end: agent → ledger → baton answer → agent."""
    runner = start_baton(tmp, "run", "--json", "--wait-timeout", "60", "-", stdin=RUNBOOK)
    assert runner.stdout is not None
    seen: list[CanonicalEvent] = []
    try:
        for line in runner.stdout:
            event = CanonicalEvent.model_validate_json(line)
            seen.append(event)
            if event.type == "request.created":
                inbox = baton(tmp, "inbox", "--json")
                assert event.payload.request_id in inbox.stdout
                answer = baton(tmp, "answer", event.payload.request_id, "--allow", "--json")
                assert answer.returncode == 0, answer.stderr
            if event.type == "session.closed":
                break
        assert runner.wait(timeout=60) == 0
    finally:
        runner.kill()
    types = [e.type for e in seen]
    assert types.count("request.created") == 3 and types.count("request.delivered") == 3
    answered = [e.payload for e in seen if e.type == "request.answered"]
    assert all(a.decided_by == "human" for a in answered)
    assert (tmp / "ws" / "out" / "note.txt").read_text() == "note body\n"
    again = baton(tmp, "answer", answered[0].request_id, "--deny")
    assert again.returncode != 0 and "already answered" in again.stderr


def test_log_replays_exactly_what_was_stored(tmp: Path) -> None:
    run = baton(tmp, "run", "--approve", "all", "--json", "-", stdin=RUNBOOK)
    runs = baton(tmp, "runs", "--json")
    run_id = json.loads(runs.stdout.splitlines()[0])["run_id"]
    replay = baton(tmp, "log", run_id, "--json")
    assert replay.returncode == 0
    assert replay.stdout == run.stdout
    human = baton(tmp, "log", run_id)
    assert "turn completed" in human.stdout and "hello-from-step-one" in human.stdout


def test_unknown_agent_is_a_usage_error(tmp: Path) -> None:
    result = baton(tmp, "run", "--agent", "nope", "hi")
    assert result.returncode == 2
    assert "baton: unknown agent profile 'nope'" in result.stderr
    assert "ConfigError" not in result.stderr


def test_missing_agent_binary_is_an_agent_error(tmp: Path) -> None:
    (tmp / "ws" / "baton.toml").write_text(
        '[profiles.ghost]\ncommand = ["definitely-not-installed-agent"]\n'
    )
    result = baton(tmp, "run", "--agent", "ghost", "hi")
    assert result.returncode == 3
    assert "not found on PATH" in result.stderr


def test_agents_lists_every_builtin_profile(tmp: Path) -> None:
    result = baton(tmp, "agents", "--json")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    names = {r["name"] for r in rows}
    assert {"builtin", "cursor", "claude", "codex", "gemini", "opencode", "qwen"} <= names
    assert next(r for r in rows if r["name"] == "builtin")["installed"] is True


def test_probe_reports_the_handshake(tmp: Path) -> None:
    result = baton(tmp, "probe", "builtin", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["protocolVersion"] == 1
    assert info["agentCapabilities"]["loadSession"] is True
    assert info["session_error"] is None


def test_committed_schema_is_fresh() -> None:
    committed = (REPO / "schema" / "events.schema.json").read_text(encoding="utf-8")
    assert committed == render_schema(), "run `baton schema --write`"


def test_killing_baton_mid_request_expires_it_visibly_and_loses_nothing(tmp: Path) -> None:
    runner = start_baton(tmp, "run", "--json", "--wait-timeout", "600", "-", stdin=RUNBOOK)
    assert runner.stdout is not None
    created = None
    for line in runner.stdout:
        event = CanonicalEvent.model_validate_json(line)
        if event.type == "request.created":
            created = event
            break
    assert created is not None
    runner.kill()
    runner.wait(timeout=30)
    request_id = created.payload.request_id
    inbox = baton(tmp, "inbox", "--json", "--all")
    rows = [json.loads(line) for line in inbox.stdout.splitlines() if line.strip()]
    row = next(r for r in rows if r["request_id"] == request_id)
    assert row["state"] == "expired" and "restarted" in row["reason"]
    runs = [json.loads(line) for line in baton(tmp, "runs", "--json").stdout.splitlines()]
    assert runs[0]["status"] == "interrupted"
    log = events_of(baton(tmp, "log", runs[0]["run_id"], "--json").stdout)
    assert [e.type for e in log][-1] == "request.expired"
    assert any(e.type == "request.created" and e.payload.request_id == request_id for e in log)
    late = baton(tmp, "answer", request_id, "--allow")
    assert late.returncode != 0 and "is expired" in late.stderr


def test_cursor_question_and_plan_are_answered_through_inbox_and_answer(tmp: Path) -> None:
    """agent → ledger → baton inbox → baton answer → agent continues, for Cursor's
    question and plan approval (the plan answer is bound to its revision)."""
    (tmp / "ws" / "baton.toml").write_text(
        "[profiles.fakecursor]\n"
        f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", '
        '"--scenario", "cursor-ext"]\n'
        'family = "cursor"\n'
    )
    runner = start_baton(
        tmp, "run", "--agent", "fakecursor", "--json", "--wait-timeout", "60", "go"
    )
    assert runner.stdout is not None
    seen: list[CanonicalEvent] = []
    try:
        for line in runner.stdout:
            event = CanonicalEvent.model_validate_json(line)
            seen.append(event)
            if event.type == "request.created":
                request_id = event.payload.request_id
                shown = baton(tmp, "inbox", "--json").stdout
                row = next(json.loads(x) for x in shown.splitlines() if request_id in x)
                if event.payload.kind == "question":
                    assert "question-1" in shown and "option-2" in shown
                    answer = baton(tmp, "answer", request_id, "--select", "question-1=option-2")
                else:
                    assert row["kind"] == "plan" and "# Plan" in shown
                    stale = baton(tmp, "answer", request_id, "--accept", "--revision", "0" * 64)
                    assert stale.returncode != 0 and "stale plan answer" in stale.stderr
                    answer = baton(tmp, "answer", request_id, "--accept")
                assert answer.returncode == 0, answer.stderr
            if event.type == "session.closed":
                break
        assert runner.wait(timeout=60) == 0
    finally:
        runner.kill()
    delivered = [e.payload.kind for e in seen if e.type == "request.delivered"]
    assert sorted(delivered) == ["plan", "question"]
    answered = {e.payload.kind: e.payload for e in seen if e.type == "request.answered"}
    assert answered["question"].decided_by == "human"
    assert answered["plan"].answer["decision"] == "accept"
    assert [e.type for e in seen].count("turn.completed") == 1


@pytest.mark.parametrize(
    ("scenario", "interrupts", "forced", "reason"),
    [
        ("hang-prompt", 1, False, "Ctrl-C"),  # the agent honours session/cancel
        ("ignore-cancel", 1, True, "session/cancel"),  # killed after the grace period
    ],
)
def test_ctrl_c_cancels_then_kills(
    tmp: Path, scenario: str, interrupts: int, forced: bool, reason: str
) -> None:
    (tmp / "ws" / "baton.toml").write_text(
        "[profiles.fake]\n"
        f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
        f'"{scenario}"]\n'
    )
    runner = start_baton(tmp, "run", "--agent", "fake", "--json", "go")
    assert runner.stdout is not None
    seen: list[CanonicalEvent] = []
    for line in runner.stdout:
        event = CanonicalEvent.model_validate_json(line)
        seen.append(event)
        if event.type == "turn.submitted":
            for _ in range(interrupts):
                runner.send_signal(signal.SIGINT)
        if event.type == "session.closed":
            break
    assert runner.wait(timeout=30) == 130
    cancelled = [e.payload for e in seen if e.type == "turn.cancelled"]
    assert len(cancelled) == 1 and cancelled[0].forced is forced
    assert reason in cancelled[0].reason


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux `script` for a pty")
def test_at_a_terminal_the_human_answers_the_permission(tmp: Path) -> None:
    """A real pty: the request is shown, the spinners pause, 'y' allows the step once."""
    (tmp / "ws" / "p.md").write_text("```sh\necho tty-step-ran\n```\n")
    command = f'{sys.executable} -m baton run --wait-timeout 30 "$(cat p.md)"'
    proc = subprocess.Popen(
        ["script", "-qec", command, "/dev/null"],
        cwd=tmp / "ws",
        env={**env_for(tmp), "TERM": "xterm"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    seen = b""
    answered = False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
        if not answered and b"allow it? (y = allow once" in seen:
            proc.stdin.write(b"y\r")
            proc.stdin.flush()
            answered = True
    assert proc.wait(timeout=30) == 0, seen.decode(errors="replace")[-2000:]
    text = seen.decode(errors="replace")
    assert answered and "by human (terminal)" in text and "tty-step-ran" in text
    assert "turn completed" in text


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux `script` for a pty")
def test_at_a_terminal_a_run_grant_answers_the_next_same_command(tmp: Path) -> None:
    """'r' at the prompt: allowed now and granted for the run; the second echo is not asked."""
    steps = "```sh\necho -e tty-first\n```\n\n```sh\necho -e tty-second\n```\n"
    (tmp / "ws" / "p.md").write_text(steps)
    command = f'{sys.executable} -m baton run --wait-timeout 30 "$(cat p.md)"'
    proc = subprocess.Popen(
        ["script", "-qec", command, "/dev/null"],
        cwd=tmp / "ws",
        env={**env_for(tmp), "TERM": "xterm"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    seen = b""
    prompts = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
        if seen.count(b"t/r/p = and grant") > prompts:
            prompts += 1
            proc.stdin.write(b"r\r")
            proc.stdin.flush()
    assert proc.wait(timeout=30) == 0, seen.decode(errors="replace")[-2000:]
    text = seen.decode(errors="replace")
    assert prompts == 1, text[-2000:]
    assert "tty-first" in text and "tty-second" in text and "grant:grant-" in text
