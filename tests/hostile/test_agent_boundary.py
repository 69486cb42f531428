"""A hostile agent in a real process: nothing lost, nothing false, the turn goes on."""

from __future__ import annotations

from baton.events.model import CanonicalEvent
from tests.support.harness import Harness, fake


async def test_a_lone_surrogate_is_stored_safely_flagged_and_the_turn_goes_on(
    harness: Harness,
) -> None:
    """Was: the store raised, the reader died, the turn failed with a false AgentExited."""
    session = await harness.open(fake("lone-surrogate"))
    outcome = await session.prompt("go")
    assert outcome.status == "completed", outcome
    assert not harness.of("turn.failed")
    flagged = [e for e in harness.events if "unencodable_text" in e.flags]
    assert {e.type for e in flagged} >= {"transcript.assistant", "tool.execution.started"}
    text = "".join(p.text for p in harness.of("transcript.assistant"))
    assert "lone \ufffd surrogate" in text and "after the surrogate" in text
    started = harness.of("tool.execution.started")
    assert started[0].title == "bad \ufffd title"
    await harness.store.flush()
    stored = list(harness.store.iter_event_json("run-test"))
    assert len(stored) == len(harness.events)
    for line in stored:
        event = CanonicalEvent.model_validate_json(line)
        assert event.to_json() == line  # every stored event re-serializes exactly
    # the session is still usable: a second turn completes too
    again = await session.prompt("again")
    assert again.status == "completed"
