"""What every handler needs, passed explicitly (the app factory builds one; no globals)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from baton.app.facade.requests import Ledger
from baton.app.facade.store import Store
from baton.web.auth import AuthConfig

if TYPE_CHECKING:
    from baton.web.actions import RunLauncher
    from baton.web.board import BoardSource
    from baton.web.live import LiveHub

__all__ = ["WebContext"]


@dataclass(frozen=True, slots=True)
class WebContext:
    """The store and ledger the app serves, its auth, the project, and the stream timings."""

    store: Store
    ledger: Ledger
    auth: AuthConfig
    hub: LiveHub
    project_dir: Path | None = None
    """The project (``baton.toml``) whose team the board shows; None: no board."""
    board: BoardSource | None = None
    launcher: RunLauncher | None = None
    poll_interval: float = 1.0
    """Seconds an SSE stream waits on its subscription before re-reading the store
    (how soon events written by *another* process, or a run's end, show up)."""
    keepalive: float = 15.0
    """Seconds without events before an SSE keepalive comment."""
