"""The role-scoped MCP server as a real stdio subprocess, driven by the ``mcp`` client."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton.coordination.binding import (
    Binding,
    CurrentTask,
    read_spool,
    write_binding,
    write_pointer,
)
from baton.coordination.fcop_port import FcopPort
from baton.coordination.mcp_server import fcop_mcp_config, mcp_config
from baton.coordination.team import ALL_TOOLS, DEFAULT_TOOLS, FcopMcpCompat
from baton.errors import BatonError

ROLES = ("PM", "DEV", "QA", "OPS")


def make_binding(root: Path, state: Path, role: str) -> Binding:
    tools = ALL_TOOLS if role == "PM" else DEFAULT_TOOLS
    return write_binding(
        Binding(
            fcop_root=root,
            role=role,
            session_name=role,
            leader="PM",
            human="ADMIN",
            team_roles=ROLES,
            allowed_tools=tools,
            pointer_path=state / f"{role}.current.json",
            spool_path=state / "spool.jsonl",
        ),
        state / f"{role}.json",
    )


@asynccontextmanager
async def connect(binding: Binding) -> AsyncIterator[ClientSession]:
    entry = mcp_config(binding)
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={e["name"]: e["value"] for e in entry["env"]},
        cwd=str(Path("/")),  # the server must not depend on the agent's cwd
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(
    session: ClientSession, name: str, args: dict[str, Any] | None = None
) -> tuple[bool, dict[str, Any]]:
    result = await session.call_tool(name, args or {})
    payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return bool(result.is_error), payload


def active_task_for(port: FcopPort, role: str, sender: str = "ADMIN", **kw: Any) -> tuple[str, str]:
    created = port.create_task(
        sender=sender, recipient=role, subject=f"work for {role}", body="do it", **kw
    )
    return created.task_id, port.claim(created.task_id, actor=role).attempt_id


def test_mcp_config_is_an_acp_stdio_entry(root: Path, state_dir: Path) -> None:
    binding = make_binding(root, state_dir, "QA")
    entry = mcp_config(binding)
    assert entry["name"] == "baton"
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-2:] == ["--binding", str(binding.path)]
    assert all(set(e) == {"name", "value"} for e in entry["env"])
    assert (binding.path.stat().st_mode & 0o777) == 0o600  # type: ignore[union-attr]


def test_fcop_mcp_compat_entry_uses_its_own_venv_and_root(root: Path, tmp_path: Path) -> None:
    python = tmp_path / "fcop-venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    entry = fcop_mcp_config(FcopMcpCompat(enabled=True, python=python), root)
    assert entry["command"] == str(python)
    assert entry["args"] == ["-u", "-m", "fcop_mcp", "--root", str(root.resolve())]
    assert {"name": "FCOP_PROJECT_DIR", "value": str(root.resolve())} in entry["env"]
    with pytest.raises(BatonError, match="not enabled"):
        fcop_mcp_config(FcopMcpCompat(), root)
    with pytest.raises(BatonError, match="missing"):
        fcop_mcp_config(FcopMcpCompat(enabled=True, python=tmp_path / "nope" / "python"), root)


async def test_each_role_lists_only_its_allowlist(root: Path, state_dir: Path) -> None:
    async with connect(make_binding(root, state_dir, "QA")) as qa:
        names = [t.name for t in (await qa.list_tools()).tools]
        assert names == list(DEFAULT_TOOLS)
        error, payload = await call(
            qa, "create_task", {"recipient": "DEV", "subject": "s", "body": "b"}
        )
        assert error and payload["error"]["code"] == "TOOL_NOT_ALLOWED"
    async with connect(make_binding(root, state_dir, "PM")) as pm:
        tools = {t.name: t for t in (await pm.list_tools()).tools}
        assert list(tools) == list(ALL_TOOLS)
        schema = tools["write_report"].input_schema
        assert schema["required"] == ["result", "body"] and schema["additionalProperties"] is False


async def test_write_report_files_a_valid_report_bound_to_the_attempt(
    root: Path, state_dir: Path, port: FcopPort
) -> None:
    task_id, attempt = active_task_for(port, "QA")
    binding = make_binding(root, state_dir, "QA")
    async with connect(binding) as qa:
        error, payload = await call(qa, "write_report", {"result": "done", "body": "nothing yet"})
        assert error and payload["error"]["code"] == "NO_CURRENT_TASK"
        write_pointer(binding.pointer_path, CurrentTask(task_id, attempt, 1))
        error, task = await call(qa, "read_task")
        assert not error and (task["task_id"], task["attempt_id"], task["body"]) == (
            task_id,
            attempt,
            "do it\n",
        )
        error, report = await call(
            qa, "write_report", {"result": "done", "body": "All 12 tests pass."}
        )
        assert not error, report
    head = port.find_report_head(task_id, attempt)
    assert head is not None and head.report_id == report["report_id"]
    assert (head.sender, head.recipient, head.attempt_id, head.result) == (
        "QA",
        "ADMIN",
        attempt,
        "done",
    )
    from fcop.workspace import validate_workspace

    assert validate_workspace(root)["valid"]
    assert port.submit(task_id, actor="QA").to_stage == "review"  # Core accepts it as T3 evidence


async def test_identity_cannot_be_overridden_by_arguments(
    root: Path, state_dir: Path, port: FcopPort
) -> None:
    task_id, attempt = active_task_for(port, "QA")
    other_id, other_attempt = active_task_for(port, "DEV")
    binding = make_binding(root, state_dir, "QA")
    write_pointer(binding.pointer_path, CurrentTask(task_id, attempt, 1))
    async with connect(binding) as qa:
        for extra in ({"sender": "PM"}, {"attempt_id": other_attempt}, {"task_id": other_id}):
            error, payload = await call(
                qa, "write_report", {"result": "done", "body": "x", **extra}
            )
            assert error and payload["error"]["code"] == "UNEXPECTED_ARGUMENT"
            assert "binding" in payload["error"]["message"]
        # An edited pointer cannot make QA speak for DEV's task.
        write_pointer(binding.pointer_path, CurrentTask(other_id, other_attempt, 2))
        error, payload = await call(qa, "write_report", {"result": "done", "body": "x"})
        assert error and payload["error"]["code"] == "NOT_YOUR_TASK"
    assert port.reports_for(task_id) == [] and port.reports_for(other_id) == []


async def test_leader_create_task_sets_parent_and_is_idempotent(
    root: Path, state_dir: Path, port: FcopPort
) -> None:
    parent, attempt = active_task_for(port, "PM")
    binding = make_binding(root, state_dir, "PM")
    write_pointer(binding.pointer_path, CurrentTask(parent, attempt, 1))
    async with connect(binding) as pm:
        args = {"recipient": "QA", "subject": "Run tests", "body": "pytest -q"}
        error, child = await call(pm, "create_task", args)
        assert not error, child
        error, again = await call(pm, "create_task", args)
        assert again["task_id"] == child["task_id"] and again["existing"]
        for recipient in ("ADMIN", "PM", "MARKETING"):
            error, payload = await call(pm, "create_task", {**args, "recipient": recipient})
            assert error and payload["error"]["code"] == "INVALID_RECIPIENT"
        # The leader may not report while the child is still open.
        error, payload = await call(pm, "write_report", {"result": "done", "body": "early"})
        assert error and payload["error"]["code"] == "CHILDREN_OPEN"
    task = port.read_task(child["task_id"])
    assert (task.parent, task.sender, task.recipient, task.stage) == (parent, "PM", "QA", "inbox")


async def test_ask_human_and_review_report_go_to_the_spool(
    root: Path, state_dir: Path, port: FcopPort
) -> None:
    parent, pm_attempt = active_task_for(port, "PM")
    child = port.create_task(sender="PM", recipient="QA", subject="t", body="b", parent=parent)
    qa_attempt = port.claim(child.task_id, actor="QA").attempt_id
    report = port.write_report(
        task_id=child.task_id,
        attempt_id=qa_attempt,
        sender="QA",
        recipient="PM",
        result="done",
        body="ok",
    )
    port.submit(child.task_id, actor="QA")
    qa = make_binding(root, state_dir, "QA")
    write_pointer(qa.pointer_path, CurrentTask(child.task_id, qa_attempt, 1))
    pm = make_binding(root, state_dir, "PM")
    write_pointer(pm.pointer_path, CurrentTask(parent, pm_attempt, 1))
    async with connect(qa) as session:
        error, asked = await call(session, "ask_human", {"question": "Which DB?"})
        assert not error and asked["status"] == "pending"
    async with connect(pm) as session:
        error, _payload = await call(
            session,
            "review_report",
            {"report_id": report.report_id, "decision": "maybe", "reason": ""},
        )
        assert error
        error, reviewed = await call(
            session,
            "review_report",
            {"report_id": report.report_id, "decision": "approve", "reason": "good"},
        )
        assert not error, reviewed
    records, _ = read_spool(state_dir / "spool.jsonl")
    assert [r.kind for r in records] == ["ask_human", "review"]
    assert records[0].data["question"] == "Which DB?" and records[0].role == "QA"
    issue = (port.fcop_dir / "issues" / f"{asked['issue_id']}.md").read_text()
    assert "Which DB?" in issue and "severity: question" in issue
    decision = port.find_decision(child.task_id, qa_attempt, reviewer="PM")
    assert decision is not None and decision.review_id == reviewed["review_id"]
    assert port.read_task(child.task_id).stage == "review"  # the MCP server moves nothing


async def test_bad_binding_fails_fast(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "binding.json"
    path.write_text(json.dumps({"version": 1, "fcop_root": "relative/root"}))
    path.chmod(0o600)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "baton.coordination.mcp_server",
        "--binding",
        str(path),
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2 and b"binding" in err
