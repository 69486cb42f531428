"""The pure parts of the cursor-sdk transport: the run-stream mapping, discovery, options."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from baton.acp.jsonrpc import RpcError
from baton.cursor_sdk.discovery import ReadyLineReader, parse_ready_line
from baton.cursor_sdk.options import prompt_text, sdk_mcp_servers
from baton.errors import AgentStartError
from baton.events.acp_normalizer import AcpNormalizer
from baton.events.model import (
    DelegationCompleted,
    PlanUpdated,
    ProviderNotice,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    TranscriptAssistant,
    UsageReported,
)
from baton.events.redaction import NoRedaction
from baton.providers.cursor_sdk.extension import CursorSdkExtension
from baton.providers.cursor_sdk.tables import tool_kind
from baton.providers.cursor_sdk.translate import RunTranslator

RUN = "run-1"


def sdk(kind: str, **fields: Any) -> dict[str, Any]:
    message = {"type": kind, "agent_id": "agent-1", "run_id": RUN, **fields}
    return {"sdkMessage": {"type": kind, "message": message}, "offset": "1"}


def assistant(text: str) -> dict[str, Any]:
    return sdk(
        "assistant", message={"role": "assistant", "content": [{"type": "text", "text": text}]}
    )


def tool(call: str, name: str, status: str, args: Any = None, result: Any = None) -> dict[str, Any]:
    fields: dict[str, Any] = {"call_id": call, "name": name, "status": status}
    if args is not None:
        fields["args"] = args
    if result is not None:
        fields["result"] = result
    return sdk("tool_call", **fields)


def result(status: str, **extra: Any) -> dict[str, Any]:
    full = {"runId": RUN, "agentId": "agent-1", "status": f"RUN_LIFECYCLE_STATUS_{status}", **extra}
    return {
        "result": {"agentId": "agent-1", "runId": RUN, "status": full["status"], "result": full}
    }


def test_deltas_of_one_stretch_share_a_message_id_and_a_tool_call_starts_a_new_one() -> None:
    t = RunTranslator()
    t.begin_run()
    ids = [t.feed(assistant(x)).updates[0]["messageId"] for x in ("Hel", "lo")]
    assert ids[0] == ids[1]
    start = t.feed(tool("c1", "read", "running", {"path": "a.py"})).updates[0]
    assert (start["sessionUpdate"], start["kind"], start["locations"]) == (
        "tool_call",
        "read",
        [{"path": "a.py"}],
    )
    assert t.feed(assistant("again")).updates[0]["messageId"] != ids[0]
    done = t.feed(tool("c1", "read", "completed", result={"status": "success"})).updates[0]
    assert (done["sessionUpdate"], done["status"]) == ("tool_call_update", "completed")
    assert done["rawOutput"] == {"status": "success"}


def test_every_sdk_tool_kind_and_custom_tools() -> None:
    assert tool_kind("shell") == ("execute", True)
    assert tool_kind("write") == ("edit", True)
    assert tool_kind("teleport") == ("other", False)
    custom = {"providerIdentifier": "custom-user-tools", "toolName": "run_command", "args": {}}
    assert tool_kind("mcp", custom) == ("execute", True)
    assert tool_kind("mcp", {"providerIdentifier": "baton", "toolName": "write_report"}) == (
        "other",
        True,
    )


def test_a_run_ends_as_its_result_says_and_usage_keeps_its_provenance() -> None:
    t = RunTranslator()
    t.begin_run()
    t.feed(sdk("usage", usage={"inputTokens": 10, "outputTokens": "5", "reasoningTokens": 2}))
    t.feed(sdk("usage", usage={"inputTokens": 1, "cacheWriteTokens": 3}))
    usage = t.prompt_usage()
    assert usage is not None
    assert (usage["inputTokens"], usage["outputTokens"], usage["thoughtTokens"]) == (11, 5, 2)
    assert usage["cachedWriteTokens"] == 3
    assert usage["_meta"]["cursor-sdk/usage"]["reports"] == 2
    assert t.feed(result("FINISHED")).end is not None
    assert t.end is not None and t.end.status == "finished"
    failed = t.feed(result("ERROR", errorCode="rate_limited", errorMessage="slow down")).end
    assert failed is not None
    assert (failed.status, failed.error_code, failed.error_message) == (
        "error",
        "rate_limited",
        "slow down",
    )
    t.begin_run()
    assert t.prompt_usage() is None  # no usage reported: unavailable, never zero


def test_what_the_mapping_does_not_know_is_forwarded_raw() -> None:
    t = RunTranslator()
    odd = sdk("hologram", shape="cube")
    (update,) = t.feed(odd).updates
    assert update == {"sessionUpdate": "cursor_sdk:hologram", "envelope": odd}
    (other,) = t.feed({"teleport": {"x": 1}, "offset": "9"}).updates
    assert other["sessionUpdate"] == "cursor_sdk:teleport"


def normalize(envelopes: list[dict[str, Any]]) -> list[Any]:
    """The envelopes through the transport's mapping and the generic ACP normalizer."""
    t = RunTranslator()
    t.begin_run()
    n = AcpNormalizer(
        redaction=NoRedaction(), display_path=lambda p: p, extension=CursorSdkExtension()
    )
    out: list[Any] = [d.payload for d in n.begin_turn("agent-1", "turn-1")]
    for envelope in envelopes:
        for update in t.feed(envelope).updates:
            out += [
                d.payload for d in n.update({"sessionId": "agent-1", "update": update}, now_ms=0)
            ]
    out += [d.payload for d in n.end_turn(t.prompt_usage())]
    return out


