"""Slots in a real store for tests that drive the role MCP tools without a daemon loop.

The test process plays the daemon (its own pid and start time own the project), or a
given process does (to test what the tools do once their daemon is gone).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from baton.lifeline import process_start_ticks
from baton.role_tools.binding import Binding, SlotAccess
from baton.store import team_sql
from baton.store.store import Store
from baton.team.records import OwnerRecord, SlotRecord
from baton.team.states import OwnerState, SlotState
from baton.team_config import ALL_TOOLS, DEFAULT_TOOLS

ROLES = ("PM", "DEV", "QA", "OPS")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def own_project(store: Store, pid: int | None = None) -> None:
    """Record ``pid`` (default: this process) as the ``baton up`` owning the project."""
    pid = pid or os.getpid()
    record = OwnerRecord(
        pid=pid,
        start_ticks=process_start_ticks(pid) or 0,
        host="test",
        boot="test",
        run_id="run-test",
        state=OwnerState.RUNNING,
        started_at=_now(),
        updated_at=_now(),
    )
    store.write_sync(lambda tx: team_sql.OWNER.upsert(tx, record.row()))


def open_slot(store: Store, root: Path, role: str, *, slot: str | None = None) -> SlotAccess:
    """A slot of ``role`` (the leader gets every tool) written to the store, as the daemon does."""
    name = slot or role
    binding = Binding(
        fcop_root=root,
        role=role,
        session_name=name,
        leader="PM",
        human="ADMIN",
        team_roles=ROLES,
        allowed_tools=ALL_TOOLS if role == "PM" else DEFAULT_TOOLS,
        store_path=store.path,
    )
    record = SlotRecord(
        slot=name, role=role, agent="fake", state=SlotState.IDLE, binding=binding, updated_at=_now()
    )
    store.write_sync(lambda tx: team_sql.SLOTS.upsert(tx, record.row()))
    return SlotAccess(store, name)


def point(access: SlotAccess, task_id: str | None, attempt_id: str | None) -> None:
    """Move the slot's pointer (what the daemon does before every prompt)."""
    seq = access.pointer().seq + 1
    store = access.store
    store.write_sync(
        lambda tx: team_sql.SLOTS.update(
            tx, access.slot, {"task_id": task_id, "attempt_id": attempt_id, "pointer_seq": seq}
        )
    )
