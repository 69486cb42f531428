"""Wire behaviour of every fake-agent scenario, seen through the raw JSON-RPC client.

Also the other test-side endpoint, the scripted LLM stub, at the end.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import baton.testing.fake_agent as fake_agent_module
from baton.testing import SCENARIOS, fake_agent_argv
from baton.testing.scripts import SCRIPTS
from tests.support.llm_stub import LLMStub, Text
from tests.support.rawclient import (
    AgentExited,
    Handler,
    Message,
    RawClient,
    RpcError,
    default_handler,
)

TRACES = Path(__file__).resolve().parents[1] / "traces"


@asynccontextmanager
async def agent(
    scenario: str = "ok",
    *extra: str,
    handler: Handler = default_handler,
    cwd: Path | None = None,
    record: bool = False,
    first_id: int = 0,
) -> AsyncIterator[RawClient]:
    argv = fake_agent_argv(scenario, extra=extra)
    client = await RawClient.spawn(argv, handler=handler, cwd=cwd, record=record, first_id=first_id)
    try:
        yield client
    finally:
        await client.close(grace=1.0)


async def start_session(client: RawClient, cwd: Path | str = "/tmp") -> str:
    await client.initialize()
    result = await client.new_session(cwd)
    sid: str = result["sessionId"]
    return sid


def chunk_texts(client: RawClient) -> list[str]:
    return [
        u["content"]["text"]
        for u in client.updates()
        if u["sessionUpdate"] == "agent_message_chunk"
    ]


async def exited(pid: int, timeout: float) -> bool:
    """Wait (event-driven, via a pidfd) until process ``pid`` (not our child) has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_reader(fd, done.set)
    try:
        async with asyncio.timeout(timeout):
            await done.wait()
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


# -- the module itself ----------------------------------------------------------------------------


def test_every_scenario_is_documented_and_implemented() -> None:
    doc = fake_agent_module.__doc__ or ""
    for name in SCENARIOS:
        assert f"``{name}``" in doc, f"scenario {name} is not documented"
    special = {
        "ok",
        "no-initialize",
        "spawn-grandchild",
        "auth-required",
        "replay",
        "terminal-login",
        "session-new-error",
    }
    for name in set(SCENARIOS) - special:
        assert name in SCRIPTS, f"scenario {name} has no turn script"
    assert set(SCRIPTS) <= set(SCENARIOS), "a script for an undeclared scenario"


def test_unknown_scenario_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fake agent scenario"):
        fake_agent_argv("nope")
    proc = subprocess.run(
        [sys.executable, "-m", "baton.testing.fake_agent", "--scenario", "nope"],
        capture_output=True,
        timeout=10,
    )
    assert proc.returncode == 2
    assert b"invalid choice" in proc.stderr


async def test_starts_and_answers_initialize_fast() -> None:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        async with agent() as client:
            await client.initialize()
            best = min(best, time.perf_counter() - t0)
    # The brief is < 100 ms; leave room for loaded CI machines.
    assert best < 0.5, f"spawn + initialize took {best:.3f}s"


# -- normal behaviour -------------------------------------------------------------------------------


async def test_ok_turn_and_exit_on_stdin_close() -> None:
    async with agent() as client:
        init = await client.initialize()
        assert init["protocolVersion"] == 1
        assert init["agentCapabilities"]["loadSession"] is False
        assert init["authMethods"] == []
        assert await client.new_session("/tmp") == {"sessionId": "fake-1"}
        result = await client.prompt("fake-1", "hi")
        assert result == {"stopReason": "end_turn"}
        updates = client.updates("fake-1")
        assert [u["sessionUpdate"] for u in updates] == ["agent_message_chunk"] * 2
        assert {u["messageId"] for u in updates} == {"fake-msg-1"}
        with pytest.raises(RpcError) as err:
            await client.request("session/load", {"sessionId": "fake-1"})
        assert err.value.code == -32601
        await client.close_stdin()
        assert await client.wait_exit(5) == 0
        assert client.bad_lines == []


async def test_parse_error_is_answered() -> None:
    async with agent() as client:
        client.write_bytes(b"this is not json\n")
        msg = await client.wait_for(lambda m: "error" in m)
        assert msg == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error"},
        }