def test_the_stream_becomes_canonical_events_through_the_acp_normalizer() -> None:
    todos = {
        "todos": [{"content": "a", "status": "inProgress"}, {"content": "b", "status": "cancelled"}]
    }
    payloads = normalize(
        [
            assistant("Hi "),
            assistant("there."),
            tool("c1", "write", "running", {"path": "x.txt", "fileText": "hi"}),
            tool(
                "c1",
                "write",
                "completed",
                {"path": "x.txt", "fileText": "hi"},
                {"status": "success"},
            ),
            tool("c2", "updateTodos", "running", todos),
            tool("c2", "updateTodos", "completed", todos, {"status": "success"}),
            tool(
                "c3",
                "task",
                "completed",
                {"description": "look", "subagentType": {"kind": "explore"}},
            ),
            tool("c4", "teleport", "running", {}),
            tool("c5", "teleport", "running", {}),
            sdk("usage", usage={"inputTokens": 4, "outputTokens": 2}),
        ]
    )
    kinds = [type(p) for p in payloads]
    (text,) = [p for p in payloads if isinstance(p, TranscriptAssistant)]
    assert text.text == "Hi there."
    (write,) = [
        p for p in payloads if isinstance(p, ToolExecutionCompleted) and p.tool_call_id == "c1"
    ]
    assert write.kind == "edit" and write.diffs[0].new_text == "hi"
    (plan,) = [p for p in payloads if isinstance(p, PlanUpdated)]
    assert [(s.status, s.native_status) for s in plan.steps] == [
        ("in_progress", None),
        ("pending", "cancelled"),
    ]
    assert DelegationCompleted in kinds
    unknown = [
        p for p in payloads if isinstance(p, ProviderNotice) and p.category == "unclassified"
    ]
    assert len(unknown) == 1 and "teleport" in unknown[0].summary  # flagged once per name
    assert sum(isinstance(p, ToolExecutionStarted) and p.kind == "other" for p in payloads) == 2
    (usage,) = [p for p in payloads if isinstance(p, UsageReported)]
    assert (usage.available, usage.input_tokens) == (True, 4)


def test_a_turn_without_usage_reports_it_unavailable() -> None:
    (usage,) = [p for p in normalize([assistant("x")]) if isinstance(p, UsageReported)]
    assert usage.available is False and "Cursor SDK" in (usage.reason or "")


# ---------------------------------------------------------------------- discovery


def ready(**fields: Any) -> bytes:
    body = {"schemaVersion": 1, "transport": "tcp", "protocol": "connect", **fields}
    return b"cursor-sdk-bridge ready " + json.dumps(body).encode()


def test_a_ready_line_with_a_token_file(tmp_path: Path) -> None:
    token = tmp_path / "auth-token"
    token.write_text("s3cret\n")
    endpoint = parse_ready_line(ready(url="http://127.0.0.1:4242", authTokenFile=str(token), pid=7))
    assert (endpoint.url, endpoint.auth_token, endpoint.pid) == (
        "http://127.0.0.1:4242",
        "s3cret",
        7,
    )
    assert parse_ready_line(ready(host="::1", port=9, authToken="t")).url == "http://[::1]:9"


