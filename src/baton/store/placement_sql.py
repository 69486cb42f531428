"""The cluster's placement table: one row per (project, role slot): host, epoch, lease; its SQL.

``project`` is the FCoP workspace id of the team (``fcop/fcop.json``): two ``baton up``
projects on one cluster store have their own rows, whatever their slots are called.

The rules (which host, when a lease is lost, what a stale epoch may do) live in
:mod:`baton.cluster.placement`; this module only reads and writes rows. Every
write is a compare-and-set on the epoch the caller read (:func:`swap_placement`),
so a placement decided from a stale read changes nothing, on either backend and
whatever the isolation level.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from baton.store.migrations import TURN_MARKS_SQL, Migration
from baton.store.tx import Row, Tx

__all__ = [
    "PLACEMENT_COLUMNS",
    "PLACEMENT_MIGRATIONS",
    "PLACEMENT_TOPIC",
    "HolderMarks",
    "all_placements",
    "get_placement",
    "hold_placement",
    "placed_holder",
    "swap_placement",
]

PLACEMENT_TOPIC: Final = "cluster.placement"
"""The wake-up topic of every placement change (holders re-check their epoch on it)."""

PLACEMENT_COLUMNS: Final = ("slot", "host", "epoch", "state", "lease_expires_at", "updated_at")

PLACEMENT_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "cluster.0001_placements",
        # lease_expires_at: wall-clock seconds of the writer that granted or renewed it.
        """
        CREATE TABLE cluster_placements (
            slot             TEXT PRIMARY KEY,
            host             TEXT NOT NULL,
            epoch            INTEGER NOT NULL CHECK (epoch >= 1),
            state            TEXT NOT NULL CHECK (state IN ('placed', 'expired', 'released')),
            lease_expires_at REAL NOT NULL,
            updated_at       TEXT NOT NULL
        );
        """,
    ),
    Migration(
        "cluster.0002_placements_by_project",
        # Rows keyed by (project, slot): the FCoP workspace id of the team that placed the
        # slot. Rows from before carry project '' (the driver's default when none is given).
        # Copied, dropped, renamed: PostgreSQL keeps a renamed table's constraint names.
        """
        CREATE TABLE cluster_placements_new (
            project          TEXT NOT NULL,
            slot             TEXT NOT NULL,
            host             TEXT NOT NULL,
            epoch            INTEGER NOT NULL CHECK (epoch >= 1),
            state            TEXT NOT NULL CHECK (state IN ('placed', 'expired', 'released')),
            lease_expires_at REAL NOT NULL,
            updated_at       TEXT NOT NULL,
            PRIMARY KEY (project, slot)
        );
        INSERT INTO cluster_placements_new
            (project, slot, host, epoch, state, lease_expires_at, updated_at)
            SELECT '', slot, host, epoch, state, lease_expires_at, updated_at
            FROM cluster_placements;
        DROP TABLE cluster_placements;
        ALTER TABLE cluster_placements_new RENAME TO cluster_placements;
        """,
    ),
)
"""Part of the cluster store only (:data:`baton.store.schema.CLUSTER_MIGRATIONS`)."""

_SELECT: Final = f"SELECT {', '.join(PLACEMENT_COLUMNS)} FROM cluster_placements"  # noqa: S608


def get_placement(tx: Tx, project: str, slot: str) -> Row | None:
    """The slot's row in :data:`PLACEMENT_COLUMNS` order, or ``None`` (never placed)."""
    return tx.one(f"{_SELECT} WHERE project = ? AND slot = ?", (project, slot))


def hold_placement(tx: Tx, project: str, slot: str) -> None:
    """Lock the slot's row until this transaction ends (a no-op update).

    A fenced write takes it before reading the epoch, so a concurrent placement
    change either committed first (and is read) or waits for this one: on
    PostgreSQL whatever the isolation level, on SQLite trivially (one writer).
    """
    tx.execute(
        "UPDATE cluster_placements SET epoch = epoch WHERE project = ? AND slot = ?",
        (project, slot),
    )


def all_placements(tx: Tx, project: str) -> list[Row]:
    return tx.all(f"{_SELECT} WHERE project = ? ORDER BY slot", (project,))


def swap_placement(
    tx: Tx,
    *,
    project: str,
    slot: str,
    expect: tuple[int, str] | None,
    host: str,
    epoch: int,
    state: str,
    lease_expires_at: float,
    updated_at: str,
) -> bool:
    """Write the slot's row if it is still ``expect`` (``(epoch, state)``; ``None``: no row).

    Returns False, changing nothing, when another writer moved the row first.
    """
    values = (host, epoch, state, lease_expires_at, updated_at)
    if expect is None:
        return (
            tx.execute(
                "INSERT INTO cluster_placements"
                " (project, slot, host, epoch, state, lease_expires_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, slot) DO NOTHING",
                (project, slot, *values),
            )
            == 1
        )
    return (
        tx.execute(
            "UPDATE cluster_placements SET host = ?, epoch = ?, state = ?,"
            " lease_expires_at = ?, updated_at = ?"
            " WHERE project = ? AND slot = ? AND epoch = ? AND state = ?",
            (*values, project, slot, *expect),
        )
        == 1
    )


@dataclass(frozen=True, slots=True)
class HolderMarks:
    """A placed slot's holder as the store knows it: its run and its last turn's marks."""

    run_id: str
    epoch: int
    lease_expires_at: float
    prompt_sha256: str | None
    """The ``prompt_sha256`` of its run's last ``turn.submitted`` (``None``: no turn yet)."""
    ended: bool
    """A terminal turn mark follows that ``turn.submitted``."""


def placed_holder(tx: Tx, project: str, slot: str) -> HolderMarks | None:
    """The running holder run of the slot's current ``placed`` epoch, or ``None``.

    The holder's run is found by its meta (``slot``, ``epoch``, ``project``: written by
    the holder at start), among running ``role-holder`` runs whose id ends in the epoch;
    its turn marks come through the ``events_turn_marks`` index."""
    row = get_placement(tx, project, slot)
    if row is None or row[3] != "placed":
        return None
    epoch, lease = int(row[2]), float(row[4])
    run_id = None
    for rid, meta in tx.all(
        "SELECT run_id, meta FROM runs"
        " WHERE kind = 'role-holder' AND status = 'running' AND run_id LIKE ?",
        (f"%.e{epoch}",),
    ):
        facts = json.loads(meta or "{}")
        if (facts.get("slot"), facts.get("epoch"), facts.get("project", "")) == (
            slot,
            epoch,
            project,
        ):
            run_id = str(rid)
    if run_id is None:
        return None
    digest, ended = None, False
    for kind, raw in tx.all(
        f"SELECT type, json FROM events WHERE run_id = ? AND type IN ({TURN_MARKS_SQL})"  # noqa: S608
        " ORDER BY seq",
        (run_id,),
    ):
        if kind == "turn.submitted":
            payload = json.loads(raw).get("payload") or {}
            sha = payload.get("prompt_sha256")
            digest, ended = (sha if isinstance(sha, str) else None), False
        elif kind in ("turn.completed", "turn.failed", "turn.cancelled"):
            ended = True
    return HolderMarks(run_id, epoch, lease, digest, ended)
