"""The transition table: every legal move, every illegal one raises, terminals absorb."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from baton.errors import RequestError
from baton.request_model.errors import IllegalTransition
from baton.requests.states import (
    OPEN_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    Event,
    State,
    mermaid,
    next_state,
)

EXPECTED = {
    (State.PENDING, Event.ANSWER): State.ANSWERED,
    (State.PENDING, Event.CANCEL): State.CANCELLED,
    (State.PENDING, Event.EXPIRE): State.EXPIRED,
    (State.PENDING, Event.REJECT): State.REJECTED,
    (State.ANSWERED, Event.DELIVER): State.DELIVERED,
    (State.ANSWERED, Event.CANCEL): State.CANCELLED,
    (State.ANSWERED, Event.EXPIRE): State.EXPIRED,
}


def test_table_is_exactly_the_lifecycle() -> None:
    assert dict(TRANSITIONS) == EXPECTED
    assert {State.DELIVERED, State.CANCELLED, State.EXPIRED, State.REJECTED} == TERMINAL_STATES
    assert {State.PENDING, State.ANSWERED} == OPEN_STATES


@pytest.mark.parametrize(("state", "event"), list(itertools.product(State, Event)))
def test_every_pair_is_legal_or_raises_naming_state_and_event(state: State, event: Event) -> None:
    if (state, event) in EXPECTED:
        assert next_state(state, event) is EXPECTED[(state, event)]
        return
    with pytest.raises(IllegalTransition) as info:
        next_state(state, event)
    assert isinstance(info.value, RequestError)
    assert info.value.state == state.value and info.value.event == event.value
    assert repr(state.value) in str(info.value) and repr(event.value) in str(info.value)


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATES))
def test_terminal_states_absorb(terminal: State) -> None:
    for event in Event:
        with pytest.raises(IllegalTransition, match="is terminal"):
            next_state(terminal, event)


def test_no_path_from_delivered_back_to_pending() -> None:
    reachable = {State.DELIVERED}
    for (src, _), dst in TRANSITIONS.items():
        if src in reachable:
            reachable.add(dst)
    assert reachable == {State.DELIVERED}


def test_docs_diagram_is_generated_from_the_table() -> None:
    doc = Path(__file__).parents[2] / "docs" / "requests.md"
    assert mermaid() in doc.read_text(encoding="utf-8")