def test_exits_zero_when_stdout_is_closed() -> None:
    proc = subprocess.Popen(
        fake_agent_argv("ok"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.close()
    proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    proc.stdin.flush()
    assert proc.wait(timeout=5) == 0
    proc.stdin.close()


# -- malformed output -------------------------------------------------------------------------------


async def test_malformed_json() -> None:
    async with agent("malformed-json") as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        assert client.bad_lines == [b'{"jsonrpc":"2.0",', b"[1,2]"]
        assert chunk_texts(client) == ["Before the garbage. ", "After the garbage."]


async def test_huge_line() -> None:
    size = 3_000_000
    async with agent("huge-line", "--bytes", str(size)) as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        huge, after = client.notifications("session/update")
        line = json.dumps(huge, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        assert len(line) == size
        assert set(huge["params"]["update"]["content"]["text"]) == {"x"}
        assert after["params"]["update"]["content"]["text"] == "After the huge line."


async def test_invalid_utf8() -> None:
    async with agent("invalid-utf8") as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        assert len(client.bad_lines) == 1
        assert b"bad bytes: \xff\xfe end" in client.bad_lines[0]
        # Decoded leniently it is a well-formed session/update.
        lenient = json.loads(client.bad_lines[0].decode("utf-8", "replace"))
        assert lenient["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        assert chunk_texts(client) == ["After the invalid bytes."]


# -- process faults ---------------------------------------------------------------------------------


async def test_die_mid_turn() -> None:
    async with agent("die-mid-turn") as client:
        sid = await start_session(client)
        with pytest.raises(AgentExited):
            await client.prompt(sid, "x")
        assert await client.wait_exit(5) == 3
        assert chunk_texts(client) == ["About to die. "]


async def test_no_initialize() -> None:
    async with agent("no-initialize") as client:
        with pytest.raises(TimeoutError):
            await client.initialize(timeout=0.3)
        client.write_bytes(b"garbage\n")
        await client.close_stdin()
        assert await client.wait_exit(5) == 0
        assert client.messages == []
        assert client.bad_lines == []


async def test_stderr_flood_is_written_before_the_turn_ends() -> None:
    size = 5_000_000
    async with agent("stderr-flood", "--bytes", str(size)) as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        await client.close_stdin()
        assert await client.wait_exit(5) == 0
        await asyncio.wait_for(client._stderr_reader, 5)
        assert client.stderr_total == size
        assert client.stderr.startswith(b"stderr-flood: ")


async def test_ignore_cancel_needs_sigkill() -> None:
    async with agent("ignore-cancel") as client:
        sid = await start_session(client)
        prompt = client.start_prompt(sid, "x")
        await client.wait_for_update("agent_message_chunk")
        await client.cancel(sid)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(prompt), 0.3)
        await client.close_stdin()
        with pytest.raises(TimeoutError):
            await client.wait_exit(0.3)
        client.kill_group(signal.SIGTERM)
        with pytest.raises(TimeoutError):
            await client.wait_exit(0.3)
        client.kill_group(signal.SIGKILL)
        assert await client.wait_exit(5) == -signal.SIGKILL
        with pytest.raises(AgentExited):
            await prompt


async def test_hang_prompt_honours_cancel() -> None:
    async with agent("hang-prompt") as client:
        sid = await start_session(client)
        prompt = client.start_prompt(sid, "x")
        await client.wait_for_update("agent_message_chunk")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(prompt), 0.2)
        await client.cancel(sid)
        reply = await asyncio.wait_for(prompt, 5)
        assert reply["result"] == {"stopReason": "cancelled"}


async def test_spawn_grandchild_survives_the_agent_but_not_the_group_kill() -> None:
    async with agent("spawn-grandchild") as client:
        sid = await start_session(client)
        await client.wait_stderr("grandchild-pid=")
        m = re.search(rb"grandchild-pid=(\d+)\n", client.stderr)
        assert m is not None
        pid = int(m.group(1))
        assert os.getpgid(pid) == client.pid  # same process group as the agent
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        await client.close_stdin()
        assert await client.wait_exit(5) == 0
        assert not await exited(pid, 0.2), "the grandchild should outlive its parent"
        client.kill_group(signal.SIGKILL)
        assert await exited(pid, 5)


async def test_grandchild_keeping_stdio_holds_stdout_open() -> None:
    async with agent("spawn-grandchild", "--grandchild-keeps-stdio") as client:
        await start_session(client)
        await client.wait_stderr("grandchild-pid=")
        await client.close_stdin()
        assert await exited(client.pid, 5)
        # The agent is gone, but the grandchild still holds the stdout pipe: no EOF, and
        # asyncio's Process.wait() would not return either.
        with pytest.raises(TimeoutError):
            await client.wait_stdout_closed(0.3)
        client.kill_group(signal.SIGKILL)
        await client.wait_stdout_closed(5)
        assert await client.wait_exit(5) == 0


# -- load ---------------------------------------------------------------------------------------------


async def test_flood_is_ordered_and_complete() -> None:
    count = 20_001
    async with agent("flood", "--count", str(count)) as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x", timeout=30))["stopReason"] == "end_turn"
        updates = client.updates(sid)
        assert len(updates) == count + 1
        assert updates[0]["sessionUpdate"] == "tool_call"
        assert updates[0]["toolCallId"] == "t1"
        for i, u in enumerate(updates[1:]):
            if i % 2 == 0:
                assert u["sessionUpdate"] == "agent_message_chunk"
                assert u["messageId"] == "flood-msg"
                assert u["content"]["text"] == f"flood chunk {i:07d} of the benchmark load."
            else:
                assert u["sessionUpdate"] == "tool_call_update"
                assert u["toolCallId"] == "t1"
                assert u["status"] == "in_progress"
                text = u["content"][0]["content"]["text"]
                assert text == f"flood output {i:07d} of the benchmark load"


def test_the_default_flood_arrives_whole() -> None:
    """The full default flood (200k notifications, ~50 MB), every line. How fast the agent
    writes it is a benchmark (``benches/run --only ingest``, the ndjson floor), not a test."""
    script = (
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"fake-1",'
        b'"prompt":[{"type":"text","text":"go"}]}}\n'
    )
    proc = subprocess.Popen(
        fake_agent_argv("flood"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(script)
    data = bytearray()
    # Closing stdin at once would end the agent before its turn: read up to the prompt's answer.
    while not data.endswith(b'"id":2,"result":{"stopReason":"end_turn"}}\n'):
        chunk = proc.stdout.read(1 << 20)
        assert chunk, "the agent closed stdout before answering the prompt"
        data += chunk
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    proc.stdout.close()
    assert data.count(b"\n") == 200_000 + 4  # init, new, tool_call, 200k updates, response


# -- protocol oddities --------------------------------------------------------------------------------


async def test_late_chunks_follow_the_response() -> None:
    async with agent("late-chunks") as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        response_at = next(i for i, m in enumerate(client.messages) if m.get("id") == 2)
        await client.wait_for(
            lambda m: (
                m.get("params", {}).get("update", {}).get("content", {}).get("text")
                == "Late chunk two."
            ),
            start=response_at,
        )
        assert chunk_texts(client) == ["Before the end. ", "Late chunk one. ", "Late chunk two."]
        kinds = ["response" if "id" in m else "chunk" for m in client.messages[2:]]
        assert kinds == ["chunk", "response", "chunk", "chunk"]


async def test_repeat_tool_call() -> None:
    async with agent("repeat-tool-call") as client:
        sid = await start_session(client, "/work/ws")
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        updates = client.updates(sid)
        kinds = [u["sessionUpdate"] for u in updates]
        assert kinds == ["tool_call"] * 2 + ["tool_call_update"] * 3 + ["agent_message_chunk"]
        first, second, status_only, content_only, done = updates[:5]
        assert first["rawInput"] == {} and "locations" not in first
        assert second["rawInput"] == {"filePath": "/work/ws/repeat.txt", "content": "again\n"}
        assert set(status_only) == {"sessionUpdate", "toolCallId", "status"}
        assert "status" not in content_only and content_only["content"][0]["type"] == "diff"
        assert done["status"] == "completed" and "rawOutput" in done


async def test_unknown_variant() -> None:
    async with agent("unknown-variant") as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        kinds = client.update_kinds(sid)
        assert kinds == ["future_variant_xyz", "notice", "agent_message_chunk"]
        assert client.updates(sid)[0]["nested"] == {"a": [1, 2, 3]}


CURSOR_REPLIES: dict[str, Any] = {
    "cursor/update_todos": {"outcome": {"outcome": "accepted"}},
    "cursor/task": {"outcome": {"outcome": "completed", "agentId": "sub-1"}},
    "cursor/generate_image": {"outcome": {"outcome": "rejected"}},
    "cursor/ask_question": {"outcome": {"outcome": "skipped", "reason": "headless"}},
    "cursor/create_plan": {"outcome": {"outcome": "accepted"}},
}


def cursor_echoes(client: RawClient) -> list[Message]:
    lines = client.stderr_text().splitlines()
    return [json.loads(line.removeprefix("cursor-reply=")) for line in lines]


async def test_cursor_ext_waits_for_every_reply() -> None:
    seen: list[str] = []

    async def handler(method: str, params: Any) -> Any:
        seen.append(method)
        assert params["sessionId"] == "fake-1" and "toolCallId" in params
        return CURSOR_REPLIES[method]

    async with agent("cursor-ext", handler=handler) as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        assert seen == list(CURSOR_REPLIES)
        assert all("id" in m for m in client.requests())
        await client.close_stdin()
        await client.wait_exit(5)
        await asyncio.wait_for(client._stderr_reader, 5)
        echoes = cursor_echoes(client)
        assert echoes == [{"method": m, "result": r} for m, r in CURSOR_REPLIES.items()]


async def test_cursor_ext_with_method_not_found_replies() -> None:
    async with agent("cursor-ext") as client:  # the default handler answers -32601
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        await client.close_stdin()
        await client.wait_exit(5)
        await asyncio.wait_for(client._stderr_reader, 5)
        echoes = cursor_echoes(client)
        assert [e["method"] for e in echoes] == list(CURSOR_REPLIES)
        assert all(e["error"]["code"] == -32601 for e in echoes)


async def test_auth_required() -> None:
    async with agent("auth-required") as client:
        init = await client.initialize()
        assert init["authMethods"] == [{"id": "fake-login", "name": "Log in"}]
        with pytest.raises(RpcError) as err:
            await client.new_session("/tmp")
        assert (err.value.code, err.value.message) == (-32000, "Authentication required")
        with pytest.raises(RpcError):
            await client.request("authenticate", {"methodId": "other"})
        assert await client.request("authenticate", {"methodId": "fake-login"}) == {}
        assert await client.new_session("/tmp") == {"sessionId": "fake-1"}


def answer_permission(option_id: str | None) -> Handler:
    async def handler(method: str, params: Any) -> Any:
        assert method == "session/request_permission"
        kinds = {o["optionId"]: o["kind"] for o in params["options"]}
        assert kinds == {
            "allow-once": "allow_once",
            "allow-always": "allow_always",
            "reject-once": "reject_once",
        }
        assert params["toolCall"]["kind"] == "execute"
        if option_id is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option_id}}

    return handler


@pytest.mark.parametrize(
    ("option", "status", "reported"),
    [
        ("allow-once", "completed", "allow-once"),
        ("allow-always", "completed", "allow-always"),
        ("reject-once", "failed", "reject-once"),
        (None, "failed", "cancelled"),
    ],
)
async def test_permission(option: str | None, status: str, reported: str) -> None:
    async with agent("permission", handler=answer_permission(option)) as client:
        sid = await start_session(client)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        updates = client.updates(sid)
        assert [u["sessionUpdate"] for u in updates] == [
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
        assert updates[0]["status"] == "pending"
        assert updates[1]["status"] == status
        assert updates[1]["content"][0]["content"]["text"] == f"optionId={reported}"
        assert updates[2]["content"]["text"] == f"permission outcome: {reported}"


async def test_permission_cancelled_turn() -> None:
    asked = asyncio.Event()
    release = asyncio.Event()

    async def handler(method: str, params: Any) -> Any:
        asked.set()
        await release.wait()
        return {"outcome": {"outcome": "cancelled"}}

    async with agent("permission", handler=handler) as client:
        sid = await start_session(client)
        prompt = client.start_prompt(sid, "x")
        await asyncio.wait_for(asked.wait(), 5)
        await client.cancel(sid)
        release.set()  # as the spec requires: answer pending permissions "cancelled"
        reply = await asyncio.wait_for(prompt, 5)
        assert reply["result"] == {"stopReason": "cancelled"}
        assert client.updates(sid)[1]["status"] == "failed"


async def test_usage() -> None:
    async with agent("usage") as client:
        sid = await start_session(client)
        result = await client.prompt(sid, "x")
        assert result == {
            "stopReason": "end_turn",
            "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        }
        usage = next(u for u in client.updates(sid) if u["sessionUpdate"] == "usage_update")
        assert usage == {
            "sessionUpdate": "usage_update",
            "used": 1234,
            "size": 200000,
            "cost": {"amount": 0.0123, "currency": "USD"},
        }


async def test_fs_calls_and_reports(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()

    async def contained(method: str, params: Any) -> Any:
        path = Path(params["path"])
        if not path.resolve().is_relative_to(ws.resolve()):
            raise RpcError(-32602, f"outside the workspace: {path}")
        if method == "fs/write_text_file":
            path.write_text(params["content"])
            return None
        return {"content": path.read_text()}

    async with agent("fs", handler=contained) as client:
        sid = await start_session(client, ws)
        assert (await client.prompt(sid, "x"))["stopReason"] == "end_turn"
        reports = [json.loads(t) for t in chunk_texts(client)]
        assert [(r["method"], r["path"]) for r in reports] == [
            ("fs/write_text_file", str(ws / "fake-fs.txt")),
            ("fs/write_text_file", str(tmp_path / "escape.txt")),
            ("fs/read_text_file", "/etc/passwd"),
        ]
        assert reports[0] == {**reports[0], "result": None}
        assert reports[1]["error"]["code"] == -32602
        assert reports[2]["error"]["code"] == -32602
        assert (ws / "fake-fs.txt").read_text() == "written by the fake agent\n"
        assert not (tmp_path / "escape.txt").exists()


# -- replay -------------------------------------------------------------------------------------------


async def drive_trace(trace: Path, cwd: Path, *, first_id: int) -> tuple[list[Message], RawClient]:
    """Play the client side of ``trace`` against a replaying fake agent.

    Each client message is sent once every agent message that precedes it in the trace has
    arrived; the trace's replies to agent requests are given by the handler, in order. Returns
    the agent messages to expect (response ids mapped to our live ids, the trace's cwd replaced
    by ``cwd``) and the client, whose ``messages`` must equal them.
    """
    records = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    replies = deque(r["msg"] for r in records if r["dir"] == "client" and "method" not in r["msg"])

    async def handler(method: str, params: Any) -> Any:
        reply = replies.popleft()
        if "error" in reply:
            raise RpcError(reply["error"]["code"], reply["error"]["message"])
        return reply.get("result")

    expected: list[Message] = []
    live_ids: dict[str, int] = {}
    trace_cwd: str | None = None
    requests: list[asyncio.Future[Message]] = []
    async with agent("replay", "--trace", str(trace), handler=handler, first_id=first_id) as client:
        for rec in records:
            msg = rec["msg"]
            if rec["dir"] == "agent":
                text = json.dumps(msg)
                if trace_cwd is not None:
                    text = text.replace(trace_cwd, str(cwd))
                exp = json.loads(text)
                if "method" not in exp:
                    exp["id"] = live_ids.get(json.dumps(exp["id"]), exp["id"])
                expected.append(exp)
                continue
            if "method" not in msg:
                continue  # a reply to an agent request: the handler sends it
            if expected:
                await client.wait_for(lambda m: True, start=len(expected) - 1)
            params = msg.get("params")
            if isinstance(params, dict) and isinstance(params.get("cwd"), str):
                trace_cwd = params["cwd"]
                params = {**params, "cwd": str(cwd)}
            if "id" in msg:
                live_ids[json.dumps(msg["id"])] = client._next_id
                requests.append(client.start_request(msg["method"], params))
                await client.drain()
            else:
                await client.notify(msg["method"], params)
        await asyncio.wait_for(asyncio.gather(*requests), 10)
        if expected:
            await client.wait_for(lambda m: True, start=len(expected) - 1)
        assert not replies, "the agent did not ask everything the trace answered"
        return expected, client


async def test_replay_of_a_recorded_fake_trace(tmp_path: Path) -> None:
    """Record the ``permission`` scenario, replay it with other ids and another cwd."""
    async with agent("permission", handler=answer_permission("allow-once"), record=True) as rec:
        sid = await start_session(rec, "/WORKSPACE")
        await rec.prompt(sid, "x")
    trace = tmp_path / "permission.ndjson"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rec.trace))

    cwd = tmp_path / "live"
    expected, client = await drive_trace(trace, cwd, first_id=100)
    assert client.messages == expected
    assert client.messages[0]["id"] == 100  # the initialize response, id rewritten
    assert [a[0] for a in client.answered] == ["session/request_permission"]


async def test_replay_answers_unexpected_requests_with_an_error(tmp_path: Path) -> None:
    trace = tmp_path / "t.ndjson"
    trace.write_text(
        json.dumps({"dir": "client", "msg": {"jsonrpc": "2.0", "id": 0, "method": "initialize"}})
        + "\n"
        + json.dumps({"dir": "agent", "msg": {"jsonrpc": "2.0", "id": 0, "result": {"ok": 1}}})
        + "\n"
    )
    async with agent("replay", "--trace", str(trace), first_id=7) as client:
        with pytest.raises(RpcError) as err:
            await client.request("session/new", {"cwd": "/tmp"})
        assert err.value.code == -32601
        assert await client.request("initialize", {}) == {"ok": 1}


RECORDED = sorted((TRACES / "opencode").glob("*.ndjson"))


@pytest.mark.skipif(not RECORDED, reason="no recorded OpenCode traces")
@pytest.mark.parametrize("trace", RECORDED, ids=[p.stem for p in RECORDED])
async def test_replay_of_recorded_opencode_traces(trace: Path, tmp_path: Path) -> None:
    expected, client = await drive_trace(trace, tmp_path / "live", first_id=1000)
    assert client.messages == expected
    assert client.bad_lines == []


# -- the scripted LLM endpoint (tests/support/llm_stub.py) ---------------------------------------

WRITE_TOOL = {"type": "function", "function": {"name": "write", "parameters": {}}}


def post(stub: LLMStub, body: dict[str, Any]) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "x/json"})
    return conn.getresponse()


def chat(stub: LLMStub, body: dict[str, Any]) -> tuple[int, bytes]:
    with post(stub, body) as resp:
        return resp.status, resp.read()


def sse_chunks(data: bytes) -> list[Any]:
    events = [line[6:] for line in data.decode().split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_stub_models_and_write_tool_call(tmp_path: Path) -> None:
    with LLMStub(cwd=tmp_path) as stub:
        assert stub.base_url == f"http://127.0.0.1:{stub.port}/v1"
        with urllib.request.urlopen(stub.base_url + "/models", timeout=10) as resp:
            assert json.load(resp)["data"][0]["id"] == "scripted"

        user = {"role": "user", "content": "write it"}
        status, data = chat(stub, {"messages": [user], "tools": [WRITE_TOOL], "stream": True})
        assert status == 200
        chunks = sse_chunks(data)
        call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
        assert call["function"]["name"] == "write"
        args = json.loads(call["function"]["arguments"])
        assert args == {"filePath": str(tmp_path / "hello.txt"), "content": stub.file_content}
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[-1]["usage"]["total_tokens"] == 15

        tool_result = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
        body = {"messages": [user, tool_result], "tools": [WRITE_TOOL], "stream": True}
        chunks = sse_chunks(chat(stub, body)[1])
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text == stub.text
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"

        title = {"role": "system", "content": "You are a title generator."}
        reply = json.loads(chat(stub, {"messages": [title, user]})[1])  # not streamed
        assert reply["choices"][0]["message"]["content"] == stub.title
        assert stub.replies() == ["tool:write", "text", "title"]
        assert stub.wait_for_replies("text", "title", timeout=1)


def test_stub_fail_and_custom_script() -> None:
    with LLMStub(script="fail") as stub:
        status, data = chat(stub, {"messages": []})
        assert status == 500 and b"scripted failure" in data
    with LLMStub(script=lambda req: Text(f"call {req.index}")) as stub:
        for i in range(2):
            reply = json.loads(chat(stub, {"messages": []})[1])
            assert reply["choices"][0]["message"]["content"] == f"call {i}"
    with LLMStub() as stub, pytest.raises(TimeoutError):
        stub.wait_for_replies("fail", timeout=0.05)


def test_stub_hang_release_and_abort() -> None:
    with LLMStub(script="hang") as stub:
        with post(stub, {"messages": [], "stream": True}) as resp:
            assert resp.status == 200
            assert stub.stalled.wait(5)
            stub.release()
            chunks = sse_chunks(resp.read())
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text == "Working on it ... done."
        assert not stub.aborted.is_set()
    with LLMStub(script="hang") as stub:
        resp = post(stub, {"messages": [], "stream": True})
        assert stub.stalled.wait(5)
        resp.close()  # the client goes away, as OpenCode does on session/cancel
        assert stub.aborted.wait(5)
    with LLMStub(script="hang") as stub:
        resp = post(stub, {"messages": [], "stream": True})
        assert stub.stalled.wait(5)
    resp.close()  # leaving the block (stop) did not wait for the stalled reply
