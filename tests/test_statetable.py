"""Every lifecycle in baton is one :class:`StateTable`: one way to move, fail and be drawn."""

from __future__ import annotations

import ast
from enum import StrEnum
from pathlib import Path

import pytest

from baton.app.diagrams import TABLES, render
from baton.statetable import StateTable, from_each

REPO = Path(__file__).resolve().parents[1]


class Light(StrEnum):
    OFF = "off"
    ON = "on"
    BROKEN = "broken"


class Flip(StrEnum):
    TOGGLE = "toggle"
    SMASH = "smash"


class Refused(Exception):
    def __init__(self, message: str, state: str | None, event: str) -> None:
        super().__init__(message)
        self.state, self.event = state, event


LAMP: StateTable[Light, Flip] = StateTable(
    "lamp",
    Light,
    Flip,
    {
        (Light.OFF, Flip.TOGGLE): Light.ON,
        (Light.ON, Flip.TOGGLE): Light.OFF,
        (Light.ON, Flip.SMASH): Light.BROKEN,
        (Light.OFF, Flip.SMASH): Light.BROKEN,
    },
    starts=frozenset({Light.OFF}),
    illegal=Refused,
)


def test_moves_terminal_open_and_allowed_come_from_the_table() -> None:
    assert LAMP.next(Light.OFF, Flip.TOGGLE) is Light.ON
    assert LAMP.initial == {Light.OFF} and LAMP.terminal == {Light.BROKEN}
    assert LAMP.open == {Light.OFF, Light.ON}
    assert LAMP.allowed(Light.ON) == {Flip.TOGGLE, Flip.SMASH}
    assert LAMP.path(Light.OFF, Light.BROKEN) == (Flip.SMASH,)


def test_an_illegal_move_raises_the_owners_error_naming_state_and_event() -> None:
    with pytest.raises(Refused) as raised:
        LAMP.next(Light.BROKEN, Flip.TOGGLE)
    assert raised.value.state == "broken" and raised.value.event == "toggle"
    assert "illegal lamp transition: event 'toggle' in state 'broken'" in str(raised.value)
    assert "'broken' is terminal" in str(raised.value)
    with pytest.raises(Refused, match="no lamp transition path"):
        LAMP.path(Light.BROKEN, Light.ON)


def test_the_table_cannot_be_changed_behind_its_back() -> None:
    with pytest.raises(TypeError):
        LAMP.transitions[(Light.BROKEN, Flip.TOGGLE)] = Light.ON  # type: ignore[index]


def test_every_lifecycle_is_a_state_table_with_a_diagram_in_the_docs() -> None:
    names = [table.name for table in TABLES]
    assert sorted(names) == [
        "dispatch",
        "owner",
        "plan_entry",
        "question",
        "request",
        "run",
        "session",
        "slot",
        "task",
        "turn",
        "worktree",
    ]
    docs = "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md")))
    assert render(docs) == docs, "a diagram is stale: run scripts/gen-state-diagrams"
    for table in TABLES:
        assert f"<!-- state-diagram: {table.name} -->" in docs
        reached = set(table.initial)  # every state can be reached from a start
        for _ in table.states:
            reached |= {d for (s, _e), d in table.transitions.items() if s is None or s in reached}
        assert reached == set(table.states), table.name


def _is_transition_dict(node: ast.Dict) -> bool:
    """``{(State.X, Event.Y): State.Z, ...}``: the shape of a lifecycle table."""
    keys = [k for k in node.keys if k is not None]
    return len(keys) >= 2 and all(
        isinstance(k, ast.Tuple)
        and len(k.elts) == 2
        and all(isinstance(e, ast.Attribute | ast.Name | ast.Constant) for e in k.elts)
        and isinstance(node.values[i], ast.Attribute)
        for i, k in enumerate(node.keys)
        if k is not None
    )


def test_no_hand_written_transition_table_is_left() -> None:
    """A lifecycle's table is given to a StateTable (or its owner's factory of one), never
    kept as a bare ``{(state, event): state}`` that some function reads its own way."""
    offenders = []
    for path in (REPO / "src" / "baton").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        handed: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in {
                "StateTable",
                "_table",
            }:
                handed |= {id(arg) for arg in node.args}
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_table"):
                handed |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Dict)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and _is_transition_dict(node) and id(node) not in handed:
                offenders.append(f"{path.relative_to(REPO).as_posix()}:{node.lineno}")
    assert offenders == []


def test_from_each_declares_one_move_from_every_state_given() -> None:
    moves = from_each((Light.OFF, Light.ON), Flip.SMASH, Light.BROKEN)
    assert moves == {
        (Light.OFF, Flip.SMASH): Light.BROKEN,
        (Light.ON, Flip.SMASH): Light.BROKEN,
    }
    assert from_each((), Flip.SMASH, Light.BROKEN) == {}
