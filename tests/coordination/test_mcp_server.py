"""The role-scoped MCP server as a real stdio subprocess, driven by the ``mcp`` client."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from baton.errors import BatonError
from baton.fcop_port.port import FcopPort
from baton.role_tools.binding import SlotAccess
from baton.role_tools.hub import RoleHub
from baton.role_tools.server import fcop_mcp_config, mcp_config
from baton.store import team_sql
from baton.store.sqlite import SqliteStore
from baton.store.store import Store
from baton.team.records import OutboxEntry
from baton.team_config import ALL_TOOLS, DEFAULT_TOOLS, FcopMcpCompat
from tests.coordination.slots import open_slot, own_project, point


@pytest.fixture
def store(state_dir: Path) -> Iterator[Store]:
    opened = SqliteStore.open(state_dir / "baton.db")
    own_project(opened)
    try:
        yield opened
    finally:
        opened.close()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
"""A raw MCP ``initialize`` request line, for tests that speak the wire themselves."""

TRANSPORTS = ("server", "shim", "http")
"""The per-slot server (``role_mcp``), and the daemon's hub through the stdio shim and HTTP."""

Connect = Callable[[SlotAccess], AbstractAsyncContextManager[ClientSession]]


@pytest.fixture(params=TRANSPORTS)
async def connect(request: pytest.FixtureRequest, store: Store) -> AsyncIterator[Connect]:
    """Open an MCP client session on a slot's tools over one transport."""
    transport = request.param
    hub = (
        None
        if transport == "server"
        else await RoleHub.start(store, store.path.parent, http=transport == "http")
    )

    @asynccontextmanager
    async def open_session(access: SlotAccess) -> AsyncIterator[ClientSession]:
        if hub is None:
            entry = mcp_config(access.binding())
        else:
            credential = hub.issue(access.slot)
            entry = (hub.http_entry if transport == "http" else hub.stdio_entry)(credential)
        async with client_session(entry) as session:
            yield session

    try:
        yield open_session
    finally:
        if hub is not None:
            await hub.aclose()


@asynccontextmanager
async def client_session(entry: dict[str, Any]) -> AsyncIterator[ClientSession]:
    """An initialized ``mcp`` client on an ACP ``mcpServers`` entry (stdio or http)."""
    if entry.get("type") == "http":
        headers = {h["name"]: h["value"] for h in entry["headers"]}
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(entry["url"], http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
        return
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


def test_mcp_config_is_an_acp_stdio_entry(root: Path, store: Store) -> None:
    binding = open_slot(store, root, "QA").binding()
    entry = mcp_config(binding, env={"EXTRA": "1"})
    assert entry["name"] == "baton"
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-4:] == ["--store", str(store.path), "--slot", "QA"]
    assert all(set(e) == {"name", "value"} for e in entry["env"])
    assert {"name": "EXTRA", "value": "1"} in entry["env"]
    assert (store.path.stat().st_mode & 0o777) == 0o600


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


async def test_each_role_lists_only_its_allowlist(
    root: Path, store: Store, connect: Connect
) -> None:
    async with connect(open_slot(store, root, "QA")) as qa:
        names = [t.name for t in (await qa.list_tools()).tools]
        assert names == list(DEFAULT_TOOLS)
        error, payload = await call(
            qa, "create_task", {"recipient": "DEV", "subject": "s", "body": "b"}
        )
        assert error and payload["error"]["code"] == "TOOL_NOT_ALLOWED"
    async with connect(open_slot(store, root, "PM")) as pm:
        tools = {t.name: t for t in (await pm.list_tools()).tools}
        assert list(tools) == list(ALL_TOOLS)
        schema = tools["write_report"].input_schema
        assert schema["required"] == ["result", "body"] and schema["additionalProperties"] is False


async def test_write_report_files_a_valid_report_bound_to_the_attempt(
    root: Path, store: Store, port: FcopPort, connect: Connect
) -> None:
    task_id, attempt = active_task_for(port, "QA")
    binding = open_slot(store, root, "QA")
    async with connect(binding) as qa:
        error, payload = await call(qa, "write_report", {"result": "done", "body": "nothing yet"})
        assert error and payload["error"]["code"] == "NO_CURRENT_TASK"
        point(binding, task_id, attempt)
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
    from baton.fcop_port.recovery import validate_workspace

    assert validate_workspace(root)["valid"]
    assert port.submit(task_id, actor="QA").to_stage == "review"  # Core accepts it as T3 evidence


