"""Liveness wired into the running turn (issue 12 item 4): a silent agent gets one
``turn.stalled`` long before its turn timeout, its next frame one ``turn.resumed``; a
request waiting for a human is baton's silence, not the agent's; the watch ends with
the turn and leaves no task behind.

Every wait is on an event or a condition, never a sleep: the silent agent stays silent
until the test cancels, so the order of things does not depend on the machine's load.
"""

from __future__ import annotations

import asyncio

from baton.events.model import TurnStalled
from baton.request_model.documents import PermissionAnswer
from baton.runner.liveness import Liveness, resumed_text, span, stall_text
from baton.runner.session import AgentSession
from tests.support.harness import Harness, fake


def _watch_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("stall-watch-")]


async def _condition(check: object, *, timeout: float = 30.0) -> None:
    assert callable(check)
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


async def test_a_silent_agent_stalls_once_then_resumes_when_it_speaks(harness: Harness) -> None:
    session = await harness.open(fake("silent"), stall_timeout=0.2)
    prompt = asyncio.create_task(session.prompt("go", timeout=600))
    stalled = await harness.next_event("turn.stalled")
    assert stalled.threshold_ms == 200 and stalled.silent_ms >= 200
    assert stalled.timeout_in_ms is not None and 0 < stalled.timeout_in_ms <= 600_000
    await session.cancel("the test has seen the stall")  # the agent speaks once cancelled
    outcome = await asyncio.wait_for(prompt, 30)
    assert outcome.status == "cancelled"
    types = harness.types()
    assert types.count("turn.stalled") == 1 and types.count("turn.resumed") == 1, types
    first_reply = types.index("transcript.assistant")
    assert types.index("turn.stalled") < types.index("turn.resumed") < first_reply
    assert first_reply < types.index("turn.cancelled")
    [resumed] = harness.of("turn.resumed")
    assert resumed.silent_ms >= stalled.silent_ms
    turn_ids = {e.turn_id for e in harness.events if e.type in ("turn.stalled", "turn.resumed")}
    assert turn_ids == {outcome.turn_id}
    assert not _watch_tasks(), "the watch ends with its turn"


async def test_a_talking_agent_never_stalls_and_the_watch_ends_with_the_turn(
    harness: Harness,
) -> None:
    session = await harness.open(fake("ok"), stall_timeout=30)
    outcome = await session.prompt("hello")
    assert outcome.status == "completed"
    assert "turn.stalled" not in harness.types()
    assert session.turns is not None and session.turns.watch is None
    assert not _watch_tasks()


async def test_a_request_waiting_for_a_human_is_not_a_stall(harness: Harness) -> None:
    threshold = 0.2
    session: AgentSession = await harness.open(
        fake("permission"), preset="reads", wait_timeout=600, stall_timeout=threshold
    )
    prompt = asyncio.create_task(session.prompt("go", timeout=600))
    created = await harness.next_event("request.created")
    assert session.turns is not None and session.turns.watch is not None
    liveness = session.turns.watch.liveness
    # Wait until the watch has looked at the silence well past its threshold (it moves
    # the silence's start forward while a human is asked) or until it (wrongly) stalled.
    past = asyncio.get_running_loop().time() * 1000 + 3 * threshold * 1000
    await _condition(lambda: liveness.stalled or liveness.last_heard_ms >= past)
    assert not liveness.stalled and "turn.stalled" not in harness.types()
    await harness.ledger.answer(
        created.request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    outcome = await asyncio.wait_for(prompt, 30)
    assert outcome.status == "completed"
    assert "turn.stalled" not in harness.types(), harness.types()


def test_the_stall_says_how_far_off_the_turn_timeout_is() -> None:
    watch = Liveness.start(60, now_ms=1_000, deadline_ms=1_000 + 3_600_000)
    stalled = watch.check(61_000)
    assert stalled is not None and stalled.timeout_in_ms == 3_540_000
    assert Liveness.start(60, now_ms=0).check(60_000) == TurnStalled(
        silent_ms=60_000, threshold_ms=60_000, timeout_in_ms=None
    )


def test_the_stall_words() -> None:
    assert [span(ms) for ms in (0, 200, 42_000, 60_000, 3_540_000, 7_500_000)] == [
        "0s",
        "0.2s",
        "42s",
        "1m 0s",
        "59m 0s",
        "2h 5m",
    ]
    assert stall_text(60_000, 3_540_000) == (
        "the agent has said nothing for 1m 0s (turn timeout in 59m 0s)"
    )
    assert resumed_text(65_400) == "the agent spoke again after 1m 5s of silence"