@pytest.mark.parametrize(
    "line,reason",
    [
        (ready(url="http://10.0.0.1:80", authToken="t"), "not on a loopback"),
        (ready(url="https://127.0.0.1:1", authToken="t"), "not on a loopback"),
        (ready(url="http://127.0.0.1:1"), "no auth token"),
        (ready(schemaVersion=2, url="http://127.0.0.1:1", authToken="t"), "schema"),
        (b"cursor-sdk-bridge ready {nope", "not JSON"),
        (ready(url="http://127.0.0.1:1", authTokenFile="/nonexistent/token"), "cannot be read"),
    ],
)
def test_a_bad_ready_line_is_refused_with_its_reason(line: bytes, reason: str) -> None:
    with pytest.raises(AgentStartError, match=reason):
        parse_ready_line(line)


def test_a_token_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("t")
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(AgentStartError, match="cannot be read"):
        parse_ready_line(ready(url="http://127.0.0.1:1", authTokenFile=str(tmp_path / "link")))


def test_the_ready_line_is_found_across_chunks_and_junk() -> None:
    reader = ReadyLineReader()
    line = ready(url="http://127.0.0.1:1", authToken="t")
    assert reader.feed(b"warming up\n" + line[:10]) is None
    assert reader.feed(line[10:] + b"\nmore\n") == line
    assert reader.feed(b"cursor-sdk-bridge ready {}\n") is None  # only the first counts
    long = ReadyLineReader()
    assert long.feed(b"x" * 40_000) is None and not long.overflow
    assert long.feed(b"\n" + line + b"\n") == line
    flood = ReadyLineReader()
    flood.feed(b"cursor-sdk-bridge ready " + b"x" * 40_000)
    assert flood.overflow


# ------------------------------------------------------------------------ options


def test_acp_mcp_servers_become_the_sdks() -> None:
    servers = sdk_mcp_servers(
        [
            {
                "name": "baton",
                "command": "/usr/bin/python3",
                "args": ["-m", "x"],
                "env": [{"name": "K", "value": "v"}],
            },
            {"type": "http", "name": "hub", "url": "http://127.0.0.1:9", "headers": []},
        ]
    )
    assert servers == {
        "baton": {
            "type": "stdio",
            "command": "/usr/bin/python3",
            "args": ["-m", "x"],
            "env": {"K": "v"},
        },
        "hub": {"type": "http", "url": "http://127.0.0.1:9", "headers": {}},
    }


@pytest.mark.parametrize(
    "servers",
    [
        "nope",
        [{"command": "x"}],
        [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}],
        [{"name": "a", "command": "x", "env": [{"value": "v"}]}],
        [{"name": "a", "type": "ws", "url": "x"}],
    ],
)
def test_bad_mcp_servers_are_invalid_params(servers: Any) -> None:
    with pytest.raises(RpcError) as caught:
        sdk_mcp_servers(servers)
    assert caught.value.code == -32602


def test_prompt_text_takes_text_and_refuses_media() -> None:
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "resource_link", "uri": "file:///x", "name": "x"},
    ]
    assert prompt_text(blocks) == "a\n[x](file:///x)"
    with pytest.raises(RpcError, match="image"):
        prompt_text([{"type": "image", "data": "", "mimeType": "image/png"}])


@pytest.mark.parametrize(
    ("duration", "shown"),
    [
        (12, "12 ms"),
        (12.7, "12 ms"),
        (float("inf"), "an unknown time"),
        (float("-inf"), "an unknown time"),
        (float("nan"), "an unknown time"),
        (-5, "an unknown time"),
        (True, "an unknown time"),
        ("12", "an unknown time"),
        (None, "an unknown time"),
    ],
)
def test_a_thinking_time_no_clock_measures_is_unknown_never_a_crash(
    duration: object, shown: str
) -> None:
    """The bridge's JSON may carry ``Infinity``/``NaN`` (Python's json reads them): an
    ``int()`` of them raised ``OverflowError``/``ValueError`` out of the normalizer."""
    payloads = normalize([sdk("thinking", text="", thinking_duration_ms=duration)])
    (notice,) = [p for p in payloads if isinstance(p, ProviderNotice) and "thinking" in p.summary]
    assert notice.summary == f"cursor-sdk: thinking took {shown}"
