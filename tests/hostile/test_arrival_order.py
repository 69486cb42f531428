"""Strict arrival order across requests and notifications on one connection.

Was: an inbound request was handled in a task that ran after the later notifications
of the same read, so a ``cursor/update_todos`` request and the notification after it
were reduced backwards (revision 1 showed the second update; a todo went completed →
in progress), and a permission request was recorded after updates sent after it.
Scenario ``request-order`` writes each request and the notifications after it in one
write (one read for baton) and does not wait for the replies.
"""

from __future__ import annotations

from typing import Any

import pytest

from baton.events.model import CanonicalEvent
from tests.support.acp_schema import WireValidator, schema_path
from tests.support.harness import Harness, fake
from tests.support.wiretap import read_tap, tapped


def _seq(harness: Harness, event_type: str, where: Any = lambda _p: True) -> int:
    return next(e.seq for e in harness.events if e.type == event_type and where(e.payload))


async def _run(harness: Harness, wait_timeout: float | None) -> list[CanonicalEvent]:
    session = await harness.open(fake("request-order"), family="cursor", wait_timeout=wait_timeout)
    outcome = await session.prompt("go")
    assert outcome.status == "completed", outcome
    await harness.store.flush()
    stored = [
        CanonicalEvent.model_validate_json(x) for x in harness.store.iter_event_json("run-test")
    ]
    assert [e.seq for e in stored] == sorted(e.seq for e in stored)
    return stored


async def test_a_todo_request_then_a_todo_notification_reduce_in_arrival_order(
    harness: Harness,
) -> None:
    stored = await _run(harness, wait_timeout=0)
    plans = [e.payload for e in stored if e.type == "plan.updated"]
    assert [(p.revision, [s.status for s in p.steps]) for p in plans] == [
        (1, ["in_progress"]),
        (2, ["completed"]),
    ], "revision 1 is the request (first to arrive), revision 2 the notification"
    assert plans[1].steps[0].content == "write the parser"


async def test_a_permission_request_is_recorded_before_the_updates_sent_after_it(
    harness: Harness,
) -> None:
    # The request waits for a human (nobody answers): the stream must go on meanwhile.
    await _run(harness, wait_timeout=600)
    created = _seq(harness, "request.created")
    progressed = _seq(harness, "tool.execution.progressed", lambda p: p.tool_call_id == "order-1")
    chunk = _seq(harness, "transcript.assistant", lambda p: "after the permission" in p.text)
    assert created < progressed < chunk, harness.types()
    assert harness.of("request.cancelled"), "still waiting when the turn ended: not stalled"


async def test_fs_and_terminal_requests_take_effect_before_the_frames_after_them(
    harness: Harness,
) -> None:
    await _run(harness, wait_timeout=0)
    written = _seq(harness, "file.written")
    after_write = _seq(harness, "transcript.assistant", lambda p: "after the write" in p.text)
    assert written < after_write
    terminal = _seq(harness, "provider.notice", lambda p: p.category == "terminal")
    after_terminal = _seq(harness, "transcript.thinking", lambda p: "after the terminal" in p.text)
    assert terminal < after_terminal
    assert (harness.workspace / "order.txt").read_text() == "in order\n"


async def test_the_order_scenario_over_a_process_conforms_to_the_acp_schema(
    harness: Harness,
) -> None:
    """The same scenario as a real process behind a wire tap: the same order, and both
    directions valid ACP (the answers to requests baton admitted inline included)."""
    if not schema_path_or_none():
        pytest.skip("the ACP schema comes with claude-agent-acp: run scripts/install-agents")
    log = harness.tmp / "wire.ndjson"
    session = await harness.open(
        tapped(fake("request-order").argv(), log), family="cursor", wait_timeout=0
    )
    assert (await session.prompt("go")).status == "completed"
    plans = harness.of("plan.updated")
    assert [[s.status for s in p.steps] for p in plans] == [["in_progress"], ["completed"]]
    records = read_tap(log)
    answered = {
        m["msg"]["id"] for m in records if m["dir"] == "client" and "method" not in m["msg"]
    }
    assert {"todos-1", "perm-1", "fs-1", "term-1"} <= answered
    assert WireValidator.load(schema_path()).validate(records, vendor=("cursor/",)) == []


def schema_path_or_none() -> bool:
    try:
        return schema_path().is_file()
    except (OSError, RuntimeError):
        return False
