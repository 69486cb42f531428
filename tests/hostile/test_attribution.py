"""Late updates are recorded on their own turn by the agent's ids, never on the current one.

Was: ``SessionEvents.drafts`` stamped every draft with the running turn, so an update of
turn 1's tool call and a chunk of turn 1's message sent during turn 2 were recorded on
turn 2 (and the normalizer's ``late`` flag was dropped).
"""

from __future__ import annotations

import io

from rich.console import Console

from baton.cli.render import HumanRenderer
from baton.events.model import CanonicalEvent
from tests.support.harness import Harness, fake


async def _two_turns(harness: Harness) -> tuple[str, str, list[CanonicalEvent]]:
    session = await harness.open(fake("cross-turn"))
    first = await session.prompt("one")
    second = await session.prompt("two")
    assert (first.status, second.status) == ("completed", "completed")
    await harness.store.flush()
    stored = [
        CanonicalEvent.model_validate_json(line)
        for line in harness.store.iter_event_json("run-test")
    ]
    return first.turn_id, second.turn_id, stored


async def test_a_tool_update_of_turn_one_during_turn_two_is_on_turn_one_flagged_late(
    harness: Harness,
) -> None:
    one, two, stored = await _two_turns(harness)
    [completed] = [e for e in stored if e.type == "tool.execution.completed"]
    assert completed.payload.tool_call_id == "xt-1"
    assert completed.turn_id == one and "late" in completed.flags
    [started] = [e for e in stored if e.type == "tool.execution.started"]
    assert started.turn_id == one and "late" not in started.flags
    turn_two_submitted = next(
        e.seq for e in stored if e.type == "turn.submitted" and e.turn_id == two
    )
    assert completed.seq > turn_two_submitted, "it did arrive during turn 2"


async def test_a_chunk_of_turn_ones_message_during_turn_two_is_on_turn_one_flagged_late(
    harness: Harness,
) -> None:
    one, _, stored = await _two_turns(harness)
    texts = [
        (e.turn_id, e.payload.text, tuple(e.flags))
        for e in stored
        if e.type == "transcript.assistant"
    ]
    late = [t for t in texts if "late part of turn one" in t[1]]
    assert late == [(one, " and a late part of turn one", ("late",))], texts
    notices = [
        e for e in stored if e.type == "provider.notice" and e.payload.category == "late_update"
    ]
    assert [e.turn_id for e in notices] == [one], "one notice, on the late turn"


async def test_updates_without_ids_during_turn_two_are_on_turn_two(harness: Harness) -> None:
    _, two, stored = await _two_turns(harness)
    [plan] = [e for e in stored if e.type == "plan.updated"]
    assert plan.turn_id == two and plan.flags == []
    mine = [e for e in stored if e.type == "transcript.assistant" and e.turn_id == two]
    assert "".join(e.payload.text for e in mine) == "turn two startsno ids turn two text"
    assert all("late" not in e.flags for e in mine)


async def test_the_run_view_shows_a_late_event_apart_from_the_current_turns_text(
    harness: Harness,
) -> None:
    _, _, stored = await _two_turns(harness)
    out = io.StringIO()
    renderer = HumanRenderer(Console(file=out, width=200, color_system=None), live=False)
    for event in stored:
        renderer(event)
    lines = out.getvalue().splitlines()
    [current] = [line for line in lines if "turn two starts" in line]
    assert "late part" not in current, lines
    [late] = [line for line in lines if "late part of turn one" in line]
    assert "turn two" not in late.replace("late part of turn one", ""), lines
    at = lines.index(late)
    assert "late" in lines[at - 1] and "turn" in lines[at - 1], "marked as the earlier turn's"
