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

from typing import Final

from baton.store.migrations import Migration
from baton.store.tx import Row, Tx

__all__ = [
    "CLUSTER_MIGRATIONS",
    "PLACEMENT_COLUMNS",
    "PLACEMENT_TOPIC",
    "all_placements",
    "get_placement",
    "hold_placement",
    "swap_placement",
]

PLACEMENT_TOPIC: Final = "cluster.placement"
"""The wake-up topic of every placement change (holders re-check their epoch on it)."""

PLACEMENT_COLUMNS: Final = ("slot", "host", "epoch", "state", "lease_expires_at", "updated_at")

CLUSTER_MIGRATIONS: tuple[Migration, ...] = (
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
