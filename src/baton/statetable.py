"""A lifecycle as data: one transition table type for every state machine in baton.

Requests, turns, sessions and the team loop's tasks, slots and turns are each a
:class:`StateTable` (h11's ``_state.py`` rule: everything that decides whether
something may move lives in one table), so "what is terminal", "what may happen
now", "how do I get from here to there" and the generated diagram are written once.
An illegal move raises the *owner's* error (a request's ``IllegalTransition``, a
turn's ``LocalProtocolError``, a session's ``UsageError``), built by the table's
``illegal`` factory from a message naming the machine, the state, the event and what
was allowed, so every lifecycle fails the same way and each keeps its place in the
error tree.

A ``None`` source state means "not yet known" (a task baton has not seen); tables
whose things are born in a fixed state name them in ``starts`` instead.

No I/O, and no imports from the rest of baton: this is the bottom of the house.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Generic, TypeVar

__all__ = ["Illegal", "StateTable", "default_illegal", "from_each"]

S = TypeVar("S", bound=StrEnum)
E = TypeVar("E", bound=StrEnum)

Illegal = Callable[[str, str | None, str], Exception]
"""``(message, state value or None, event value) -> the exception to raise``."""


def default_illegal(message: str, state: str | None, event: str) -> Exception:
    return ValueError(message)


def from_each(states: Iterable[S], event: E, target: S) -> dict[tuple[S | None, E], S]:
    """``event`` leads to ``target`` from each of ``states``: a rule such as "CLOSE is legal
    from every open state" declared once, spread into a table's transitions."""
    return {(state, event): target for state in states}


@dataclass(frozen=True, slots=True)
class StateTable(Generic[S, E]):
    """One lifecycle: ``(state, event) -> state``; anything absent is illegal."""

    name: str
    states: type[S]
    events: type[E]
    transitions: Mapping[tuple[S | None, E], S]
    starts: frozenset[S] = frozenset()
    """States a thing is born in, besides the targets of ``None``-source moves."""
    illegal: Illegal = field(default=default_illegal, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Read-only, so no caller can add a move behind the table's back.
        object.__setattr__(self, "transitions", MappingProxyType(dict(self.transitions)))

    @property
    def initial(self) -> frozenset[S]:
        born = frozenset(dst for (src, _), dst in self.transitions.items() if src is None)
        return born | self.starts

    @property
    def terminal(self) -> frozenset[S]:
        """States with no way out, derived from the table so they cannot drift from it."""
        return frozenset(s for s in self.states if not any(src == s for src, _ in self.transitions))

    @property
    def open(self) -> frozenset[S]:
        """Every state that is not terminal (what a restart must resolve)."""
        return frozenset(self.states) - self.terminal

    def allowed(self, state: S | None) -> frozenset[E]:
        return frozenset(e for (src, e) in self.transitions if src == state)

    def next(self, state: S | None, event: E) -> S:
        """The state after ``event``, or raise the owner's error naming what was allowed."""
        try:
            return self.transitions[(state, event)]
        except KeyError:
            shown = "nothing" if state is None else repr(state.value)
            if state is not None and state in self.terminal:
                detail = f"{shown} is terminal"
            else:
                detail = "allowed: " + (
                    ", ".join(sorted(e.value for e in self.allowed(state))) or "nothing"
                )
            raise self.illegal(
                f"illegal {self.name} transition: event {event.value!r} in state {shown} "
                f"({detail})",
                None if state is None else state.value,
                event.value,
            ) from None

    def path(self, state: S | None, target: S) -> tuple[E, ...]:
        """The shortest event sequence from ``state`` to ``target`` (empty when already there).

        Recovery derives where a thing *is* from outside evidence (FCoP's files), then
        walks the record there through legal moves only; raises when no walk exists.
        """
        if state == target:
            return ()
        frontier: list[tuple[S | None, tuple[E, ...]]] = [(state, ())]
        seen: set[S | None] = {state}
        while frontier:
            later: list[tuple[S | None, tuple[E, ...]]] = []
            for src, events in frontier:
                for (from_state, event), dst in self.transitions.items():
                    if from_state != src or dst in seen:
                        continue
                    walk = (*events, event)
                    if dst == target:
                        return walk
                    seen.add(dst)
                    later.append((dst, walk))
            frontier = later
        shown = "nothing" if state is None else repr(state.value)
        raise self.illegal(
            f"no {self.name} transition path from {shown} to {target.value!r}",
            None if state is None else state.value,
            f"->{target.value}",
        )

    def mermaid(self) -> str:
        """The state diagram for the docs, generated from the table (self-loops left out:
        they absorb a repeated event and say nothing about where a thing can go)."""
        lines = ["stateDiagram-v2"]
        lines += [f"    [*] --> {s.value}" for s in self.states if s in self.starts]
        for (src, event), dst in self.transitions.items():
            if src == dst:
                continue
            left = "[*]" if src is None else src.value
            lines.append(f"    {left} --> {dst.value}: {event.value}")
        lines += [f"    {s.value} --> [*]" for s in self.states if s in self.terminal]
        return "\n".join(lines)
