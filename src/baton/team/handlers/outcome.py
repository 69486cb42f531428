"""What a step handler answers, and the shape every handler has.

A handler performs one :data:`~baton.team.steps.Step` of one TASK under the TASK's
lock and says what the evaluation does next: decide again from fresh facts, stop
(the TASK waits, or another worker takes it), or run the turn it dispatched (outside
the lock: an agent's turn is long). A handler that finds the record moved raises
:class:`~baton.team.book.RecordMoved`; the executor gathers the facts again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Protocol, TypeVar

from baton.team.next_step import Facts
from baton.team.slots import Slot
from baton.team.steps import Step
from baton.team.turns import RoleTurn

__all__ = ["Handler", "Outcome", "RunTurn", "Then"]


class Then(Enum):
    """The evaluation's next move after a step that did not dispatch a turn."""

    DECIDE_AGAIN = auto()
    """The step moved something: gather the facts and ask again."""
    STOP = auto()
    """The TASK waits (or was handed to another worker): this evaluation ends."""


@dataclass(frozen=True, slots=True)
class RunTurn:
    """A turn was dispatched (committed ``dispatched``): run it outside the TASK's lock."""

    turn: RoleTurn


Outcome = Then | RunTurn

S_contra = TypeVar("S_contra", bound=Step, contravariant=True)


class Handler(Protocol[S_contra]):
    """Performs one kind of step; constructed with exactly the collaborators it uses."""

    async def __call__(self, step: S_contra, facts: Facts, slot: Slot | None) -> Outcome: ...
