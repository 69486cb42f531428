"""baton's durable store: one writer thread over SQLite (one machine) or PostgreSQL (a cluster).

See :mod:`baton.store.store` for the face every caller types against (:class:`Store`)
and the design (one writer, effects after commit, named migrations, idempotent close),
:mod:`baton.store.backend` for what the two backends differ by.
"""

from baton.store.migrations import CORE_MIGRATIONS, Migration
from baton.store.records import (
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    RunRecord,
    RunStatus,
    SessionRecord,
)
from baton.store.schema import CLUSTER_MIGRATIONS, STORE_MIGRATIONS
from baton.store.sqlite import SqliteStore, apply_migrations
from baton.store.store import Store
from baton.store.subscription import Subscription

__all__ = [
    "CLUSTER_MIGRATIONS",
    "CORE_MIGRATIONS",
    "RUN_STATUSES",
    "STORE_MIGRATIONS",
    "TERMINAL_RUN_STATUSES",
    "Migration",
    "RunRecord",
    "RunStatus",
    "SessionRecord",
    "SqliteStore",
    "Store",
    "Subscription",
    "apply_migrations",
]
