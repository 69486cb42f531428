"""Long-running commands stop cleanly however they are asked to, and say so in their exit
code: SIGTERM/SIGHUP to ``baton run`` (no orphaned agent, the run finished, its private
root gone), ``baton down`` from another shell, a headless request that says how to answer."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from baton.events.model import CanonicalEvent
from baton.store.sqlite import SqliteStore
from tests.cli.conftest import baton_cli, spawn_baton


def agents_in(workspace: Path) -> set[int]:
    """Pids of fake agents whose working directory is ``workspace``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"baton.testing.fake_agent" in cmdline and Path(cwd) == workspace:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_a_run_cleanly(
    project: Path, user_home: Path, sig: signal.Signals, code: int
) -> None:
    with (project / "baton.toml").open("a") as toml:
        toml.write(
            "\n[profiles.fake]\n"
            f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
            '"hang-prompt"]\n'
        )
    runner = spawn_baton(project, "run", "--agent", "fake", "--json", "go", home=user_home)
    assert runner.stdout is not None
    seen: list[CanonicalEvent] = []
    agents: set[int] = set()
    try:
        for line in runner.stdout:
            event = CanonicalEvent.model_validate_json(line)
            seen.append(event)
            if event.type == "turn.submitted":
                agents = agents_in(project)
                runner.send_signal(sig)
        assert runner.wait(timeout=60) == code
    finally:
        runner.kill()
    assert agents, "the fake agent was not found while it ran"
    assert not any(alive(pid) for pid in agents), "the agent was orphaned"
    cancelled = [e.payload for e in seen if e.type == "turn.cancelled"]
    assert len(cancelled) == 1 and sig.name in cancelled[0].reason
    assert seen[-1].type == "session.closed"
    with SqliteStore.open(project / ".baton" / "baton.db") as store:
        (run,) = store.list_runs()
        assert run.status == "cancelled" and run.ended_at
    # The run's private launch root (HOME, XDG, TMPDIR of the agent) is gone.
    (agents_dir,) = (user_home / ".local" / "state" / "baton" / "projects").glob("*/agents")
    assert list(agents_dir.iterdir()) == []


def test_down_stops_a_running_up_from_another_shell(project: Path, user_home: Path) -> None:
    up = spawn_baton(project, "up", home=user_home)
    try:
        assert up.stdout is not None
        first = up.stdout.readline()
        assert first.startswith("baton up · watching 4 roles (PM, DEV, QA, OPS)"), first
        assert "stop with Ctrl-C or `baton down`" in first
        again = baton_cli(project, "up", "--until-idle", home=user_home)
        assert again.returncode == 1 and "already running" in again.stderr
        down = baton_cli(project, "down", home=user_home)
        assert down.returncode == 0, down.stderr
        assert down.stdout.startswith(f"stopped baton up (pid {up.pid})")
        assert up.wait(timeout=30) == 0
        rest = up.stdout.read()
        assert "baton up · done 0" in rest
        assert "baton down: stopping the team" in (up.stderr.read() if up.stderr else "")
    finally:
        up.kill()
    nothing = baton_cli(project, "down", home=user_home)
    assert nothing.returncode == 0 and "no `baton up` is running" in nothing.stdout
    with SqliteStore.open(project / ".baton" / "baton.db") as store:
        (run,) = store.list_runs()
        assert run.kind == "up" and run.status == "completed"


def test_idle_up_prints_a_heartbeat(project: Path, user_home: Path) -> None:
    up = spawn_baton(project, "up", "--heartbeat", "0.4", home=user_home, stderr=False)
    try:
        assert up.stdout is not None
        up.stdout.readline()  # watching …
        beat = up.stdout.readline()
        assert beat.startswith("· idle 0m · watching 4 roles"), beat
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 130
        up.kill()


RUNBOOK = "```sh\necho needs-a-yes\n```\n"


