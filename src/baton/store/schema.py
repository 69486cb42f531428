"""Which tables a store has: every store's, and the cluster store's on top.

A single-machine project's store (SQLite) gets :data:`STORE_MIGRATIONS`; a cluster
project's store (PostgreSQL, :mod:`baton.store.pg`) gets :data:`CLUSTER_MIGRATIONS`
too: where role slots are placed and under which epoch (``cluster_placements``),
the role hub's kept credentials (``cluster_credentials``), and the role tool calls of
agents on workers kept until delivered with where the hub listens (``cluster_tool_calls``,
``cluster_hubs``): tables nothing reads on one machine.

Why splitting the list is sound for stores made before it, when every store got the
cluster steps: steps are recorded by name and names a caller does not pass are
ignored (:func:`~baton.store.migrations.migrate`), so such a store opens unchanged,
its cluster steps recorded, their tables empty and never read; no step of
:data:`STORE_MIGRATIONS` refers to a cluster table (each list is applied alone in
the tests), and a cluster step recorded there is skipped, not re-applied, should
the store ever be opened with the cluster list. Dropping those tables would be a
step of its own, with nothing to gain but a few empty pages.
"""

from __future__ import annotations

from typing import Final

from baton.store.budget_sql import BUDGET_MIGRATIONS
from baton.store.credential_sql import CREDENTIAL_MIGRATIONS
from baton.store.grants_sql import GRANTS_MIGRATIONS
from baton.store.migrations import CORE_MIGRATIONS, Migration
from baton.store.notify_sql import NOTIFY_MIGRATIONS
from baton.store.placement_sql import PLACEMENT_MIGRATIONS
from baton.store.requests_sql import REQUESTS_MIGRATIONS
from baton.store.services_sql import SERVICES_MIGRATIONS
from baton.store.team_schema import TEAM_MIGRATIONS
from baton.store.tool_call_sql import TOOL_CALL_MIGRATIONS
from baton.store.web_sessions import WEB_MIGRATIONS

__all__ = ["CLUSTER_MIGRATIONS", "STORE_MIGRATIONS"]

STORE_MIGRATIONS: Final[tuple[Migration, ...]] = (
    *CORE_MIGRATIONS,
    *REQUESTS_MIGRATIONS,
    *TEAM_MIGRATIONS,
    *SERVICES_MIGRATIONS,
    *WEB_MIGRATIONS,
    *GRANTS_MIGRATIONS,
    *NOTIFY_MIGRATIONS,
    *BUDGET_MIGRATIONS,
)
"""Every store's tables, in order; opening a store applies what is missing."""

CLUSTER_MIGRATIONS: Final[tuple[Migration, ...]] = (
    *PLACEMENT_MIGRATIONS,
    *CREDENTIAL_MIGRATIONS,
    *TOOL_CALL_MIGRATIONS,
)
"""The cluster store's own tables, applied after :data:`STORE_MIGRATIONS`."""
