"""The turn and session tables: every legal move, illegal ones loud, one ending rule."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from baton.errors import LocalProtocolError, UsageError
from baton.runner import session_state as session_module
from baton.runner.session import SessionState
from baton.runner.turn import (
    TERMINAL_TURN_STATES,
    TRANSITIONS,
    CancelCause,
    PromptEnd,
    Turn,
    TurnEvent,
    TurnState,
    mermaid,
    next_state,
    settle,
)
from tests.support.harness import Harness, fake


def test_terminal_states_absorb_and_every_open_state_can_end() -> None:
    assert {TurnState.COMPLETED, TurnState.FAILED, TurnState.CANCELLED} == TERMINAL_TURN_STATES
    for state in TERMINAL_TURN_STATES:
        for event in TurnEvent:
            with pytest.raises(LocalProtocolError, match="terminal"):
                next_state(state, event)
    for state in set(TurnState) - TERMINAL_TURN_STATES:
        ends = {TRANSITIONS[(state, e)] for e in TurnEvent if (state, e) in TRANSITIONS}
        assert ends >= TERMINAL_TURN_STATES, f"{state} cannot reach every ending"


def test_a_second_ending_is_refused() -> None:
    turn = Turn("t", 0.0)
    turn.fire(TurnEvent.COMPLETE)
    with pytest.raises(LocalProtocolError, match="'cancelled' in state 'completed'"):
        turn.fire(TurnEvent.CANCELLED)


def test_the_first_cause_stays_and_a_kill_says_so() -> None:
    turn = Turn("t", 0.0)
    turn.ask_stop(CancelCause.TIMEOUT, "turn timeout after 1s")
    turn.ask_stop(CancelCause.USER, "Ctrl-C")
    assert (turn.state, turn.cause, turn.reason) == (
        TurnState.CANCELLING,
        CancelCause.TIMEOUT,
        "turn timeout after 1s",
    )
    turn.mark_killed("ignored cancel")
    assert turn.state is TurnState.KILLED and turn.reason == "killed: ignored cancel"
    turn.ask_stop(CancelCause.CLOSING, "closing")  # absorbed once killed
    assert turn.state is TurnState.KILLED


@pytest.mark.parametrize(
    ("state", "end", "stop", "expected"),
    [
        (TurnState.RUNNING, PromptEnd.ANSWERED, "end_turn", (TurnEvent.COMPLETE, False)),
        (TurnState.CANCELLING, PromptEnd.ANSWERED, "cancelled", (TurnEvent.CANCELLED, False)),
        (TurnState.KILLED, PromptEnd.EXITED, None, (TurnEvent.CANCELLED, True)),
        (TurnState.KILLED, PromptEnd.REMOTE_ERROR, None, (TurnEvent.CANCELLED, True)),
        (TurnState.CANCELLING, PromptEnd.EXITED, None, (TurnEvent.FAIL, False)),
        (TurnState.RUNNING, PromptEnd.REMOTE_ERROR, None, (TurnEvent.FAIL, False)),
        (TurnState.KILLED, PromptEnd.TIMED_OUT, None, (TurnEvent.FAIL, False)),
        (TurnState.RUNNING, PromptEnd.MALFORMED, None, (TurnEvent.FAIL, False)),
    ],
)
def test_settle(state: TurnState, end: PromptEnd, stop: str | None, expected: object) -> None:
    ending = settle(state, end, stop)
    assert (ending.event, ending.forced) == expected


def test_the_diagram_comes_from_the_table() -> None:
    diagram = mermaid()
    assert "running --> cancelling: cancel" in diagram
    assert "killed --> cancelled: cancelled" in diagram
    assert "cancelling --> cancelling" not in diagram, "self-loops are absorbed, not drawn"


def test_the_session_table_is_closed() -> None:
    reachable = {dst for dst in session_module.TRANSITIONS.values()}
    assert reachable == set(SessionState) - {SessionState.OPENING}
    assert not any(src is SessionState.CLOSED for src, _ in session_module.TRANSITIONS)


async def test_a_second_prompt_and_a_prompt_after_close_are_usage_errors(
    harness: Harness,
) -> None:
    session = await harness.open(fake("hang-prompt"))
    first = asyncio.create_task(session.prompt("go"))
    await harness.next_event("turn.submitted")
    with pytest.raises(UsageError, match="prompting"):
        await session.prompt("again")
    await session.cancel()
    assert (await first).status == "cancelled"
    assert session.state is SessionState.READY
    await session.close()
    with pytest.raises(UsageError, match="closed"):
        await session.prompt("after close")
    assert harness.types().count("turn.submitted") == 1


def test_the_documented_diagram_is_the_table() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
    assert mermaid() in docs.read_text(encoding="utf-8"), "regenerate it from turn.mermaid()"
