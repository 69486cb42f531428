"""A small pool of read-only connections, so reads never touch the writer's.

Connections are opened lazily with ``check_same_thread=False`` (a connection is
used by one thread at a time: whoever checked it out) and all closed by
``close()``; one checked out during ``close()`` is closed when it comes back.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from baton.errors import StoreError

__all__ = ["ReadPool"]


class ReadPool:
    """Hands out read-only connections; keeps at most ``max_idle`` of them open."""

    def __init__(self, path: Path, *, busy_timeout_ms: int, max_idle: int = 4) -> None:
        self._uri = path.as_uri() + "?mode=ro"
        self._busy_timeout_ms = busy_timeout_ms
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._closed = False

    def acquire(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StoreError("store is closed")
            if self._idle:
                return self._idle.pop()
        try:
            conn = sqlite3.connect(
                self._uri,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open a read connection: {exc}") from exc
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return conn

    def release(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                conn.close()  # a broken connection is discarded, not reused
                raise
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
