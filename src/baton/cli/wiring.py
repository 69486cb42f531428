"""How commands build a run: its id, its record and emitter, the store, ``[notify]``.

Owned by the composition root's wiring (issue 10); commands call these and nothing else.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from baton.config import BatonConfig
from baton.errors import ConfigError
from baton.events.sequencer import Sequencer, format_ts
from baton.requests.notify import NotifyConfig
from baton.runner.context import open_store as _open_store
from baton.runner.context import owner_meta
from baton.runner.emitter import EventEmitter
from baton.store.records import RunRecord
from baton.store.store import Store

__all__ = ["new_run_id", "notify_config", "open_store", "start_run"]


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def start_run(store: Store, run_id: str, *, kind: str, agent: str, cwd: Path) -> EventEmitter:
    """Record a new run (with its owner, for crash recovery) and its event emitter."""
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind=kind,
            agent=agent,
            cwd=str(cwd),
            status="running",
            created_at=format_ts(time.time()),
            meta=owner_meta(),
        )
    )
    return EventEmitter(Sequencer(run_id), store)


def notify_config(config: BatonConfig) -> NotifyConfig:
    """``[notify]`` from baton.toml: who to tell when a human is needed."""
    table = config.raw.get("notify", {})
    if not isinstance(table, dict):
        raise ConfigError("[notify] must be a table")
    return NotifyConfig.from_table(table)


def open_store(config: BatonConfig) -> Store:
    return _open_store(config.db_path)
