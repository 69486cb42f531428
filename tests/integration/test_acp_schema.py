"""The wire validator itself: it accepts real recordings and catches what hand tests miss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_schema import WireValidator, schema_path
from tests.support.agents import AGENTS_DIR, skip_reason

TRACES = Path(__file__).resolve().parents[1] / "traces"


@pytest.fixture(scope="module")
def validator() -> WireValidator:
    if not (AGENTS_DIR / "claude").is_dir():
        reason = skip_reason()
        if reason:
            pytest.skip(reason)
        pytest.fail("the ACP schema comes with claude-agent-acp: run scripts/install-agents")
    return WireValidator.load(schema_path())


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
