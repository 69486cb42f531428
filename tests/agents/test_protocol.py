"""Handshake, sessions and JSON-RPC hygiene of the built-in agent, over real stdio."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

import baton
from tests.agents.builtin_client import AgentError, AgentProcess, StartAgent

EXPECTED_INITIALIZE = {
    "protocolVersion": 1,
    "agentCapabilities": {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
        "mcpCapabilities": {"http": False, "sse": False},
        "sessionCapabilities": {"list": {}},
    },
    "agentInfo": {
        "name": "baton-builtin",
        "title": "baton runbook agent",
        "version": baton.__version__,
    },
    "authMethods": [],
}


async def test_initialize_answers_with_the_advertised_capabilities(start_agent: StartAgent) -> None:
    started = time.monotonic()
    agent = await start_agent()
    result = await agent.initialize()
    elapsed = time.monotonic() - started
    assert result == EXPECTED_INITIALIZE
    assert elapsed < 3.0, f"initialize took {elapsed:.2f} s (spawn included)"


def test_startup_imports_no_heavy_library() -> None:
    """The agent must answer initialize fast: the ACP and MCP SDKs load only when needed."""
    probe = (
        "import sys, baton.agents.builtin.server; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'acp', 'mcp', 'anyio', 'pydantic'}))"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "[]"


@pytest.mark.parametrize("asked", [0, 2, 99])
async def test_initialize_always_answers_version_1(start_agent: StartAgent, asked: int) -> None:
    agent = await start_agent()
    result = await agent.call("initialize", {"protocolVersion": asked, "clientCapabilities": {}})
    assert result["protocolVersion"] == 1


async def test_new_session_gives_a_runbook_mode(agent: AgentProcess, workdir: Path) -> None:
    result = await agent.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert result["sessionId"].startswith("rb-")
    assert result["modes"]["currentModeId"] == "runbook"
    assert [m["id"] for m in result["modes"]["availableModes"]] == ["runbook"]
    assert (
        await agent.call(
            "session/set_mode", {"sessionId": result["sessionId"], "modeId": "runbook"}
        )
        == {}
    )


async def test_invalid_session_params_are_rejected(agent: AgentProcess) -> None:
    with pytest.raises(AgentError) as relative:
        await agent.call("session/new", {"cwd": "relative/dir", "mcpServers": []})
    assert relative.value.code == -32602
    with pytest.raises(AgentError) as servers:
        await agent.call("session/new", {"cwd": "/tmp", "mcpServers": [{"name": "x"}]})
    assert servers.value.code == -32602
    with pytest.raises(AgentError) as unknown:
        await agent.call("session/prompt", {"sessionId": "rb-nope", "prompt": []})
    assert unknown.value.code == -32002


async def test_malformed_input_gets_json_rpc_errors_and_the_agent_keeps_serving(
    agent: AgentProcess,
) -> None:
    await agent.send(b"this is not json\n")
    parse_error = await agent.receive()
    assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
    await agent.send(b"[1, 2]\n")
    assert (await agent.receive())["error"]["code"] == -32600
    await agent.send(b'{"jsonrpc": "1.0", "id": 5, "method": "initialize"}\n')
    assert (await agent.receive())["error"]["code"] == -32600
    await agent.send(b'{"jsonrpc": "2.0", "id": 6, "method": "no/such/method", "params": {}}\n')
    assert await agent.receive() == {
        "jsonrpc": "2.0",
        "id": 6,
        "error": {"code": -32601, "message": "Method not found: no/such/method"},
    }
    await agent.send(b'{"jsonrpc": "2.0", "method": "no/such/notification"}\n')
    await agent.send(b'{"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": [1]}\n')
    assert (await agent.receive())["error"]["code"] == -32602
    result = await agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert result["protocolVersion"] == 1


async def test_a_prompt_without_steps_explains_the_format(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    turn = await agent.prompt(session_id, "Please fix the build.")
    assert turn.shape() == ["agent_message_chunk", "response:end_turn"]
    assert "no runbook steps" in turn.summary()
    assert turn.updates[0]["messageId"] == "msg-1-1"


async def test_session_list_shows_sessions_newest_first(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    first = await agent.new_session(workdir)
    await agent.prompt(first, "# Build the thing\n\n```sh\ntrue\n```\n")
    second = await agent.new_session(other)
    listed = (await agent.call("session/list", {}))["sessions"]
    assert [s["sessionId"] for s in listed] == [second, first]
    assert listed[1] == {
        "sessionId": first,
        "cwd": str(workdir),
        "title": "Build the thing",
        "updatedAt": listed[1]["updatedAt"],
    }
    only_other = (await agent.call("session/list", {"cwd": str(other)}))["sessions"]
    assert [s["sessionId"] for s in only_other] == [second]
