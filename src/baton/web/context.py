"""What every handler needs, passed explicitly (the app factory builds one; no globals)."""

from __future__ import annotations

from dataclasses import dataclass

from baton.requests.ledger import Ledger
from baton.store.store import Store

__all__ = ["WebContext"]


@dataclass(frozen=True, slots=True)
class WebContext:
    """The store and ledger the app serves, and the stream timings (tests shorten them)."""

    store: Store
    ledger: Ledger
    poll_interval: float = 1.0
    """Seconds an SSE stream waits on its subscription before re-reading the store
    (how soon events written by *another* process, or a run's end, show up)."""
    keepalive: float = 15.0
    """Seconds without events before an SSE keepalive comment."""
