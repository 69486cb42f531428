"""The real OpenCode agent over ACP, offline, against the scripted LLM stub (raw wire level).

These tests pin what ``opencode-ai`` (the version in :mod:`tests.support.opencode`) actually puts
on the wire, and record it as traces for baton's normalizer golden tests::

    BATON_RECORD_TRACES=1 .venv/bin/python -m pytest tests/integration/test_opencode_wire.py

rewrites ``tests/traces/opencode/<scenario>.ndjson`` (private paths become ``/WORKSPACE`` and
``/AGENT_HOME``, generated ids and timestamps are renumbered). ``BATON_SKIP_OPENCODE=1`` skips
the module; otherwise a missing install fails, naming ``scripts/install-opencode``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.llm_stub import LLMStub
from tests.support.opencode import (
    INSTALL_HINT,
    OPENCODE_VERSION,
    PERMISSION_ASK,
    OpenCodeLaunch,
    OpenCodeMissing,
    find_opencode,
    opencode_launch,
    require_opencode,
    skip_opencode,
)
from tests.support.rawclient import Handler, Message, RawClient, RpcError, write_trace

pytestmark = [
    pytest.mark.opencode,
    pytest.mark.skipif(skip_opencode(), reason="BATON_SKIP_OPENCODE=1"),
]

TRACES = Path(__file__).resolve().parents[1] / "traces" / "opencode"
RECORD = os.environ.get("BATON_RECORD_TRACES", "") == "1"
START_TIMEOUT = 30.0  # OpenCode's start-up takes ~2 s here; leave room on a loaded machine
TURN_TIMEOUT = 30.0
PROMPT = "Write hello.txt, please."


@pytest.fixture(scope="module")
def opencode_bin() -> Path:
    binary = find_opencode()
    if binary is None:
        pytest.fail(f"OpenCode {OPENCODE_VERSION} is not installed: {INSTALL_HINT}")
    return binary


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


def launch_for(stub: LLMStub, opencode_bin: Path, workspace: Path, **kwargs: Any) -> OpenCodeLaunch:
    return opencode_launch(
        stub.base_url,
        workspace=workspace,
        private_dir=workspace.parent / "agent",
        binary=opencode_bin,
        **kwargs,
    )


@asynccontextmanager
async def opencode(
    launch: OpenCodeLaunch, handler: Handler | None = None, *, trace: str | None = None
) -> AsyncIterator[RawClient]:
    """Run ``opencode acp``; with ``trace`` and BATON_RECORD_TRACES=1, save the conversation."""
    kwargs: dict[str, Any] = {"handler": handler} if handler is not None else {}
    client = await RawClient.spawn(
        launch.argv, env=launch.env, cwd=launch.cwd, record=True, **kwargs
    )
    try:
        yield client
    finally:
        await client.close(grace=2.0)
    if RECORD and trace is not None:
        write_trace(TRACES / f"{trace}.ndjson", client.trace, launch.placeholders())


async def handshake(client: RawClient, workspace: Path) -> str:
    init = await client.initialize(timeout=START_TIMEOUT)
    assert init["protocolVersion"] == 1
    assert init["agentInfo"] == {"name": "OpenCode", "version": OPENCODE_VERSION}
    assert init["agentCapabilities"]["loadSession"] is True
    new = await client.new_session(workspace, timeout=START_TIMEOUT)
    options = {o["id"]: o for o in new["configOptions"]}
    assert options["model"]["currentValue"] == "local/scripted"
    assert options["mode"]["currentValue"] == "build"
    # OpenCode sends the command list just after answering session/new; waiting for it keeps
    # the recorded order deterministic (otherwise it races with the prompt request).
    await client.wait_for_update("available_commands_update", timeout=START_TIMEOUT)
    sid: str = new["sessionId"]
    return sid


def kinds(
    client: RawClient, *, skip: tuple[str, ...] = ("available_commands_update",)
) -> list[str]:
    return [k for k in client.update_kinds() if k not in skip]


def tool_updates(client: RawClient) -> list[Message]:
    return [u for u in client.updates() if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def select(kind: str) -> Callable[[Message], Message]:
    def outcome(params: Message) -> Message:
        option = next(o for o in params["options"] if o["kind"] == kind)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    return outcome


def workspace_fs(workspace: Path, permission: Callable[[Message], Message]) -> Handler:
    """A client that answers permissions with ``permission`` and serves fs/* inside ``workspace``."""

    async def handler(method: str, params: Any) -> Any:
        if method == "session/request_permission":
            return permission(params)
        if method in ("fs/write_text_file", "fs/read_text_file"):
            path = Path(params["path"])
            if not path.resolve().is_relative_to(workspace.resolve()):
                raise RpcError(-32602, f"outside the workspace: {path}")
            if method == "fs/write_text_file":
                path.write_text(params["content"])
                return {}  # WriteTextFileResponse is an object (ACP schema)
            return {"content": path.read_text()}
        raise RpcError(-32601, f"Method not found: {method}")

    return handler


# -- the launch description (no agent started) ----------------------------------------------------


def test_missing_install_names_the_script(tmp_path: Path) -> None:
    assert find_opencode(tmp_path) is None
    with pytest.raises(OpenCodeMissing, match="scripts/install-opencode"):
        require_opencode(tmp_path)


def test_launch_is_isolated_and_offline(tmp_path: Path) -> None:
    fake_bin = tmp_path / "opencode"
    ws, private = tmp_path / "ws", tmp_path / "agent"
    base = "http://127.0.0.1:1234/v1"
    launch = opencode_launch(base, workspace=ws, private_dir=private, binary=fake_bin)
    assert launch.argv == [str(fake_bin), "acp"]
    assert launch.cwd == ws and ws.is_dir()
    for var in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "TMPDIR"):
        assert Path(launch.env[var]).parent == private and Path(launch.env[var]).is_dir()
    for var in ("MODELS_FETCH", "AUTOUPDATE", "DEFAULT_PLUGINS"):
        assert launch.env[f"OPENCODE_DISABLE_{var}"] == "1"
    assert launch.env["npm_config_registry"].startswith("http://127.0.0.1:")
    config = json.loads(launch.env["OPENCODE_CONFIG_CONTENT"])
    assert config == launch.config
    assert config["provider"]["local"]["options"]["baseURL"] == base
    assert config["model"] == config["small_model"] == "local/scripted"
    assert "permission" not in config  # OpenCode's default: it writes files itself
    asking = opencode_launch(
        base, workspace=ws, private_dir=private, binary=fake_bin, permission=PERMISSION_ASK
    )
    assert asking.config["permission"] == {"edit": "ask", "bash": "ask"}
    # An explicit environment: nothing is inherited but PATH.
    assert set(launch.env) == {
        "PATH",
        "LANG",
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "TMPDIR",
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_CONFIG_CONTENT",
        "npm_config_registry",
    }
    assert launch.placeholders()[str(ws)] == "/WORKSPACE"
    assert launch.placeholders()[str(ws).lstrip("/")] == "WORKSPACE"


# -- turns -----------------------------------------------------------------------------------------


async def test_write_file_turn(opencode_bin: Path, workspace: Path) -> None:
    """Default permissions: OpenCode writes the file itself; nothing is asked of the client."""
    with LLMStub(cwd=workspace) as stub:
        launch = launch_for(stub, opencode_bin, workspace)
        async with opencode(launch, trace="write-file") as client:
            sid = await handshake(client, workspace)
            result = await client.prompt(sid, PROMPT, timeout=TURN_TIMEOUT)
        assert sorted(stub.replies()) == ["text", "title", "tool:write"]

    assert result["stopReason"] == "end_turn"
    assert result["usage"] == {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    assert (workspace / "hello.txt").read_text() == stub.file_content
    assert client.requests() == []  # no permission request, no fs/* call
    assert kinds(client) == [
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "agent_message_chunk",
        "agent_message_chunk",
        "usage_update",
    ]
    start, running, done = tool_updates(client)
    path = str(workspace / "hello.txt")
    assert (start["toolCallId"], start["kind"], start["status"]) == ("call_1", "edit", "pending")
    assert start["rawInput"] == {} and start["locations"] == []
    assert running["status"] == "in_progress"
    assert running["rawInput"] == {"filePath": path, "content": stub.file_content}
    assert running["locations"] == [{"path": path}]
    assert done["status"] == "completed"
    assert done["content"][0]["content"]["text"] == "Wrote file successfully."
    assert done["rawOutput"]["output"] == "Wrote file successfully."
    chunks = [u for u in client.updates() if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(c["content"]["text"] for c in chunks) == stub.text
    assert len({c["messageId"] for c in chunks}) == 1


async def test_permission_ask_then_client_write(opencode_bin: Path, workspace: Path) -> None:
    """edit=ask: a permission request (with a diff), then the write goes through fs/write_text_file."""
    with LLMStub(cwd=workspace) as stub:
        launch = launch_for(stub, opencode_bin, workspace, permission=PERMISSION_ASK)
        handler = workspace_fs(workspace, select("allow_once"))
        async with opencode(launch, handler, trace="permission-ask") as client:
            sid = await handshake(client, workspace)
            result = await client.prompt(sid, PROMPT, timeout=TURN_TIMEOUT)

    assert result["stopReason"] == "end_turn"
    path = str(workspace / "hello.txt")
    asked, wrote = client.requests()
    assert asked["method"] == "session/request_permission"
    params = asked["params"]
    assert [(o["optionId"], o["kind"]) for o in params["options"]] == [
        ("once", "allow_once"),
        ("always", "allow_always"),
        ("reject", "reject_once"),
    ]
    tool = params["toolCall"]
    assert (tool["toolCallId"], tool["kind"], tool["status"]) == ("call_1", "edit", "pending")
    assert tool["rawInput"]["filepath"] == path  # lower-case "filepath" here, unlike the tool's
    assert tool["rawInput"]["diff"].endswith("+" + stub.file_content)
    assert tool["content"] == [
        {"type": "diff", "path": path, "oldText": "", "newText": stub.file_content}
    ]
    assert wrote["method"] == "fs/write_text_file"
    assert wrote["params"] == {"sessionId": sid, "path": path, "content": stub.file_content}
    assert (workspace / "hello.txt").read_text() == stub.file_content
    # The permission request sits between the in_progress and completed tool updates.
    order = [
        m.get("method") or "response"
        for m in client.messages
        if m.get("method") != "session/update"
        or m["params"]["update"]["sessionUpdate"] == "tool_call_update"
    ]
    assert order[-5:] == [
        "session/update",  # tool_call_update in_progress
        "session/request_permission",
        "fs/write_text_file",
        "session/update",  # tool_call_update completed
        "response",
    ]
    assert [u["status"] for u in tool_updates(client)] == ["pending", "in_progress", "completed"]


async def test_permission_reject(opencode_bin: Path, workspace: Path) -> None:
    """Rejecting fails the tool call and ends the turn at once (no further model call)."""
    with LLMStub(cwd=workspace) as stub:
        launch = launch_for(stub, opencode_bin, workspace, permission=PERMISSION_ASK)
        handler = workspace_fs(workspace, select("reject_once"))
        async with opencode(launch, handler, trace="permission-reject") as client:
            sid = await handshake(client, workspace)
            result = await client.prompt(sid, PROMPT, timeout=TURN_TIMEOUT)
        assert sorted(stub.replies()) == ["title", "tool:write"]

    assert result["stopReason"] == "end_turn"
    assert [m["method"] for m in client.requests()] == ["session/request_permission"]
    assert not (workspace / "hello.txt").exists()
    assert kinds(client) == ["tool_call", "tool_call_update", "tool_call_update", "usage_update"]
    failed = tool_updates(client)[-1]
    assert failed["status"] == "failed"
    message = "The user rejected permission to use this specific tool call."
    assert failed["rawOutput"] == {"error": message}


# -- cancellation ----------------------------------------------------------------------------------


async def test_cancel_during_a_hanging_model_call(opencode_bin: Path, workspace: Path) -> None:
    with LLMStub(cwd=workspace, script="hang") as stub:
        launch = launch_for(stub, opencode_bin, workspace)
        async with opencode(launch, trace="cancel") as client:
            sid = await handshake(client, workspace)
            prompt = client.start_prompt(sid, PROMPT)
            await client.wait_for_update("agent_message_chunk", timeout=TURN_TIMEOUT)
            await client.cancel(sid)
            reply = await asyncio.wait_for(prompt, 10)
            # OpenCode aborts its HTTP request to the model.
            assert await asyncio.to_thread(stub.aborted.wait, 10)

    assert reply["result"]["stopReason"] == "cancelled"
    assert reply["result"]["usage"]["totalTokens"] == 0
    assert kinds(client) == ["agent_message_chunk", "usage_update"]


async def test_cancel_with_a_pending_permission(opencode_bin: Path, workspace: Path) -> None:
    """OpenCode answers the prompt ``cancelled`` without waiting for the permission reply."""
    asked = asyncio.Event()
    release = asyncio.Event()

    async def handler(method: str, params: Any) -> Any:
        assert method == "session/request_permission"
        asked.set()
        await release.wait()
        return {"outcome": {"outcome": "cancelled"}}

    with LLMStub(cwd=workspace) as stub:
        launch = launch_for(stub, opencode_bin, workspace, permission=PERMISSION_ASK)
        async with opencode(launch, handler, trace="cancel-permission") as client:
            sid = await handshake(client, workspace)
            prompt = client.start_prompt(sid, PROMPT)
            await asyncio.wait_for(asked.wait(), TURN_TIMEOUT)
            await client.cancel(sid)
            reply = await asyncio.wait_for(prompt, 10)
            assert not release.is_set()  # the turn ended before we answered the permission
            release.set()
            await client.wait_answered(1)  # the late "cancelled" reply is accepted silently
            stub.script = "text"
            after = await client.prompt(sid, "Just say something.", timeout=TURN_TIMEOUT)
            assert after["stopReason"] == "end_turn"

    assert reply["result"]["stopReason"] == "cancelled"
    failed = tool_updates(client)[2]
    assert failed["status"] == "failed"
    assert failed["rawOutput"] == {
        "error": "Tool execution aborted",
        "metadata": {"interrupted": True},
    }
    assert not (workspace / "hello.txt").exists()


async def test_cancel_while_the_model_fails(opencode_bin: Path, workspace: Path) -> None:
    """A failing model makes OpenCode retry silently; cancel then ends the turn ``end_turn``."""
    with LLMStub(cwd=workspace, script="fail") as stub:
        launch = launch_for(stub, opencode_bin, workspace)
        async with opencode(launch, trace="cancel-retrying") as client:
            sid = await handshake(client, workspace)
            prompt = client.start_prompt(sid, PROMPT)
            await asyncio.to_thread(stub.wait_for_replies, "fail", timeout=TURN_TIMEOUT)
            assert not prompt.done()
            await client.cancel(sid)
            reply = await asyncio.wait_for(prompt, 10)

    # Observed with 1.18.33: not "cancelled", although the turn was cancelled.
    assert reply["result"]["stopReason"] == "end_turn"
    assert reply["result"]["usage"]["totalTokens"] == 0
    assert kinds(client) == ["usage_update"]


# -- load ------------------------------------------------------------------------------------------


async def test_session_load_replays_history(opencode_bin: Path, workspace: Path) -> None:
    with LLMStub(cwd=workspace) as stub:
        launch = launch_for(stub, opencode_bin, workspace)
        async with opencode(launch) as first:
            sid = await handshake(first, workspace)
            await first.prompt(sid, PROMPT, timeout=TURN_TIMEOUT)
        turn_calls = len(stub.completions())

        # A fresh process over the same private data directory.
        async with opencode(launch, trace="load") as client:
            await client.initialize(timeout=START_TIMEOUT)
            listed = await client.request("session/list", {"cwd": str(workspace)})
            result = await client.request(
                "session/load",
                {"sessionId": sid, "cwd": str(workspace), "mcpServers": []},
                timeout=START_TIMEOUT,
            )
            # As after session/new, the command list follows the response.
            await client.wait_for_update("available_commands_update", timeout=START_TIMEOUT)
        assert len(stub.completions()) == turn_calls  # loading does not call the model

    assert [(s["sessionId"], s["title"]) for s in listed["sessions"]] == [(sid, stub.title)]
    assert {o["id"] for o in result["configOptions"]} == {"model", "mode"}
    loaded_at = next(i for i, m in enumerate(client.messages) if m.get("id") == 2)
    replayed = [
        m["params"]["update"]
        for m in client.messages[:loaded_at]
        if m.get("method") == "session/update"
    ]
    assert [u["sessionUpdate"] for u in replayed] == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    user, call, done, text = replayed
    assert user["content"] == {"type": "text", "text": PROMPT}
    # The replayed tool call is one upsert pair, not the live pending/in_progress/completed run.
    assert call["toolCallId"] == done["toolCallId"] == "call_1"
    assert done["status"] == "completed"
    assert text["content"]["text"] == stub.text  # the streamed chunks come back as one