async def test_identity_cannot_be_overridden_by_arguments(
    root: Path, store: Store, port: FcopPort, connect: Connect
) -> None:
    task_id, attempt = active_task_for(port, "QA")
    other_id, other_attempt = active_task_for(port, "DEV")
    binding = open_slot(store, root, "QA")
    point(binding, task_id, attempt)
    async with connect(binding) as qa:
        for extra in ({"sender": "PM"}, {"attempt_id": other_attempt}, {"task_id": other_id}):
            error, payload = await call(
                qa, "write_report", {"result": "done", "body": "x", **extra}
            )
            assert error and payload["error"]["code"] == "UNEXPECTED_ARGUMENT"
            assert "binding" in payload["error"]["message"]
        # An edited pointer cannot make QA speak for DEV's task.
        point(binding, other_id, other_attempt)
        error, payload = await call(qa, "write_report", {"result": "done", "body": "x"})
        assert error and payload["error"]["code"] == "NOT_YOUR_TASK"
    assert port.reports_for(task_id) == [] and port.reports_for(other_id) == []


async def test_leader_create_task_sets_parent_and_is_idempotent(
    root: Path, store: Store, port: FcopPort, connect: Connect
) -> None:
    parent, attempt = active_task_for(port, "PM")
    binding = open_slot(store, root, "PM")
    point(binding, parent, attempt)
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


async def test_ask_human_and_review_report_go_to_the_outbox(
    root: Path, store: Store, port: FcopPort, connect: Connect
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
    qa = open_slot(store, root, "QA")
    point(qa, child.task_id, qa_attempt)
    pm = open_slot(store, root, "PM")
    point(pm, parent, pm_attempt)
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
    records = [OutboxEntry.from_row(r) for r in store.read_tx(team_sql.open_outbox)]
    assert [r.kind for r in records] == ["ask_human", "review"]
    assert records[0].data["question"] == "Which DB?" and records[0].role == "QA"
    issue = (port.fcop_dir / "issues" / f"{asked['issue_id']}.md").read_text()
    assert "Which DB?" in issue and "severity: question" in issue
    decision = port.find_decision(child.task_id, qa_attempt, reviewer="PM")
    assert decision is not None and decision.review_id == reviewed["review_id"]
    assert port.read_task(child.task_id).stage == "review"  # the MCP server moves nothing


async def test_bad_binding_fails_fast(tmp_path: Path) -> None:
    import asyncio

    db = tmp_path / "baton.db"
    with SqliteStore.open(db) as store:
        store.write_sync(
            lambda tx: team_sql.SLOTS.upsert(
                tx,
                {
                    "slot": "QA",
                    "role": "QA",
                    "agent": "x",
                    "state": "idle",
                    "binding": json.dumps({"version": 2, "fcop_root": "relative/root"}),
                    "updated_at": "now",
                },
            )
        )
    for args in (["--slot", "QA"], ["--slot", "NOPE"]):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "baton.role_tools.server",
            "--store",
            str(db),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 2 and (b"binding" in err or b"no slot" in err), err


async def test_write_tools_refuse_once_the_daemon_is_gone_and_the_server_exits(
    root: Path, store: Store, port: FcopPort
) -> None:
    import asyncio
    import time

    task_id, attempt = active_task_for(port, "QA")
    access = open_slot(store, root, "QA")
    point(access, task_id, attempt)
    daemon = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        own_project(store, daemon.pid)
        entry = mcp_config(access.binding())
        server = await asyncio.create_subprocess_exec(
            entry["command"],
            *entry["args"],
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        reply = await asyncio.wait_for(server.stdout.readline(), 30)
        assert json.loads(reply)["id"] == 1  # serving
        # The daemon dies: the server notices through its pidfd, without any request.
        daemon.kill()
        await daemon.wait()
        died = time.monotonic()
        await asyncio.wait_for(server.wait(), 10)
        assert time.monotonic() - died < 1.5
    finally:
        if daemon.returncode is None:
            daemon.kill()
            await daemon.wait()
    from baton.role_tools.server import RoleTools, ToolRefused

    tools = RoleTools(access, port=port)
    with pytest.raises(ToolRefused) as refused:
        tools.call("write_report", {"result": "done", "body": "too late"})
    assert refused.value.code == "DAEMON_GONE"
    assert tools.call("read_task", {})["task_id"] == task_id  # reading is harmless
    assert port.reports_for(task_id) == []
