"""The executor's dispatch table: each kind of step, keyed by its type, to its handler.

h11's way (behaviour keyed by type in a table) instead of an ``isinstance`` chain:
a new step is one entry here and one handler module, and :meth:`HandlerTable.missing`
names any step :func:`~baton.team.next_step.next_step` can answer that nothing handles.
"""

from __future__ import annotations

import typing
from typing import Any

from baton.team.handlers.outcome import Handler, Outcome
from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.steps import Step, Wait

__all__ = ["HandlerTable", "step_types"]

S = typing.TypeVar("S", bound=Step)


def step_types() -> frozenset[type]:
    """Every step type :func:`~baton.team.next_step.next_step` may answer with."""
    return frozenset(typing.get_args(Step))


class HandlerTable:
    """``type(step) -> handler``; filled with :meth:`add`, which pairs them type-safely."""

    def __init__(self) -> None:
        # Any: each entry pairs a step type with a handler of that type (add() checks it);
        # a Mapping cannot say so per key.
        self._by_type: dict[type, Handler[Any]] = {}

    def add(self, kind: type[S], handler: Handler[S]) -> None:
        if kind in self._by_type:
            raise ValueError(f"{kind.__name__} has a handler already")
        self._by_type[kind] = handler

    def missing(self) -> frozenset[type]:
        """Step types without a handler (``Wait`` needs none: the evaluation ends)."""
        return step_types() - {Wait} - self._by_type.keys()

    async def perform(self, step: Step, facts: Facts, slot: Slot | None) -> Outcome:
        try:
            handler = self._by_type[type(step)]
        except KeyError:
            raise AssertionError(f"no handler for {step!r}") from None
        return await handler(step, facts, slot)
