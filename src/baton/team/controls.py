"""The human's controls of a running team: cancel a role's turn, drop a task tree.

A control is an outbox row (kind :data:`CANCEL_TURN`) that the owning ``baton up``
consumes, like the rows the role tools write: the dashboard never talks to an agent,
the team loop that holds the session acts (it cancels the turn as Ctrl-C does a one-off
run, and records who asked, so the TASK goes to *needs attention* instead of being
re-prompted). What the asking side can check is checked here, in one place: the slot
exists and is working, on the task the human saw, and its team loop is running. The
team loop checks again when it consumes the row (the turn may have ended meanwhile;
then nothing is cancelled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from baton.errors import BatonError
from baton.role_tools.binding import OutboxRecord, SlotAccess
from baton.store import team_sql
from baton.store.store import Store
from baton.team.records import SlotRecord
from baton.team.states import SlotState

__all__ = [
    "CANCEL_TURN",
    "DROP_TREE",
    "MAX_REASON_CHARS",
    "CancelAsk",
    "ControlRefused",
    "cancel_ask",
    "request_cancel",
]

CANCEL_TURN: Final = "cancel_turn"
DROP_TREE: Final = "drop_tree"
"""Abandon a task tree (``baton task drop``): :mod:`baton.team.drop`."""
MAX_REASON_CHARS: Final = 500


class ControlRefused(BatonError):
    """The control cannot apply in the team's current state (the web answers 409)."""


@dataclass(frozen=True, slots=True)
class CancelAsk:
    """A cancel as the team loop reads it back from its outbox row."""

    slot: str
    pointer_seq: int
    via: str
    reason: str

    def text(self, human: str) -> str:
        """How the turn's end and the TASK's attention say it."""
        said = f": {self.reason}" if self.reason else ""
        return f"{human} cancelled the turn from the {self.via}{said}"


# Any: an outbox row's JSON data, checked here.
def cancel_ask(slot: str, data: dict[str, Any]) -> CancelAsk | None:
    """The cancel in an outbox row's data; None when the row is malformed."""
    seq, via, reason = data.get("pointer_seq"), data.get("via"), data.get("reason", "")
    if not isinstance(seq, int) or not isinstance(via, str) or not isinstance(reason, str):
        return None
    return CancelAsk(slot, seq, via[:40], reason[:MAX_REASON_CHARS])


# Any: JSON out (the outbox row it posted).
def request_cancel(
    store: Store, slot: str, *, task_id: str | None, reason: str, via: str
) -> dict[str, Any]:
    """Ask the team loop to cancel ``slot``'s running turn; returns what was posted.

    ``task_id`` is the task the human saw the slot working on: when the slot has
    moved on, nothing is posted (a late click must not cancel the next turn).
    """
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise ControlRefused(f"the reason is over {MAX_REASON_CHARS} characters")
    access = SlotAccess(store, slot)
    if not access.team_loop_alive():
        raise ControlRefused("no baton up is running for this project: there is no turn to cancel")
    row = store.read_tx(lambda tx: team_sql.SLOTS.get(tx, slot))
    if row is None:
        raise ControlRefused(f"no role slot {slot!r} in this project")
    record = SlotRecord.from_row(row)
    if record.state is not SlotState.WORKING:
        raise ControlRefused(f"{slot} is {record.state.value}: there is no turn to cancel")
    if task_id is not None and task_id != record.task_id:
        raise ControlRefused(
            f"{slot} is no longer on {task_id} (now on {record.task_id or 'none'})"
        )
    outbox_id = access.post(
        OutboxRecord(
            kind=CANCEL_TURN,
            role=record.role,
            task_id=record.task_id,
            attempt_id=record.attempt_id,
            data={"pointer_seq": record.pointer_seq, "via": via, "reason": reason},
        )
    )
    return {"slot": slot, "task_id": record.task_id, "outbox_id": outbox_id}


def request_drop(store: Store, task_id: str, *, reason: str, via: str) -> int | None:
    """Ask the running team loop to drop ``task_id``'s tree; the outbox row's id, or
    None when no ``baton up`` runs (the caller then drops it itself)."""
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise ControlRefused(f"the reason is over {MAX_REASON_CHARS} characters")
    row = store.read_tx(lambda tx: team_sql.TASKS.get(tx, task_id))
    if row is None:
        raise ControlRefused(f"no TASK {task_id} is known to baton here")
    access = SlotAccess(store, "")  # no slot: the loop itself acts
    if not access.team_loop_alive():
        return None
    return access.post(
        OutboxRecord(
            kind=DROP_TREE,
            role="",
            task_id=task_id,
            attempt_id=None,
            data={"reason": reason, "via": via},
        )
    )
