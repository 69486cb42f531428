"""Opening the project's store, and recovering after a crash.

The store owns every table (runs, sessions, events, the human-request ledger, the
team loop, services, the web's sessions: :data:`baton.store.schema.STORE_MIGRATIONS`,
applied when it opens); a cluster project's store is PostgreSQL and has the cluster's
tables too (:class:`~baton.store.pg.PgStore`). Recovery runs when a
:class:`~baton.app.Baton` opens: runs whose owning process died are marked
``interrupted`` and their open requests expire with a visible reason.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from baton.config import BatonConfig
from baton.events.sequencer import Sequencer, format_ts
from baton.lifeline import boot_id
from baton.procgroup import process_alive
from baton.requests import payloads
from baton.requests.ledger import Ledger, RequestRecord
from baton.store.sqlite import SqliteStore
from baton.store.store import Store

if TYPE_CHECKING:
    from baton.cluster.config import ClusterConfig

__all__ = [
    "open_cluster_store",
    "open_project_store",
    "open_store",
    "owner_meta",
    "recover_interrupted",
]


def open_store(path: Path) -> SqliteStore:
    """The SQLite store at ``path`` (created 0700/0600), with every store's tables."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return SqliteStore.open(path)


def open_cluster_store(dsn: str) -> Store:
    """A cluster's PostgreSQL store at ``dsn``, with the cluster's tables (imports psycopg)."""
    from baton.store.pg import PgStore

    return PgStore.open(dsn)


def open_project_store(
    config: BatonConfig, cluster: ClusterConfig | None, db_path: Path | None
) -> Store:
    """The project's store: PostgreSQL in cluster mode, else the SQLite file (``db_path``,
    or the project's own)."""
    if cluster is None:
        return open_store(db_path if db_path is not None else config.db_path)
    return open_cluster_store(cluster.store)


def owner_meta() -> dict[str, object]:
    """Recorded on each run so a later baton can tell whether its owner still lives."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "boot": boot_id()}


def _owner_dead(meta: dict[str, object]) -> bool:
    if meta.get("host") != socket.gethostname():
        return False  # another machine's run: not ours to judge
    if meta.get("boot") and meta.get("boot") != boot_id():
        return True
    pid = meta.get("pid")
    return isinstance(pid, int) and pid != os.getpid() and not process_alive(pid)


async def recover_interrupted(store: Store, ledger: Ledger) -> list[RequestRecord]:
    """Runs whose owning process died become ``interrupted``; their open requests
    become ``expired`` with a visible reason (never left pending, never approved)."""
    dead = [
        run.run_id
        for run in store.list_runs(limit=10_000)
        if run.status == "running" and _owner_dead(run.meta)
    ]
    if not dead:
        return []
    expired = await ledger.expire_orphans(
        set(), "baton restarted: the agent connection that asked is gone", run_ids=set(dead)
    )
    sequencers = {run_id: Sequencer(run_id, start_seq=store.last_seq(run_id)) for run_id in dead}
    for record in expired:
        sequencer = sequencers[record.run_id]
        store.append(
            sequencer.stamp(
                payloads.for_state(record), session_id=record.session_id, turn_id=record.turn_id
            )
        )
    await store.flush()
    now = format_ts(time.time())
    for run_id in dead:  # unless its owner finished it since we looked (and then exited)
        store.finish_run(run_id, "interrupted", now, if_running=True)
    return expired
