"""The pinned official ACP schema, the wire validator, and baton's answers checked against both.

The validator accepts real recordings and catches what hand tests miss; every client method the
schema defines is one baton serves, every error code baton answers with is one of the schema's,
and the answers of the client-method error table (:mod:`tests.support.client_probe`) conform.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from baton.agents.builtin.agent import BuiltinAgent
from baton.agents.builtin.config import AgentConfig
from baton.runner.client_methods import SERVED_METHODS
from baton.testing import in_memory
from tests.support.acp_schema import (
    PROTOCOL_VERSION,
    SCHEMA_PACKAGE_VERSION,
    WireValidator,
    schema_path,
)
from tests.support.agents import skip_reason
from tests.support.client_probe import CASES, CODES, ProbeAgent, prepare_workspace
from tests.support.harness import Harness

TRACES = Path(__file__).resolve().parents[1] / "traces"


@pytest.fixture(scope="module")
def validator() -> WireValidator:
    try:
        path = schema_path()
    except RuntimeError:
        reason = skip_reason()
        if reason:
            pytest.skip(reason)
        raise
    return WireValidator.load(path)


def test_the_pinned_schema_describes_protocol_version_1(validator: WireValidator) -> None:
    package = schema_path().parents[2]
    assert json.loads((package / "package.json").read_text())["version"] == SCHEMA_PACKAGE_VERSION
    index = (package / "dist" / "v1" / "schema" / "index.js").read_text()
    declared = re.search(r"PROTOCOL_VERSION = (\d+);", index)
    assert declared is not None and int(declared.group(1)) == PROTOCOL_VERSION


def _client_requests(validator: WireValidator) -> set[str]:
    defs = validator.schema["$defs"]
    return {
        d["x-method"]
        for name, d in defs.items()
        if isinstance(d, dict) and d.get("x-side") == "client" and name.endswith("Request")
    }


def test_baton_serves_every_client_method_of_the_schema(validator: WireValidator) -> None:
    assert _client_requests(validator) == SERVED_METHODS


def test_every_code_baton_answers_with_is_the_schemas(validator: WireValidator) -> None:
    named = {
        alt["const"]: alt["title"]
        for alt in validator.schema["$defs"]["ErrorCode"]["anyOf"]
        if "const" in alt
    }
    for code, message in CODES.items():
        assert named.get(code, "").lower() == message.lower(), (code, named)


@pytest.mark.parametrize("name", list(CASES))
async def test_the_error_table_conforms(
    validator: WireValidator, harness: Harness, name: str
) -> None:
    prepare_workspace(harness.workspace)
    agent = ProbeAgent(CASES[name].steps)
    session = await harness.open(["probe-agent"], transport=in_memory(agent), preset="all")
    await session.prompt("probe", timeout=60)
    problems = validator.validate(agent.frames)
    # The probe's own bad requests are findings by design; baton's answers must have none.
    assert [p for p in problems if p.split()[1] == "client"] == []


def rec(direction: str, msg: dict[str, Any]) -> dict[str, Any]:
    return {"dir": direction, "msg": {"jsonrpc": "2.0", **msg}}


WRITE = rec(
    "agent",
    {
        "id": 7,
        "method": "fs/write_text_file",
        "params": {"sessionId": "s", "path": "/w/a", "content": "x"},
    },
)


@pytest.mark.parametrize(
    "trace", sorted((TRACES / "opencode").glob("*.ndjson")), ids=lambda p: p.stem
)
def test_recorded_opencode_traces_conform(validator: WireValidator, trace: Path) -> None:
    records = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    assert validator.validate(records) == []


def test_a_null_result_for_a_write_is_caught(validator: WireValidator) -> None:
    problems = validator.validate([WRITE, rec("client", {"id": 7, "result": None})])
    assert len(problems) == 1 and "WriteTextFileResponse" in problems[0]
    assert validator.validate([WRITE, rec("client", {"id": 7, "result": {}})]) == []


def test_bad_permission_outcomes_and_params_are_caught(validator: WireValidator) -> None:
    ask = rec(
        "agent",
        {
            "id": "u-1",
            "method": "session/request_permission",
            "params": {
                "sessionId": "s",
                "toolCall": {"toolCallId": "t"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
            },
        },
    )
    good = rec(
        "client", {"id": "u-1", "result": {"outcome": {"outcome": "selected", "optionId": "ok"}}}
    )
    bad = rec("client", {"id": "u-1", "result": {"outcome": {"outcome": "maybe"}}})
    assert validator.validate([ask, good]) == []
    assert validator.validate([ask, bad])
    broken = rec("client", {"id": 1, "method": "session/prompt", "params": {"sessionId": "s"}})
    assert any("PromptRequest" in p for p in validator.validate([broken]))


def test_unknown_methods_and_orphan_responses_are_caught(validator: WireValidator) -> None:
    problems = validator.validate(
        [
            rec("agent", {"method": "session/telepathy", "params": {}}),
            rec("client", {"id": 99, "result": {}}),
            rec("agent", {"method": "_vendor/extension", "params": {"anything": True}}),
        ]
    )
    assert len(problems) == 2
    assert "session/telepathy" in problems[0] and "unknown id" in problems[1]


def test_named_vendor_prefixes_are_envelope_checked_only(validator: WireValidator) -> None:
    records = [
        rec("agent", {"id": 3, "method": "craft/drainMidTurnQueue", "params": {}}),
        rec("client", {"id": 3, "error": {"code": -32601, "message": "Method not found"}}),
    ]
    assert validator.validate(records)
    assert validator.validate(records, vendor=("craft/",)) == []


def test_the_builtin_agents_param_table_is_the_schemas(
    validator: WireValidator, tmp_path: Path
) -> None:
    """``tests/agents/test_params.py`` checks each method's required members: those the schema
    requires (the agent's routes without required members aside)."""
    from tests.agents.test_params import REQUIRED

    defs = validator.schema["$defs"]
    for method, members in REQUIRED.items():
        [name] = [n for n, d in defs.items() if d.get("x-method") == method and "Request" in n]
        assert set(defs[name].get("required", [])) == set(members), method
    agent = BuiltinAgent(None, AgentConfig(state_dir=tmp_path))  # type: ignore[arg-type]
    requests, _ = agent.routes()
    routed = set(requests)
    without = {m for m in routed - set(REQUIRED) if _required(defs, m)}
    assert not without, f"methods with required members and no row: {without}"


def _required(defs: dict[str, Any], method: str) -> list[str]:
    [name] = [n for n, d in defs.items() if d.get("x-method") == method and "Request" in n]
    return list(defs[name].get("required", []))


def _where(name: str, stable: dict[str, Any], unstable: dict[str, Any]) -> str | None:
    """``stable``, ``unstable`` or ``None``: where the pinned schema defines ``name``."""

    def defines(schema: dict[str, Any]) -> bool:
        defs = schema["$defs"]
        if any(isinstance(d, dict) and d.get("x-method") == name for d in defs.values()):
            return True
        if "." in name:
            kind, member = name.split(".", 1)
            return member in defs.get(kind, {}).get("properties", {})
        variants = defs["SessionUpdate"].get("oneOf") or defs["SessionUpdate"]["anyOf"]
        return any(
            v.get("properties", {}).get("sessionUpdate", {}).get("const") == name for v in variants
        )

    if defines(stable):
        return "stable"
    return "unstable" if defines(unstable) else None


def test_the_additions_table_says_what_the_pinned_schema_says(validator: WireValidator) -> None:
    from baton.providers.acp_additions import ADDITIONS

    unstable = json.loads(schema_path().with_name("schema.unstable.json").read_text())
    for row in ADDITIONS:
        for name in row.names:
            assert _where(name, validator.schema, unstable) == row.pinned, (row.feature, name)


def _in_python_sdk(name: str) -> bool:
    """Whether ``agent-client-protocol`` (the pinned 0.12.1) models ``name``."""
    import inspect

    import acp.meta
    import acp.schema

    methods = {*acp.meta.AGENT_METHODS.values(), *acp.meta.CLIENT_METHODS.values()}
    if name in methods or "/" in name:
        return name in methods
    source = inspect.getsource(acp.schema)
    if "." in name:
        kind, member = name.split(".", 1)
        fields = getattr(getattr(acp.schema, kind, None), "model_fields", {})
        return any(member in (n, f.alias) for n, f in fields.items())
    return f'Literal["{name}"], Field(alias="sessionUpdate")' in source


def test_the_additions_table_says_what_the_python_sdk_has() -> None:
    from baton.providers.acp_additions import ADDITIONS

    for row in ADDITIONS:
        for name in row.names:
            assert _in_python_sdk(name) == row.in_sdk, (row.feature, name)
