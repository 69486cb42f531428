"""The role hub's slot credentials, kept in the store so a restarted coordinator knows them.

One row per (project, slot, generation): the SHA-256 digest of the token (never the
token), and whether it is the slot's live credential or a retired one. The rules (who is
accepted, what retires a credential) live in :mod:`baton.role_tools.credentials`; this
module only stores what that table holds, one slot at a time (:func:`put_slot_credentials`
replaces the slot's rows), and reads a project's rows back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from baton.store.migrations import Migration
from baton.store.tx import Row, Tx

__all__ = [
    "CREDENTIAL_COLUMNS",
    "CREDENTIAL_MIGRATIONS",
    "credential_rows",
    "put_slot_credentials",
]

CREDENTIAL_COLUMNS: Final = ("slot", "generation", "digest", "live")

CREDENTIAL_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "cluster.0003_credentials",
        # digest: hex SHA-256 of the bearer token; live: 1 for the slot's current one.
        """
        CREATE TABLE cluster_credentials (
            project    TEXT NOT NULL,
            slot       TEXT NOT NULL,
            generation INTEGER NOT NULL CHECK (generation >= 1),
            digest     TEXT NOT NULL,
            live       INTEGER NOT NULL CHECK (live IN (0, 1)),
            updated_at TEXT NOT NULL,
            PRIMARY KEY (project, slot, generation)
        );
        """,
    ),
)


def credential_rows(tx: Tx, project: str) -> list[Row]:
    """The project's rows in :data:`CREDENTIAL_COLUMNS` order, oldest generation first."""
    return tx.all(
        "SELECT slot, generation, digest, live FROM cluster_credentials"
        " WHERE project = ? ORDER BY generation",
        (project,),
    )


def put_slot_credentials(
    tx: Tx,
    project: str,
    slot: str,
    rows: Sequence[tuple[int, str, bool]],
    *,
    updated_at: str,
) -> None:
    """Make ``(generation, digest, live)`` rows the slot's only ones."""
    tx.execute("DELETE FROM cluster_credentials WHERE project = ? AND slot = ?", (project, slot))
    for generation, digest, live in rows:
        tx.execute(
            "INSERT INTO cluster_credentials"
            " (project, slot, generation, digest, live, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (project, slot, generation, digest, int(live), updated_at),
        )
