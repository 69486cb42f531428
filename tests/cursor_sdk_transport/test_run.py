"""``baton run --agent <cursor-sdk profile>``: the real cursor-sdk client, end to end.

Everything is real but Cursor's backend: the CLI, the runner, the cursor-sdk transport, the
``cursor-sdk`` 1.1.0 Python client (its Connect transport and its custom-tool callback
server), and a bridge *process* speaking the shipped ``sdk/v1`` contract
(:mod:`baton.testing.cursor_bridge`), whose recorded traffic is checked against the
protobuf schema in the wheel.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cursor_sdk_transport.support import (
    KEY,
    bridge_groups,
    check_against_schema,
    events,
    group_alive,
    of_type,
    run,
    script,
    scripted_project,
    trace,
)
from tests.support.project import project_env

pytestmark = pytest.mark.process


def test_a_scripted_run_streams_asks_writes_and_reports_usage(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    prompt = script(
        {"thinking": "Plan: greet, then write."},
        {"text": "Hello from Cursor."},
        {"custom": {"tool": "write_file", "args": {"path": "hello.txt", "content": "hi\n"}}},
        {"todos": [{"content": "write hello.txt", "status": "completed"}]},
        {"unknown": {"type": "hologram", "detail": 42}},
        {"usage": {"inputTokens": 120, "outputTokens": 30, "cacheReadTokens": 7}},
    )
    done = run(repo, "run", "--agent", "cursor-scripted", "--approve", "all", "--json", prompt)
    assert done.returncode == 0, done.stderr
    assert (repo / "hello.txt").read_text() == "hi\n"
    stream = events(done.stdout)

    (started,) = of_type(stream, "session.started")
    assert started["payload"]["how"] == "new"
    assert started["payload"]["agent_session_id"].startswith(("agent-", ""))
    assert started["payload"]["current_mode"] == "ask"
    assert started["payload"]["approval"] == "asks"
    text = "".join(e["payload"]["text"] for e in of_type(stream, "transcript.assistant"))
    assert text == "Hello from Cursor."
    # (the text may come in several events: what arrived in one read is shown at once)
    thinking = "".join(e["payload"]["text"] for e in of_type(stream, "transcript.thinking"))
    assert thinking == "Plan: greet, then write."

    # The write: the SDK's tool call (kind from baton's table), asked through the ledger,
    # written through baton's client (file.written), matched by the audit.
    (write,) = [
        e["payload"]
        for e in of_type(stream, "tool.execution.completed")
        if e["payload"]["title"] == "custom-user-tools.write_file"
    ]
    assert (write["kind"], write["status"]) == ("edit", "completed")
    (asked,) = of_type(stream, "request.created")
    assert asked["payload"]["kind"] == "permission"
    assert [a["payload"]["decided_by"] for a in of_type(stream, "request.answered")] == ["policy"]
    (written,) = of_type(stream, "file.written")
    assert written["payload"]["path"] == "hello.txt"
    assert not of_type(stream, "security.unapproved_mutation")

    (plan,) = of_type(stream, "plan.updated")
    assert [s["status"] for s in plan["payload"]["steps"]] == ["completed"]

    # The unknown SDK message: flagged, kept raw, never dropped.
    unknown = [
        e
        for e in of_type(stream, "provider.notice")
        if e["payload"]["category"] == "unclassified"
        and e["payload"]["variant"] == "cursor_sdk:hologram"
    ]
    assert len(unknown) == 1
    assert unknown[0]["raw"]["envelope"]["sdkMessage"]["message"]["detail"] == 42

    # Usage with its provenance.
    (usage,) = of_type(stream, "usage.reported")
    assert usage["payload"]["available"] is True
    assert (usage["payload"]["input_tokens"], usage["payload"]["output_tokens"]) == (120, 30)
    assert usage["payload"]["cached_read_tokens"] == 7
    assert "Cursor SDK usage messages" in usage["raw"]["_meta"]["cursor-sdk/usage"]["source"]
    (completed,) = of_type(stream, "turn.completed")
    assert completed["payload"]["stop_reason"] == "end_turn"

    # The bridge's traffic against the shipped protobuf schema; its group is gone.
    lines = trace(repo)
    checked = check_against_schema(lines)
    assert checked["request"] >= 6 and checked["stream"] >= 10 and checked["response"] >= 5
    assert checked["known_client_extra"] == 1  # the client's apiKey in SendOptions
    methods = {(line["method"], line["kind"]) for line in lines}
    assert {("GetVersion", "request"), ("CreateAgent", "request"), ("Send", "stream")} <= methods
    assert ("CallCustomTool", "request") in methods  # the host callback, recorded too
    send = next(line for line in lines if line["method"] == "Send" and line["kind"] == "request")
    assert send["message"]["options"].get("mcpServers") is None  # no role server in a one-off run
    create = next(line for line in lines if line["method"] == "CreateAgent")
    assert create["message"]["options"]["apiKey"] == KEY
    assert sorted(create["message"]["options"]["local"]["customTools"]) == [
        "edit_file",
        "run_command",
        "write_file",
    ]
    assert "edit" not in create["message"]["options"]["tools"]["names"]
    (pgid,) = bridge_groups(lines)
    assert not group_alive(pgid)


def test_a_denied_write_is_not_written_and_the_model_is_told(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    prompt = script(
        {"custom": {"tool": "write_file", "args": {"path": "no.txt", "content": "x"}}},
        {"write": {"path": "builtin.txt", "content": "y"}},
    )
    done = run(repo, "run", "--agent", "cursor-scripted", "--approve", "none", "--json", prompt)
    assert not (repo / "no.txt").exists() and not (repo / "builtin.txt").exists()
    stream = events(done.stdout)
    answers = [a["payload"]["answer"]["decision"] for a in of_type(stream, "request.answered")]
    assert answers == ["deny"]
    failed = {
        e["payload"]["title"]: e["payload"]["raw_output"]
        for e in of_type(stream, "tool.execution.completed")
    }
    assert "denied by baton" in json.dumps(failed["custom-user-tools.write_file"])
    # Cursor's built-in write is not even offered in ask mode (the tools allowlist).
    assert "not offered" in json.dumps(failed["write builtin.txt"])
    assert done.returncode == 6, done.stderr  # completed, but steps failed
    check_against_schema(trace(repo))


def test_agent_mode_approves_itself_refused_unless_declared_then_audited(tmp_path: Path) -> None:
    extra = '\n[profiles.cursor-agent]\nextends = "cursor-scripted"\nmode = "agent"\n'
    repo = scripted_project(tmp_path, extra=extra)
    prompt = script({"write": {"path": "self.txt", "content": "mine\n"}})
    refused = run(repo, "run", "--agent", "cursor-agent", "--json", prompt)
    assert refused.returncode == 4, refused.stderr
    assert of_type(events(refused.stdout), "security.approval_refused")
    assert not (repo / "self.txt").exists()

    config = repo / "baton.toml"
    config.write_text(config.read_text() + "agent_approves = true\n")
    done = run(repo, "run", "--agent", "cursor-agent", "--json", prompt)
    assert (repo / "self.txt").read_text() == "mine\n"
    stream = events(done.stdout)
    assert of_type(stream, "security.approval_bypass")
    (finding,) = of_type(stream, "security.unapproved_mutation")
    assert finding["payload"]["expected"] is True
    assert done.returncode == 0, done.stderr


def test_a_failed_run_fails_the_turn_with_the_sdk_reason(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    prompt = script(
        {"text": "Trying."}, {"error": {"code": "usage_limit_exceeded", "message": "out of credit"}}
    )
    done = run(repo, "run", "--agent", "cursor-scripted", "--json", prompt)
    assert done.returncode == 1, done.stderr
    (failed,) = of_type(events(done.stdout), "turn.failed")
    assert "usage_limit_exceeded" in failed["payload"]["message"]
    assert "out of credit" in failed["payload"]["message"]
    check_against_schema(trace(repo))


def test_no_key_is_exit_3_with_one_line_and_no_process_left(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path, credentials=False)  # as the built-in profile: none bound
    done = run(repo, "run", "--agent", "cursor-scripted", "hi")
    assert done.returncode == 3, done.stderr
    # (a loaded machine may also show "baton: starting …" first: progress, not the error)
    lines = [line for line in done.stderr.splitlines() if "CURSOR_API_KEY" in line]
    assert len(lines) == 1 and lines[0].startswith("baton: "), done.stderr
    (pgid,) = bridge_groups(trace(repo))
    assert not group_alive(pgid)


def test_cancel_ends_the_run_and_leaves_no_process(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    prompt = script({"task": {"description": "look around"}}, {"wait_cancel": True})
    env = {**project_env(repo), "CURSOR_API_KEY": KEY}
    proc = subprocess.Popen(
        [sys.executable, "-m", "baton", "run", "--agent", "cursor-scripted", "--json", prompt],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # wait on the condition: the run is under way
        if '"delegation.completed"' in line:
            break
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    stream = events(out)
    (cancelled,) = of_type(stream, "turn.cancelled")
    assert cancelled["payload"]["forced"] is False  # the run ended cancelled: no kill needed
    lines = trace(repo)
    assert any(line["method"] == "CancelRun" and line["kind"] == "request" for line in lines)
    check_against_schema(lines)
    (pgid,) = bridge_groups(lines)
    assert not group_alive(pgid)


def start(repo: Path, prompt: str) -> subprocess.Popen[str]:
    env = {**project_env(repo), "CURSOR_API_KEY": KEY}
    return subprocess.Popen(
        [sys.executable, "-m", "baton", "run", "--agent", "cursor-scripted", "--json", prompt],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen[str], event: str) -> list[str]:
    """Read the NDJSON stream until ``event`` (a condition, never a sleep)."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if f'"{event}"' in line:
            return seen
    raise AssertionError(f"{event} never came: {seen[-5:]}")


