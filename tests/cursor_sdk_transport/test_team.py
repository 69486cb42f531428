"""The seed's CodeFlow flow, on baton: a Cursor SDK role resumed per task, reporting via MCP.

CodeFlow (seed 002): a task file lands, the doorbell rings, the role's long-lived Cursor
agent (``Agent.create`` once, ``Agent.resume(agentId)`` after) gets the task through
``agent.send(text, {mcpServers})`` with the FCoP tools injected, calls them, and its report
is filed. Here DEV runs on the ``cursor-sdk`` transport through the real ``cursor-sdk``
client against baton's scripted bridge; the "model" is the task's own script. baton is
stopped between the two tasks, so the second one proves the agent is resumed by its id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.fcop_port.port import FcopPort
from tests.cursor_sdk_transport.support import (
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
from tests.support.project import without_isolation

pytestmark = [pytest.mark.process, pytest.mark.slow]

REPORT = "Greeting written to hello.txt; nothing left."


def task_body(n: int) -> str:
    return script(
        {"mcp": {"tool": "read_task", "args": {}}},
        {"text": f"Working on task {n}."},
        {"custom": {"tool": "write_file", "args": {"path": f"hello{n}.txt", "content": "hi\n"}}},
        {"mcp": {"tool": "write_report", "args": {"result": "done", "body": REPORT}}},
        {"usage": {"inputTokens": 50, "outputTokens": 10}},
        lead=f"Write hello{n}.txt, then file your report with write_report.",
    )


def new_task(repo: Path, n: int) -> str:
    (repo / f"TASK{n}.md").write_text(task_body(n))
    created = run(
        repo, "task", "new", "--to", "DEV", "--subject", f"Greeting {n}",
        "--body-file", f"TASK{n}.md", "--json",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return str(json.loads(created.stdout)["task_id"])


def test_a_cursor_sdk_role_is_resumed_per_task_and_files_its_reports(tmp_path: Path) -> None:
    repo = scripted_project(tmp_path)
    assert run(repo, "init").returncode == 0
    # The seed's flow: one long-lived agent for the role across tasks, in the checkout
    # (with worktree isolation each task tree gets its own agent: docs/worktrees.md).
    without_isolation(repo)
    config = repo / "baton.toml"
    text = config.read_text()
    dev = '[team.roles.DEV]\nagent = "builtin"'
    assert dev in text, "baton init's team layout changed"
    config.write_text(text.replace(dev, '[team.roles.DEV]\nagent = "cursor-scripted"'))

    first = new_task(repo, 1)
    up = run(repo, "up", "--until-idle", "--json", timeout=240)
    assert up.returncode == 0, up.stderr[-3000:]
    stream = events(up.stdout)
    (started,) = of_type(stream, "session.started")
    assert started["payload"]["how"] == "new"
    agent_id = started["payload"]["agent_session_id"]
    assert (repo / "hello1.txt").read_text() == "hi\n"
    calls = [
        e["payload"]["title"]
        for e in of_type(stream, "tool.execution.completed")
        if e["payload"]["status"] == "completed"
    ]
    assert sum("write_report" in title for title in calls) == 1, calls
    assert sum("read_task" in title for title in calls) == 1, calls

    # Restart: baton is gone, the bridge with it; the next task resumes the same agent.
    second = new_task(repo, 2)
    again = run(repo, "up", "--until-idle", "--json", timeout=240)
    assert again.returncode == 0, again.stderr[-3000:]
    (resumed,) = of_type(events(again.stdout), "session.started")
    assert resumed["payload"]["how"] == "resume"
    assert resumed["payload"]["agent_session_id"] == agent_id
    assert (repo / "hello2.txt").read_text() == "hi\n"

    # Two valid FCoP reports, one per task, filed through the injected MCP server.
    port = FcopPort(repo)
    reports = sorted((repo / "fcop" / "reports").glob("REPORT-*.md"))
    assert len(reports) == 2, reports
    refs = {port.inspect_envelope(path)["subject_ref"] for path in reports}
    assert refs == {first, second}
    assert all(REPORT in path.read_text() for path in reports)
    status = json.loads(run(repo, "status", "--json").stdout)
    assert status["board"]["counts"]["review"] == 2

    # The wire: create once, resume once, the role's server on every Send; all in schema.
    lines = trace(repo)
    check_against_schema(lines)
    creates = [x for x in lines if x["method"] == "CreateAgent" and x["kind"] == "request"]
    resumes = [x for x in lines if x["method"] == "ResumeAgent" and x["kind"] == "request"]
    sends = [x for x in lines if x["method"] == "Send" and x["kind"] == "request"]
    assert len(creates) == 1 and [r["message"]["agentId"] for r in resumes] == [agent_id]
    assert len(sends) == 2
    assert all(len(s["message"]["options"]["mcpServers"]) == 1 for s in sends)
    groups = bridge_groups(lines)
    assert len(groups) == 2 and not any(group_alive(g) for g in groups)
