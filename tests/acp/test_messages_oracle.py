"""baton's ACP message builders and parsers against the ACP SDK's models (the oracle).

:mod:`baton.acp.messages` replaces ``agent-client-protocol``'s pydantic models on the
run path; the SDK stays the authority here. Every answer (recorded from real agents in
``tests/traces``, handcrafted, hostile, and generated) goes through both: the same
answers are accepted and rejected, and what baton reads from an accepted one is the
same. Each builder's params equal the SDK model's dump.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import acp.schema as acp_schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from baton.acp import messages

TRACES = Path(__file__).parent.parent / "traces"

_PARSERS = {
    "initialize": messages.parse_initialize,
    "session/new": messages.parse_new_session,
    "session/prompt": messages.parse_prompt,
}
_MODELS: dict[str, type[Any]] = {
    "initialize": acp_schema.InitializeResponse,
    "session/new": acp_schema.NewSessionResponse,
    "session/prompt": acp_schema.PromptResponse,
}


def _sdk_reads(method: str, raw: Any) -> Any:
    """What baton reads, through the SDK; ``"rejected"`` when the SDK refuses ``raw``."""
    try:
        model = _MODELS[method].model_validate(raw if raw is not None else {})
    except ValidationError:
        return "rejected"
    if method == "initialize":
        caps = model.agent_capabilities
        # The SDK's salvage puts its default as a plain dict where a model belongs
        # (``agentCapabilities: []`` gives ``{"loadSession": False, ...}``): read it so.
        session = getattr(caps, "session_capabilities", None)
        return {
            "protocol_version": model.protocol_version,
            "capabilities": None
            if caps is None
            else (
                bool(getattr(caps, "load_session", False)),
                getattr(session, "resume", None) is not None,
                bool(getattr(getattr(caps, "mcp_capabilities", None), "http", False)),
            ),
            "auth_method_ids": [m.id for m in model.auth_methods or []],
            "agent_info": model.agent_info.model_dump(by_alias=True, exclude_none=True)
            if model.agent_info
            else None,
        }
    if method == "session/new":
        return model.session_id
    return model.stop_reason


def _baton_reads(method: str, raw: Any) -> Any:
    try:
        answer = _PARSERS[method](raw)
    except messages.MalformedAnswer:
        return "rejected"
    if isinstance(answer, messages.InitializeAnswer):
        caps = answer.capabilities
        return {
            "protocol_version": answer.protocol_version,
            "capabilities": None
            if caps is None
            else (caps.load_session, caps.resume, caps.mcp_http),
            "auth_method_ids": list(answer.auth_method_ids),
            "agent_info": answer.agent_info,
        }
    if isinstance(answer, messages.NewSessionAnswer):
        return answer.session_id
    assert isinstance(answer, messages.PromptAnswer)
    return answer.stop_reason


def _same(method: str, raw: Any) -> None:
    assert _baton_reads(method, raw) == _sdk_reads(method, raw), (method, raw)


def _recorded() -> list[tuple[str, Any]]:
    """Every answer to initialize, session/new and session/prompt in the recorded traces."""
    found: list[tuple[str, Any]] = []
    for trace in sorted(TRACES.glob("*/*.ndjson")):
        asked: dict[Any, str] = {}
        for line in trace.read_text().splitlines():
            record = json.loads(line)
            msg = record.get("msg", {})
            if record.get("dir") == "client" and msg.get("method") in _PARSERS:
                asked[msg["id"]] = msg["method"]
            elif record.get("dir") == "agent" and "result" in msg and msg.get("id") in asked:
                found.append((asked[msg["id"]], msg["result"]))
    return found


RECORDED = _recorded()


def test_the_traces_hold_every_kind_of_answer() -> None:
    assert {method for method, _ in RECORDED} == set(_PARSERS)


@pytest.mark.parametrize(("method", "raw"), RECORDED)
def test_recorded_answers_read_the_same(method: str, raw: Any) -> None:
    assert _baton_reads(method, raw) != "rejected"
    _same(method, raw)


_V1 = {"protocolVersion": 1}
HANDCRAFTED: list[tuple[str, Any]] = [
    # the answer itself
    *[(m, raw) for m in _PARSERS for raw in (None, {}, [], "x", 1, True, [{}])],
    # protocolVersion: lax integers, range, garbage
    *[
        ("initialize", {"protocolVersion": v})
        for v in (
            1,
            0,
            2,
            65535,
            65536,
            -1,
            1.0,
            1.5,
            True,
            False,
            "1",
            " 1 ",
            "+1",
            "1.0",
            "1.00",
            "1.",
            "1.01",
            "1_0",
            "1e0",
            "0x1",
            "",
            "one",
            "\u0661",
            None,
            [],
            {},
            2**70,
            float("inf"),
            float("nan"),
        )
    ],
    ("initialize", {"protocol_version": 1}),
    ("initialize", {"protocolVersion": "x", "protocol_version": 1}),
    # capabilities: salvaged, never rejecting
    *[
        ("initialize", {**_V1, "agentCapabilities": caps})
        for caps in (
            None,
            {},
            [],
            "x",
            5,
            {"loadSession": True},
            {"loadSession": "yes"},
            {"loadSession": "YES"},
            {"loadSession": " yes"},
            {"loadSession": "on"},
            {"loadSession": "2"},
            {"loadSession": 1},
            {"loadSession": 2},
            {"loadSession": 1.0},
            {"loadSession": 0.5},
            {"loadSession": None},
            {"loadSession": []},
            {"load_session": True},
            {"sessionCapabilities": {"resume": {}}},
            {"sessionCapabilities": {"resume": None}},
            {"sessionCapabilities": {"resume": True}},
            {"sessionCapabilities": {"resume": []}},
            {"sessionCapabilities": {"resume": {"_meta": "x"}}},
            {"sessionCapabilities": {"resume": {"x": 1}}},
            {"sessionCapabilities": None},
            {"sessionCapabilities": []},
            {"session_capabilities": {"resume": {}}},
            {"loadSession": True, "promptCapabilities": {"image": "maybe"}},
            {"loadSession": True, "mcpCapabilities": 3, "nes": "x", "positionEncoding": 4},
            {"mcpCapabilities": {"http": True}},
            {"mcpCapabilities": {"http": "yes", "sse": True}},
            {"mcpCapabilities": {"http": "maybe"}},
            {"mcpCapabilities": {"http": None}},
            {"mcpCapabilities": {"sse": True}},
            {"mcpCapabilities": []},
            {"mcp_capabilities": {"http": True}},
            {"loadSession": True, "sessionCapabilities": {"resume": {}, "list": 5}},
            {"loadSession": True, "auth": 5, "providers": [], "_meta": "x"},
        )
    ],
    # authMethods: a list whose malformed items are skipped
    *[
        ("initialize", {**_V1, "authMethods": methods})
        for methods in (
            None,
            [],
            {},
            "x",
            5,
            [{"id": "a", "name": "A"}],
            [{"id": "a"}],
            [{"name": "A"}],
            [{"id": 1, "name": "A"}],
            [{"id": "a", "name": 1}],
            [5, None, "x", [], {"id": "ok", "name": "OK"}],
            [{"id": "a", "name": "A", "description": 3, "type": "bogus"}],
            [{"id": "e", "name": "E", "type": "env_var", "vars": [{"name": "K"}]}],
            [{"id": "e", "name": "E", "type": "env_var", "vars": "x"}],
            [{"id": "t", "name": "T", "type": "terminal", "args": 5}],
            [{"id": "a", "name": "A", "_meta": "x"}],
        )
    ],
    # agentInfo: salvaged to None, title salvaged alone
    *[
        ("initialize", {**_V1, "agentInfo": info})
        for info in (
            None,
            5,
            [],
            {},
            {"name": "a"},
            {"name": "a", "version": "1"},
            {"name": "a", "version": 1},
            {"name": 1, "version": "1"},
            {"name": "a", "version": "1", "title": "A", "_meta": {"k": [1]}, "extra": True},
            {"name": "a", "version": "1", "title": 3, "_meta": "x"},
            {"name": "a", "version": "1", "field_meta": {"k": 1}},
        )
    ],
    ("initialize", {**_V1, "_meta": "x", "unknown": {"deep": [1]}}),
    # session/new: the id is authoritative, configOptions must be a list
    *[
        ("session/new", raw)
        for raw in (
            {"sessionId": "s"},
            {"sessionId": ""},
            {"sessionId": 1},
            {"sessionId": None},
            {"sessionId": True},
            {"sessionId": ["s"]},
            {"session_id": "s"},
            {"sessionId": "s", "configOptions": None},
            {"sessionId": "s", "configOptions": {}},
            {"sessionId": "s", "configOptions": "x"},
            {"sessionId": "s", "configOptions": [5, {}]},
            {"sessionId": "s", "modes": 5, "models": "x", "_meta": 3},
            {"sessionId": "s", "modes": {"currentModeId": "a", "availableModes": []}},
        )
    ],
    # session/prompt: the stop reason is authoritative, usage and _meta are salvaged
    *[
        ("session/prompt", raw)
        for raw in (
            *({"stopReason": r} for r in sorted(messages.STOP_REASONS)),
            {"stopReason": "END_TURN"},
            {"stopReason": "end_turn "},
            {"stopReason": ""},
            {"stopReason": None},
            {"stopReason": 1},
            {"stopReason": ["end_turn"]},
            {"stop_reason": "refusal"},
            {"stopReason": "nope", "stop_reason": "end_turn"},
            {"stopReason": "end_turn", "usage": "x", "_meta": 5},
            {"stopReason": "end_turn", "usage": {"totalTokens": -1}},
            {
                "stopReason": "end_turn",
                "usage": {"totalTokens": 1, "inputTokens": 1, "outputTokens": 0},
            },
        )
    ],
]


@pytest.mark.parametrize(("method", "raw"), HANDCRAFTED)
def test_handcrafted_and_hostile_answers_read_the_same(method: str, raw: Any) -> None:
    _same(method, raw)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70000),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=3),
    st.sampled_from(["", "1", " 1", "yes", "no", "on", "true", "end_turn", "cancelled", "s"]),
    st.text(max_size=4),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["resume", "loadSession", "id", "name", "version", "_meta", "x"]),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)
_KEYS = {
    "initialize": [
        "protocolVersion", "protocol_version", "agentCapabilities", "authMethods", "agentInfo",
        "_meta",
    ],
    "session/new": ["sessionId", "session_id", "configOptions", "modes", "_meta"],
    "session/prompt": ["stopReason", "stop_reason", "usage", "_meta"],
}  # fmt: skip


@st.composite
def _answers(draw: st.DrawFn) -> tuple[str, Any]:
    method = draw(st.sampled_from(sorted(_PARSERS)))
    keys = draw(st.lists(st.sampled_from(_KEYS[method]), unique=True, max_size=4))
    return method, {key: draw(_values) for key in keys}


@settings(max_examples=400, deadline=None)
@given(_answers())
def test_generated_answers_read_the_same(answer: tuple[str, Any]) -> None:
    _same(*answer)


def test_the_builders_send_what_the_sdk_models_would() -> None:
    def dump(model: Any) -> dict[str, Any]:
        return dict(model.model_dump(by_alias=True, exclude_none=True))

    servers = [{"name": "fcop", "command": "x", "args": [], "env": [], "vendor": 1}]
    for meta in ({}, {"baton": {"run": "r"}}):
        assert messages.initialize_params(client_meta=meta, version="9.9") == dump(
            acp_schema.InitializeRequest(
                protocol_version=messages.PROTOCOL_VERSION,
                client_capabilities=acp_schema.ClientCapabilities(
                    fs=acp_schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                    field_meta=meta or None,
                ),
                client_info=acp_schema.Implementation(name="baton", title="baton", version="9.9"),
            )
        )
    # MCP server entries go out as given (the SDK's union would reshape a vendor entry).
    assert messages.new_session_params(cwd="/w", mcp_servers=servers) == {
        **dump(acp_schema.NewSessionRequest(cwd="/w", mcp_servers=[])),
        "mcpServers": servers,
    }
    for model in (acp_schema.ResumeSessionRequest, acp_schema.LoadSessionRequest):
        assert messages.reopen_params(session_id="s", cwd="/w", mcp_servers=servers) == {
            **dump(model(session_id="s", cwd="/w", mcp_servers=[])),
            "mcpServers": servers,
        }
    assert messages.cancel_params("s") == dump(acp_schema.CancelNotification(session_id="s"))
    # Every built request is valid for the SDK's request model too.
    acp_schema.InitializeRequest.model_validate(
        messages.initialize_params(client_meta={}, version="1")
    )
    acp_schema.NewSessionRequest.model_validate(
        messages.new_session_params(cwd="/w", mcp_servers=[])
    )


def test_an_accepted_answer_keeps_its_unknown_fields() -> None:
    raw = {"protocolVersion": 1, "vendorThing": {"a": [1]}, "agentCapabilities": {"x": 1}}
    assert messages.parse_initialize(raw).raw == raw
    assert messages.parse_new_session({"sessionId": "s", "v": 1}).raw == {"sessionId": "s", "v": 1}
    assert messages.parse_prompt({"stopReason": "refusal", "v": 2}).raw["v"] == 2


@pytest.mark.parametrize(
    ("caps", "ways"),
    [
        ({"loadSession": True, "sessionCapabilities": {"resume": {}}}, ["resume", "load"]),
        ({"loadSession": "yes"}, ["load"]),
        ({"sessionCapabilities": {"resume": {"_meta": {}}}}, ["resume"]),
        ({"loadSession": False, "sessionCapabilities": {"resume": None}}, []),
        (None, []),
        # The SDK "salvages" these to a plain dict, which the handshake used to trip on.
        ([], []),
        ({"sessionCapabilities": 5, "loadSession": True}, ["load"]),
    ],
)
def test_the_handshake_reads_the_capabilities_as_before(caps: Any, ways: list[str]) -> None:
    from baton.runner.handshake import _ways

    answer = messages.parse_initialize({"protocolVersion": 1, "agentCapabilities": caps})
    assert _ways(["resume", "load"], answer.capabilities) == ways
