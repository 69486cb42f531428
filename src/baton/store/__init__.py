"""baton's embedded durable store: SQLite in WAL mode, one batching writer thread.

See :mod:`baton.store.store` for the design (one writer, effects after commit,
named migrations, idempotent close).
"""

from baton.store.migrations import CORE_MIGRATIONS, Migration, apply_migrations
from baton.store.records import (
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    RunRecord,
    RunStatus,
    SessionRecord,
)
from baton.store.store import Store
from baton.store.subscription import Subscription

__all__ = [
    "CORE_MIGRATIONS",
    "RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "Migration",
    "RunRecord",
    "RunStatus",
    "SessionRecord",
    "Store",
    "Subscription",
    "apply_migrations",
]
