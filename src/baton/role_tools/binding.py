"""Session bindings: who a role-scoped MCP server speaks for, decided by baton, not the agent.

A binding pins one agent session to one role: the FCoP root, the role, the
team roster, the allowed tools. It lives in the store, in the slot's row
(``team_slots``), written by the team loop; the role MCP server is started with
``--store PATH --slot NAME`` and reads it from there, so nothing the agent can
reach (its cwd, its arguments) decides who it is. The same row holds the
*pointer*: which TASK and attempt the session is on right now. The team loop moves
it (with a sequence number) each time the session moves to its next task, so
one long-lived MCP server follows its session without a restart. What the tools
must hand the team loop (``ask_human`` questions, leader review decisions) goes
into the store's outbox (``team_outbox``) in one transaction that rings the
team loop awake.

Identity (role, task, attempt) always comes from here, never from tool
arguments. The pointer is also re-checked against FCoP on every call (the
TASK must be active and addressed to the binding's role), so even a forged
pointer could at most point a role at its own work. The team loop that owns the
slot is recorded too (pid and kernel start time): once it is gone, the tools
refuse to write (:meth:`SlotAccess.team_loop_alive`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.events.sequencer import utc_now
from baton.fcop_errors import CoordinationError
from baton.lifeline import process_start_ticks
from baton.store import team_sql
from baton.store.store import Store
from baton.store.tx import Tx

__all__ = [
    "BINDING_VERSION",
    "Binding",
    "CurrentTask",
    "OutboxRecord",
    "SlotAccess",
]

BINDING_VERSION = 2
"""2: the binding moved from a side file into the store (``team_slots.binding``)."""
MAX_OUTBOX_DATA = 64 * 1024


@dataclass(frozen=True, slots=True)
class Binding:
    """One slot's identity and capabilities (``team_slots.binding``)."""

    fcop_root: Path
    role: str
    session_name: str
    """The slot: ``ROLE``, or ``ROLE-n`` when a role has more than one concurrent session."""
    leader: str
    human: str
    team_roles: tuple[str, ...]
    allowed_tools: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    """Other recipient names routed to this role (``[team.roles.X] aliases``)."""
    store_path: Path | None = field(default=None, compare=False)
    """The store this binding was read from (its MCP server's ``--store``)."""

    @property
    def is_leader(self) -> bool:
        return self.role == self.leader

    def to_json(self) -> dict[str, Any]:  # JSON out: stored in the slot's row
        return {
            "version": BINDING_VERSION,
            "fcop_root": str(self.fcop_root),
            "role": self.role,
            "session_name": self.session_name,
            "leader": self.leader,
            "human": self.human,
            "team_roles": list(self.team_roles),
            "allowed_tools": list(self.allowed_tools),
            "aliases": list(self.aliases),
        }

    @classmethod
    def from_json(cls, raw: object, *, store_path: Path | None = None) -> Binding:
        """Validate a stored binding; refuse anything malformed (it decides identity)."""
        if not isinstance(raw, dict) or raw.get("version") != BINDING_VERSION:
            raise CoordinationError(f"not a version {BINDING_VERSION} binding")
        strings = {}
        for key in ("fcop_root", "role", "session_name", "leader", "human"):
            value = raw.get(key)
            if not isinstance(value, str) or not value:
                raise CoordinationError(f"binding {key} must be a non-empty string")
            strings[key] = value
        root = Path(strings["fcop_root"])
        if not root.is_absolute():
            raise CoordinationError("binding fcop_root must be absolute (never the cwd)")
        return cls(
            fcop_root=root,
            role=strings["role"],
            session_name=strings["session_name"],
            leader=strings["leader"],
            human=strings["human"],
            team_roles=_str_tuple(raw.get("team_roles"), "team_roles"),
            allowed_tools=_str_tuple(raw.get("allowed_tools"), "allowed_tools"),
            aliases=_str_tuple(raw.get("aliases", []), "aliases"),
            store_path=store_path,
        )


def _str_tuple(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CoordinationError(f"binding {key}: must be a list of strings")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class CurrentTask:
    """The pointer: the TASK and attempt the session works on now."""

    task_id: str | None
    attempt_id: str | None
    seq: int = 0
    """Increments on every move, so a reader can tell two pointers apart."""


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    """Something a role tool hands the team loop to act on (``ask_human`` or ``review``)."""

    kind: str
    role: str
    task_id: str | None
    attempt_id: str | None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SlotAccess:
    """A role MCP server's (or a test's) view of its slot in the store."""

    store: Store
    slot: str

    # Any: a row's values by column (SQLite's types).
    def _slot_values(self) -> dict[str, Any]:
        def read(tx: Tx) -> tuple[Any, ...]:
            row = team_sql.SLOTS.get(tx, self.slot)
            if row is None:
                raise CoordinationError(f"no slot {self.slot!r} in {self.store.path}")
            return row

        return dict(zip(team_sql.SLOT_COLUMNS, self.store.read_tx(read), strict=True))

    # Any: a row's values by column (SQLite's types).
    def _owner_values(self) -> dict[str, Any] | None:
        """The owning ``baton up``'s row, or None when no ``baton up`` ever owned the project."""
        row = self.store.read_tx(lambda tx: team_sql.OWNER.get(tx, 1))
        return None if row is None else dict(zip(team_sql.OWNER_COLUMNS, row, strict=True))

    def binding(self) -> Binding:
        values = self._slot_values()
        try:
            raw = json.loads(values["binding"])
        except ValueError as exc:
            raise CoordinationError(f"slot {self.slot}: unreadable binding: {exc}") from exc
        return Binding.from_json(raw, store_path=self.store.path)

    def pointer(self) -> CurrentTask:
        values = self._slot_values()
        return CurrentTask(values["task_id"], values["attempt_id"], int(values["pointer_seq"]))

    def team_loop_alive(self) -> bool:
        """Whether the ``baton up`` that owns this project still runs (same pid, same start)."""
        values = self._owner_values()
        if values is None or values["state"] != "running":
            return False
        return process_start_ticks(int(values["pid"])) == int(values["start_ticks"])

    def team_loop_pid(self) -> int | None:
        values = self._owner_values()
        return None if values is None else int(values["pid"])

    def post(self, record: OutboxRecord) -> int:
        """Hand ``record`` to the team loop: one committed outbox row, then a ring."""
        data = json.dumps(dict(record.data), sort_keys=True, ensure_ascii=False)
        if len(data.encode()) > MAX_OUTBOX_DATA:
            raise CoordinationError(f"outbox record too large ({len(data)} bytes)")

        def insert(tx: Tx) -> int:
            outbox_id = team_sql.insert_outbox(
                tx,
                {
                    "kind": record.kind,
                    "slot": self.slot,
                    "role": record.role,
                    "task_id": record.task_id,
                    "attempt_id": record.attempt_id,
                    "data": data,
                    "created_at": utc_now(),
                },
            )
            tx.wake(team_sql.TEAM_TOPIC)
            return outbox_id

        return self.store.write_sync(insert)
