"""A small pool of read connections, so reads never touch the writer's (either backend).

Connections are opened lazily (a connection is used by one thread at a time: whoever
checked it out) and all closed by ``close()``; one checked out during ``close()`` is
closed when it comes back, and one its backend calls broken is closed, not reused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from baton.errors import StoreError

__all__ = ["ReadPool"]

C = TypeVar("C")


class ReadPool(Generic[C]):
    """Hands out read connections; keeps at most ``max_idle`` of them open."""

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        *,
        max_idle: int = 4,
    ) -> None:
        self._connect = connect
        self._close = close
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[C] = []
        self._closed = False

    def acquire(self) -> C:
        with self._lock:
            if self._closed:
                raise StoreError("store is closed")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def release(self, conn: C, *, reusable: bool = True) -> None:
        """Take ``conn`` back (``reusable=False``: it is broken, close it)."""
        if reusable:
            with self._lock:
                if not self._closed and len(self._idle) < self._max_idle:
                    self._idle.append(conn)
                    return
        self._close(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._close(conn)
