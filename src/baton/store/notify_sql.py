"""The ``notifications`` table: which human requests were announced, so each is at most once.

One row per notice id (a request id, or another part's notice id), claimed by whichever
process sends it first; a second claim changes nothing. What is sent, and how, is
:mod:`baton.requests.notify`.
"""

from __future__ import annotations

from typing import Final

from baton.store.migrations import Migration
from baton.store.tx import Tx

__all__ = ["NOTIFY_MIGRATIONS", "claim"]

NOTIFY_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        "notify.0001_notifications",
        """
        CREATE TABLE notifications (
            notice_id  TEXT PRIMARY KEY,
            kind       TEXT NOT NULL,
            claimed_at TEXT NOT NULL
        ) STRICT;
        """,
    ),
)
"""Part of every store (:data:`baton.store.schema.STORE_MIGRATIONS`)."""


def claim(tx: Tx, notice_id: str, kind: str, now: str) -> bool:
    """Claim ``notice_id`` for sending; False when some process already did."""
    changed = tx.execute(
        "INSERT INTO notifications (notice_id, kind, claimed_at) VALUES (?, ?, ?) "
        "ON CONFLICT (notice_id) DO NOTHING",
        (notice_id, kind, now),
    )
    return changed == 1
