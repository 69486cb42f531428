"""The team lifecycles as tables: legal moves, illegal ones raise, docs generated from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.app.diagrams import main as diagrams
from baton.app.diagrams import render
from baton.statetable import StateTable
from baton.team.states import (
    DISPATCH,
    MACHINES,
    SLOT,
    TASK,
    DispatchEvent,
    DispatchState,
    IllegalTeamTransition,
    SlotEvent,
    SlotState,
    TaskEvent,
    TaskState,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_issue_s_path_through_a_task_is_legal() -> None:
    walk = [
        (None, TaskEvent.SEE, TaskState.SEEN),
        (TaskState.SEEN, TaskEvent.CLAIM, TaskState.CLAIMED),
        (TaskState.CLAIMED, TaskEvent.DISPATCH, TaskState.DISPATCHED),
        (TaskState.DISPATCHED, TaskEvent.START, TaskState.TURN_RUNNING),
        (TaskState.TURN_RUNNING, TaskEvent.FINISH, TaskState.TURN_FINISHED),
        (TaskState.TURN_FINISHED, TaskEvent.WAIT_CHILDREN, TaskState.WAITING_CHILDREN),
        (TaskState.WAITING_CHILDREN, TaskEvent.CONSOLIDATE, TaskState.CONSOLIDATING),
        (TaskState.CONSOLIDATING, TaskEvent.DISPATCH, TaskState.DISPATCHED),
        (TaskState.TURN_FINISHED, TaskEvent.SUBMIT, TaskState.IN_REVIEW),
        (TaskState.IN_REVIEW, TaskEvent.APPROVE, TaskState.SETTLED),
    ]
    for state, event, after in walk:
        assert TASK.next(state, event) is after


def test_illegal_moves_raise_naming_machine_state_and_event() -> None:
    with pytest.raises(IllegalTeamTransition) as raised:
        TASK.next(TaskState.SETTLED, TaskEvent.DISPATCH)
    assert raised.value.machine == "task" and raised.value.state == "settled"
    assert "'dispatch'" in str(raised.value) and "'settled' is terminal" in str(raised.value)
    with pytest.raises(IllegalTeamTransition, match="allowed: "):
        TASK.next(TaskState.SEEN, TaskEvent.FINISH)
    with pytest.raises(IllegalTeamTransition):
        DISPATCH.next(
            DispatchState.FINISHED, DispatchEvent.START
        )  # a finished turn never runs again
    with pytest.raises(IllegalTeamTransition):
        SLOT.next(SlotState.IDLE, SlotEvent.PROMPT)  # no session yet


def test_terminal_states_come_from_the_tables() -> None:
    assert TASK.terminal == {TaskState.SETTLED, TaskState.DROPPED}
    assert DISPATCH.terminal == {DispatchState.FINISHED, DispatchState.INTERRUPTED}
    assert SLOT.terminal == frozenset()  # a slot is reopened by the next daemon


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_every_state_is_reachable_from_the_start(machine: object) -> None:
    assert isinstance(machine, StateTable)
    for state in machine.states:
        walk = machine.path(None, state)
        current = None
        for event in walk:
            current = machine.next(current, event)
        assert current is state


def test_recovery_walks_take_only_legal_moves() -> None:
    assert TASK.path(TaskState.INTERRUPTED, TaskState.DISPATCHED) == (
        TaskEvent.RESUME,
        TaskEvent.DISPATCH,
    )
    assert TASK.path(TaskState.TURN_RUNNING, TaskState.INTERRUPTED) == (TaskEvent.INTERRUPT,)
    with pytest.raises(IllegalTeamTransition, match="no task transition path"):
        TASK.path(TaskState.SETTLED, TaskState.CLAIMED)


def test_the_docs_show_diagrams_generated_from_the_tables() -> None:
    for doc in ("architecture.md", "coordination.md"):
        text = (REPO / "docs" / doc).read_text(encoding="utf-8")
        assert render(text) == text, f"docs/{doc} is stale: run scripts/gen-state-diagrams"
        for machine in MACHINES:
            assert machine.mermaid() in text
    assert diagrams(["--check", str(REPO / "docs" / "coordination.md")]) == 0


def test_a_stale_diagram_is_caught(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- state-diagram: dispatch -->\nold\n<!-- /state-diagram -->\n")
    assert diagrams(["--check", str(doc)]) == 1
    assert diagrams([str(doc)]) == 0
    assert DISPATCH.mermaid() in doc.read_text() and diagrams(["--check", str(doc)]) == 0
