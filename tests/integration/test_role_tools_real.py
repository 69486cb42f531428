"""Real agents file their REPORT through the daemon's role MCP tools, over HTTP and the shim.

For claude-agent-acp, codex-acp and Qwen Code (npm, pinned, offline against their scripted
model servers): a role slot's session is opened by baton's real role-session factory over
a running :class:`~baton.role_tools.hub.RoleHub`, once with the HTTP entry (all three
advertise ``mcpCapabilities.http``) and once forced onto the stdio shim; the scripted model
calls the tool ending in ``write_report``, and FCoP holds a valid REPORT on the slot's
attempt, with sender and recipient from baton's binding. (OpenCode's equivalent is
``test_opencode_team.py``, through ``baton up``.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from baton.agent_profile import AgentProfile, SeedFile
from baton.config import load_config
from baton.events.sequencer import Sequencer
from baton.fcop_port.port import FcopPort
from baton.requests.ledger import Ledger
from baton.role_tools.hub import RoleHub
from baton.runner.emitter import EventEmitter
from baton.store.sqlite import SqliteStore
from baton.team import role_sessions
from baton.team.role_sessions import role_session_factory
from baton.team_config import DEFAULT_TOOLS, RoleSpec
from tests.coordination.conftest import authority, port, root
from tests.coordination.slots import open_slot, own_project, point
from tests.support.agents import DUMMY_KEY, claude_profile, codex_profile, qwen_profile
from tests.support.anthropic_stub import AnthropicStub
from tests.support.llm_scripts import find_tool
from tests.support.llm_stub import LLMStub
from tests.support.model_server import ScriptedServer, Text, ToolCall
from tests.support.responses_stub import ResponsesStub

__all__ = ["authority", "port", "root"]  # the FCoP workspace fixtures

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

REPORT_BODY = "Checked the greeting; all good. Nothing left."
PROMPTS = 4


def report_script(req: Any) -> Any:
    """Call the offered ``*write_report`` once, then end with text."""
    if req.has_tool_result:
        return Text("Report filed.")
    arguments = {"result": "done", "body": REPORT_BODY}
    name = find_tool(req.tool_names, "write_report")
    if name is not None:
        return ToolCall(name, arguments, call_id="call_report_1")
    for namespace, tool in _namespaced(req.body):
        if tool == "write_report":
            return ToolCall(tool, arguments, call_id="call_report_1", namespace=namespace)
    return Text("I do not have that tool.")


def _no_tool_search(profile: AgentProfile) -> AgentProfile:
    return dataclasses.replace(
        profile, env=MappingProxyType({**profile.env, "ENABLE_TOOL_SEARCH": "false"})
    )


def _baton_tools_visible(profile: AgentProfile) -> AgentProfile:
    """Qwen Code defers MCP tools behind tool_search unless listed in ``tools.visible``."""
    names = [f"mcp__baton__{tool}" for tool in DEFAULT_TOOLS]
    settings = SeedFile("home/.qwen/settings.json", json.dumps({"tools": {"visible": names}}))
    return dataclasses.replace(profile, files=(*profile.files, settings))


AGENTS: dict[str, tuple[type[ScriptedServer], Callable[[ScriptedServer], AgentProfile]]] = {
    # Claude Code defers MCP tools behind ToolSearch; the script wants them offered directly.
    "claude": (AnthropicStub, lambda s: _no_tool_search(claude_profile(s.origin))),
    "codex": (ResponsesStub, lambda s: codex_profile(s.base_url)),  # type: ignore[attr-defined]
    "qwen": (LLMStub, lambda s: _baton_tools_visible(qwen_profile(s.base_url))),  # type: ignore[attr-defined]
}


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[RoleHub]:
    state = tmp_path / "state"
    state.mkdir()
    store = SqliteStore.open(state / "baton.db")
    own_project(store)
    started = await RoleHub.start(store, state)
    try:
        yield started
    finally:
        await started.aclose()
        store.close()


@pytest.mark.parametrize("transport", ["http", "shim"])
@pytest.mark.parametrize("agent", sorted(AGENTS))
async def test_a_real_agent_files_its_report_through_the_role_tools(
    root: Path,
    port: FcopPort,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hub: RoleHub,
    agent: str,
    transport: str,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, DUMMY_KEY)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    if transport == "shim":
        monkeypatch.setattr(role_sessions, "offer_http", lambda answer: False)
    stub_type, make_profile = AGENTS[agent]
    store = hub.store
    created = port.create_task(sender="ADMIN", recipient="QA", subject="Check", body="Check it.")
    attempt = port.claim(created.task_id, actor="QA").attempt_id
    slot = open_slot(store, root, "QA")
    point(slot, created.task_id, attempt)
    with stub_type(cwd=root, script=report_script) as stub:
        config = load_config(root, environ={"XDG_STATE_HOME": str(tmp_path / "xdg")})
        profile = dataclasses.replace(make_profile(stub), name="role-agent")
        config = dataclasses.replace(
            config, state_dir=hub.dir.parent, profiles={**config.profiles, "role-agent": profile}
        )
        store.create_run(_run("run-real"))
        factory = role_session_factory(
            config,
            workspace=root,
            store=store,
            ledger=Ledger(store),
            emitter=EventEmitter(Sequencer("run-real"), store),
            hub=hub,
        )
        session = await factory(
            RoleSpec(name="QA", agent="role-agent", permissions="all"), slot.binding(), None
        )
        try:
            # Qwen Code discovers MCP servers progressively: its first model call may come
            # before baton's tools are registered. Like the team loop's reminder, prompt
            # again (bounded) until the report is filed.
            for _ in range(PROMPTS):
                result = await session.prompt("File your report on the current task.")
                if port.find_report_head(created.task_id, attempt) is not None:
                    break
        finally:
            await session.close()
        offered = [(r.reply, _tool_names(r.body)) for r in stub.requests]
    assert result.status == "completed", (result, offered)
    head = port.find_report_head(created.task_id, attempt)
    assert head is not None, offered
    assert sum(reply.startswith("tool:") for reply, _ in offered) == 1, offered
    assert (head.sender, head.recipient, head.result) == ("QA", "ADMIN", "done")
    record = store.get_session("role-QA")
    assert record is not None and record.state["mcp_http"] is (transport == "http")  # offered


def _namespaced(body: Any) -> list[tuple[str, str]]:
    """``(namespace, tool)`` for the tools inside Responses-API namespaces (codex)."""
    found = []
    for tool in (body.get("tools") if isinstance(body, dict) else None) or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            found += [(str(tool["name"]), str(t.get("name"))) for t in tool.get("tools") or []]
    return found


def _tool_names(body: Any) -> list[str]:
    """Tool names in a recorded model request, whatever the API's shape (for diagnostics)."""
    names = []
    for tool in (body.get("tools") if isinstance(body, dict) else None) or []:
        if isinstance(tool, dict):
            fn = tool.get("function")
            names.append(str(tool.get("name") or (fn or {}).get("name") or tool.get("type")))
    return names


def _run(run_id: str) -> Any:
    from tests.support.records import run_record

    return run_record(run_id, kind="up")
