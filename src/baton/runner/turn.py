"""One prompt turn as a tiny state machine: exactly one terminal outcome.

``submitted → completed | failed | cancelled``; a second terminal is refused, so
the stream can never carry two endings for one turn however the agent, a timeout
and a user's Ctrl-C race.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from baton.errors import LocalProtocolError
from baton.events.model import Payload, TurnCancelled, TurnCompleted, TurnFailed


class TurnState(Enum):
    SUBMITTED = "submitted"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


_TERMINAL = {
    TurnCompleted: TurnState.COMPLETED,
    TurnFailed: TurnState.FAILED,
    TurnCancelled: TurnState.CANCELLED,
}


@dataclass(slots=True)
class Turn:
    turn_id: str
    started_ms: float
    state: TurnState = TurnState.SUBMITTED
    cancel_requested: str | None = None
    """Why a cancel was asked for (user, timeout, replacement), if it was."""
    tool_calls: int = 0
    late_updates: int = 0
    outcome: Payload | None = field(default=None)

    @property
    def done(self) -> bool:
        return self.state is not TurnState.SUBMITTED

    def elapsed_ms(self, now_ms: float) -> int:
        return max(0, int(now_ms - self.started_ms))

    def finish(self, outcome: TurnCompleted | TurnFailed | TurnCancelled) -> None:
        """Record the one terminal outcome; a second one is a bug and raises."""
        if self.done:
            raise LocalProtocolError(
                f"turn {self.turn_id} already ended ({self.state.value}); "
                f"refusing a second terminal {outcome.TYPE}"
            )
        self.state = _TERMINAL[type(outcome)]
        self.outcome = outcome
