"""One ``baton up`` per project: the owner row, taken at start and released at the end.

The row names the owning process (pid, its start time, host, boot), so a later
``baton up`` can tell a live owner (refused: :class:`TeamLoopBusy`) from a dead one
(taken over, its work recovered). Moves go through :data:`~baton.team.states.OWNER`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket

from baton.errors import BatonError
from baton.events.sequencer import utc_now
from baton.lifeline import boot_id, process_start_ticks
from baton.store import team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.records import OwnerRecord
from baton.team.states import OWNER, OwnerEvent, OwnerState

__all__ = ["Ownership", "TeamLoopBusy"]


class TeamLoopBusy(BatonError):
    """Another ``baton up`` already runs this project."""


def _alive(owner: OwnerRecord, me: OwnerRecord) -> bool:
    """``owner`` is another process, on this boot of this host, still running."""
    return (
        owner.host == me.host
        and owner.boot == me.boot
        and owner.pid != me.pid
        and process_start_ticks(owner.pid) == owner.start_ticks
    )


@dataclasses.dataclass(kw_only=True, eq=False)
class Ownership:
    """Takes and releases the project for one team loop run."""

    store: Store
    run_id: str

    async def take(self) -> None:
        """Become the one ``baton up`` of this project (refused while another lives)."""
        pid = os.getpid()
        now = utc_now()
        mine = OwnerRecord(
            pid=pid,
            start_ticks=process_start_ticks(pid) or 0,
            host=socket.gethostname(),
            boot=boot_id(),
            run_id=self.run_id,
            state=OwnerState.RUNNING,
            started_at=now,
            updated_at=now,
        )

        def take(tx: Tx) -> None:
            row = team_sql.OWNER.get(tx, 1)
            other = OwnerRecord.from_row(row) if row is not None else None
            if other is None or other.state is not OwnerState.RUNNING:
                OWNER.next(other.state if other else None, OwnerEvent.TAKE)
            elif _alive(other, mine):
                raise TeamLoopBusy(
                    f"another `baton up` (pid {other.pid}, run {other.run_id}) runs this "
                    "project; stop it first"
                )
            else:
                OWNER.next(other.state, OwnerEvent.TAKE_OVER)
            team_sql.OWNER.upsert(tx, mine.row())

        await self.store.write(take)

    async def release(self) -> None:
        """Let go of the project, if this process still owns it (best effort: at exit)."""
        pid = os.getpid()

        def release(tx: Tx) -> None:
            row = team_sql.OWNER.get(tx, 1)
            if row is None:
                return
            owner = OwnerRecord.from_row(row)
            if owner.pid != pid or owner.state is not OwnerState.RUNNING:
                return
            after = dataclasses.replace(
                owner, state=OWNER.next(owner.state, OwnerEvent.RELEASE), updated_at=utc_now()
            )
            team_sql.OWNER.update(
                tx, 1, {"state": after.state.value, "updated_at": after.updated_at}
            )

        with contextlib.suppress(Exception):  # the store may be gone at exit; the next
            await self.store.write(release)  # ``baton up`` then takes over the dead owner
