"""Runner fixes of issue 11, each first written as a failing test.

* a turn timeout with a permission pending answers it ``cancelled`` *before* ``session/cancel``
  (the user-cancel path did; an agent blocked on the request was otherwise killed);
* one ``request.cancelled`` per cancelled request (the waiter emitted a second one);
* a JSON-RPC error from ``session/new`` is typed (``SessionRejected``), a ``session.failed``;
* a permission's ``toolCall`` seeds the tool record of a call never announced, which counts.
"""

from __future__ import annotations

import asyncio

import pytest

from baton.acp.transport import TransportFactory
from baton.errors import SessionRejected
from baton.runner.session import AgentSession
from tests.support.harness import Fake, Harness, fake
from tests.support.transport_tap import tapping
from tests.support.wiretap import read_tap


async def _open(
    harness: Harness, command: list[str] | Fake, transport: TransportFactory | None = None
) -> AgentSession:
    # Escalated and waiting for a human (nobody answers in these tests).
    return await harness.open(
        command, transport=transport, preset="reads", wait_timeout=600, family="builtin"
    )


async def _wait_for(harness: Harness, event_type: str) -> None:
    async with asyncio.timeout(30):
        while not harness.of(event_type):
            await asyncio.sleep(0.02)


async def test_a_turn_timeout_answers_the_pending_request_before_cancelling(
    harness: Harness,
) -> None:
    log = harness.tmp / "wire.ndjson"
    agent = fake("permission")
    session = await _open(harness, agent, tapping(harness.transport_for(agent), log))
    outcome = await session.prompt("go", timeout=2)
    assert outcome.status == "failed" and "stopped on session/cancel" in (outcome.error or "")
    assert not harness.of("harness.diagnostic") or all(
        d.category != "killed" for d in harness.of("harness.diagnostic")
    ), "the agent answered in time once its request was answered"
    wire = [r["msg"] for r in read_tap(log)]
    reply = next(i for i, m in enumerate(wire) if "result" in m and "outcome" in m["result"])
    assert wire[reply]["result"]["outcome"] == {"outcome": "cancelled"}
    cancel = next(i for i, m in enumerate(wire) if m.get("method") == "session/cancel")
    assert reply < cancel, "the request is answered before session/cancel"
    [cancelled] = harness.of("request.cancelled")
    assert "timeout" in cancelled.reason


async def test_a_cancelled_request_has_one_request_cancelled(harness: Harness) -> None:
    session = await _open(harness, fake("permission"))
    turn = asyncio.create_task(session.prompt("go", timeout=60))
    await _wait_for(harness, "request.created")
    await session.cancel("test cancel")
    await turn  # the agent may end the turn either way once its request is answered
    assert len(harness.of("request.cancelled")) == 1, harness.types()


async def test_a_session_new_error_is_typed_and_recorded(harness: Harness) -> None:
    with pytest.raises(SessionRejected, match="session store unavailable"):
        await _open(harness, fake("session-new-error"))
    [failed] = harness.of("session.failed")
    assert failed.error_type == "SessionRejected"
    assert "session store unavailable" in failed.message


async def test_a_permission_seeds_an_unannounced_tool_call(harness: Harness) -> None:
    session = await harness.open(fake("permission-unannounced"), preset="all")
    outcome = await session.prompt("go")
    started = harness.of("tool.execution.started")
    assert started and started[0].title == "rm -rf build" and started[0].kind == "execute"
    [done] = harness.of("tool.execution.completed")
    assert done.title == "rm -rf build" and done.kind == "execute" and done.status == "completed"
    assert outcome.tool_calls == 1
    assert not harness.of("security.unapproved_mutation")


@pytest.mark.process
async def test_every_decision_names_its_rule(harness: Harness) -> None:
    """The escalating policy rule on request.created; who answered (`cli`) on request.answered."""
    import os
    import sys

    session = await _open(harness, fake("permission"))
    turn = asyncio.create_task(session.prompt("go", timeout=120))
    await _wait_for(harness, "request.created")
    [created] = harness.of("request.created")
    assert created.rule == "preset-reads:escalate:execute"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "baton",
        "answer",
        created.request_id,
        "--allow",
        "--db",
        str(harness.tmp / "baton.db"),
        env={"PATH": os.environ["PATH"], "HOME": str(harness.tmp / "home")},
    )
    assert await proc.wait() == 0
    outcome = await turn
    assert outcome.status == "completed"
    [answered] = harness.of("request.answered")
    assert answered.decided_by == "human" and answered.rule == "cli"
    assert answered.escalated_by == "preset-reads:escalate:execute"


async def test_automatic_decisions_name_their_rule(harness: Harness) -> None:
    session = await harness.open(fake("permission"), preset="none")
    await session.prompt("go")
    [created] = harness.of("request.created")
    [answered] = harness.of("request.answered")
    assert created.rule == answered.rule == "preset-none:deny:execute"
    assert answered.decided_by == "policy" and answered.escalated_by is None