def test_a_bridge_that_ignores_cancel_is_killed_with_its_whole_group(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    proc = start(repo, script({"task": {"description": "look"}}, {"hang": True}))
    seen = wait_for(proc, "delegation.completed")
    os.kill(proc.pid, signal.SIGINT)  # cancel: CancelRun reaches a bridge that ignores it
    assert proc.stderr is not None
    for line in proc.stderr:  # baton says it is cancelling: the first signal was handled
        if "again to kill" in line:
            break
    os.kill(proc.pid, signal.SIGINT)  # again: kill
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (cancelled,) = of_type(events("".join(seen) + out), "turn.cancelled")
    assert cancelled["payload"]["forced"] is True
    (pgid,) = bridge_groups(trace(repo))
    assert not group_alive(pgid)


def test_a_bridge_that_dies_mid_run_fails_the_turn_and_leaves_nothing(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    prompt = script({"text": "About to crash."}, {"exit": 7})
    done = run(repo, "run", "--agent", "cursor-scripted", "--json", prompt)
    assert done.returncode != 0, done.stderr
    stream = events(done.stdout)
    assert of_type(stream, "turn.failed"), [e["type"] for e in stream]
    (pgid,) = bridge_groups(trace(repo))
    assert not group_alive(pgid)


def test_a_bridge_announcing_a_non_loopback_address_is_refused(tmp_path: Path) -> None:
    line = json.dumps(
        {
            "schemaVersion": 1,
            "transport": "tcp",
            "protocol": "connect",
            "url": "http://10.1.2.3:80",
            "authToken": "t",
        }
    )
    code = f"import sys,time; sys.stderr.write('cursor-sdk-bridge ready ' + {line!r} + '\\n'); sys.stderr.flush(); time.sleep(300)"
    extra = (
        '\n[profiles.cursor-elsewhere]\nextends = "cursor-sdk"\n'
        f'command = ["$PYTHON", "-c", {json.dumps(code)}]\n'
    )
    repo = scripted_project(tmp_path, extra=extra)
    done = run(repo, "run", "--agent", "cursor-elsewhere", "hi")
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if "loopback" in line]
    assert len(errors) == 1 and errors[0].startswith("baton: "), done.stderr
    left = [
        entry.name
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _cmdline(entry).find(b"10.1.2.3") >= 0
    ]
    assert left == []  # the impostor was stopped with its group


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""
