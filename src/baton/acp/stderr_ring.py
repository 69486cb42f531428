"""A bounded ring for an agent's stderr: keeps the tail, counts everything."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = [
    "DEFAULT_RING_BYTES",
    "PREVIEW_BYTES",
    "StderrRing",
]

DEFAULT_RING_BYTES = 64 * 1024
PREVIEW_BYTES = 4 * 1024


class StderrRing:
    """Holds the last ``capacity`` bytes written; cheap to append, never grows past it."""

    __slots__ = ("_chunks", "_size", "capacity", "on_data", "total_bytes")

    def __init__(
        self,
        capacity: int = DEFAULT_RING_BYTES,
        on_data: Callable[[bytes], None] | None = None,
    ) -> None:
        self.capacity = capacity
        self.on_data = on_data
        """Also called with every chunk (a transport that reads a line from stderr, such
        as the Cursor SDK bridge's ready line, without a second reader)."""
        self.total_bytes = 0
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def append(self, data: bytes) -> None:
        if not data:
            return
        if self.on_data is not None:
            self.on_data(data)
        self.total_bytes += len(data)
        if len(data) >= self.capacity:
            self._chunks.clear()
            self._chunks.append(data[-self.capacity :])
            self._size = self.capacity
            return
        self._chunks.append(data)
        self._size += len(data)
        while self._size > self.capacity:
            head = self._chunks[0]
            excess = self._size - self.capacity
            if len(head) <= excess:
                self._chunks.popleft()
                self._size -= len(head)
            else:
                self._chunks[0] = head[excess:]
                self._size -= excess

    def tail(self, limit: int = PREVIEW_BYTES) -> str:
        """The last ``limit`` bytes as text (invalid UTF-8 escaped, not dropped)."""
        data = b"".join(self._chunks)[-limit:]
        return data.decode("utf-8", errors="backslashreplace")