def test_headless_run_says_how_where_and_until_when_then_exits_6(
    project: Path, user_home: Path
) -> None:
    runner = spawn_baton(
        project,
        "run",
        "--wait-timeout",
        "3",
        "--remind-every",
        "0.5",
        "-",
        home=user_home,
        stdin=True,
    )
    out, err = runner.communicate(RUNBOOK, timeout=120)
    assert runner.returncode == 6, err
    assert "? permission request req-" in out
    hint = next(line for line in err.splitlines() if "waiting for you" in line)
    request_id = out.split("? permission request ")[1].split(":")[0]
    assert f"baton answer {request_id} --allow | --deny" in hint
    assert "from another shell" in hint and "denied at" in hint and "UTC" in hint
    assert f"⏳ still waiting for {request_id}" in err
    assert (
        "the turn completed, but not every step ran (1 request expired unanswered, "
        "1 step failed); exit 6"
    ) in err
    assert "Traceback" not in err


def test_log_takes_a_prefix_and_follows_a_running_run(project: Path, user_home: Path) -> None:
    runner = spawn_baton(
        project,
        "run",
        "--json",
        "--wait-timeout",
        "60",
        "-",
        home=user_home,
        stdin=True,
        stderr=False,
    )
    assert runner.stdin is not None and runner.stdout is not None
    runner.stdin.write(RUNBOOK)
    runner.stdin.close()
    request_id = run_id = ""
    for line in runner.stdout:
        event = CanonicalEvent.model_validate_json(line)
        run_id = event.run_id
        if event.type == "request.created":
            request_id = event.payload.request_id  # type: ignore[attr-defined]
            break
    follower = spawn_baton(
        project, "log", "--follow", run_id[: len("run-20261201-11")], home=user_home
    )
    try:
        answer = baton_cli(project, "answer", request_id[:10], "--allow", home=user_home)
        assert answer.returncode == 0, answer.stderr
        assert runner.wait(timeout=60) == 0
        out, err = follower.communicate(timeout=60)
    finally:
        runner.kill()
        follower.kill()
    assert follower.returncode == 0, err
    assert "needs-a-yes" in out and "✔ turn completed" in out
    assert out.index("? permission request") < out.index("✔ turn completed")


def test_serve_says_port_in_use_before_any_url(project: Path, user_home: Path) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        result = baton_cli(project, "serve", "--port", str(port), home=user_home)
    finally:
        taken.close()
    assert result.returncode == 2
    assert result.stdout == ""  # no login URL for a server that never ran
    line = result.stderr.strip()
    assert line.startswith(f"baton: cannot serve the dashboard on 127.0.0.1:{port}") and (
        "pick another --port" in line and "\n" not in line
    ), line


def test_serve_stops_on_sigterm_and_headless_runs_point_at_it(
    project: Path, user_home: Path
) -> None:
    serve = spawn_baton(project, "serve", "--port", "0", home=user_home)
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line.startswith("baton dashboard: http://"), line
        url = line.split()[2].split("/login")[0] + "/"
        record = project / ".baton" / "services" / "serve.json"
        assert record.exists() and "code=" not in record.read_text()
        run = baton_cli(project, "run", "--wait-timeout", "1", "-", home=user_home, stdin=RUNBOOK)
        assert run.returncode == 6
        assert f"(from another shell or the dashboard {url})" in run.stderr
        assert "plan ✘ sh: echo needs-a-yes" in run.stdout  # a failed step is not ticked
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 143
    finally:
        serve.kill()
    assert not record.exists()


def test_ctrl_c_while_baton_is_starting_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Imports take seconds on a loaded machine; a Ctrl-C then is not a traceback."""
    import baton.cli.app
    from baton.cli import entry

    def interrupted(argv: list[str] | None = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(baton.cli.app, "main", interrupted)
    with pytest.raises(SystemExit) as exited:
        entry.main(["status"])
    assert exited.value.code == 130
    assert capsys.readouterr().err == "baton: interrupted (Ctrl-C) while starting\n"
