"""In-process byte pipes that behave like OS pipes, for transports without a process.

baton's in-memory test transport (:mod:`baton.testing.memory`) and the ``cursor-sdk``
transport (:mod:`baton.cursor_sdk`, whose ACP agent side runs in baton's own event loop)
carry the runner's JSON-RPC bytes through these: writes wait for room, ``drain()``
returns once the other end has the bytes, closing one end is EOF for the other, and
writing to a closed end fails with ``BrokenPipeError``.
"""

from __future__ import annotations

import asyncio

__all__ = ["PIPE_CAPACITY", "MemoryPipe"]

PIPE_CAPACITY = 64 * 1024
"""Like a Linux pipe: a writer waits once this much is unread."""


class MemoryPipe:
    """One direction of a byte stream, bounded; both a ``ByteReader`` and a ``ByteWriter``."""

    def __init__(self, capacity: int = PIPE_CAPACITY) -> None:
        self.capacity = capacity
        self._buffer = bytearray()
        self._eof = False
        self._broken = False
        self._changed = asyncio.Event()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # writer side
    def write(self, data: bytes | memoryview) -> None:
        if self._broken:
            raise BrokenPipeError("the reading end is closed")
        if self._eof:
            raise RuntimeError("write after close")
        if data:
            self._buffer += data
            self._wake()

    async def drain(self) -> None:
        while len(self._buffer) > self.capacity and not self._broken:
            await self._changed.wait()
        if self._broken:
            raise BrokenPipeError("the reading end is closed")

    def is_closing(self) -> bool:
        return self._eof or self._broken

    def close(self) -> None:
        """The writer is done: EOF once the reader has the rest."""
        self._eof = True
        self._wake()

    # reader side
    async def read(self, n: int = -1) -> bytes:
        while not self._buffer and not self._eof and not self._broken:
            await self._changed.wait()
        size = len(self._buffer) if n < 0 else min(n, len(self._buffer))
        with memoryview(self._buffer) as view, view[:size] as head:
            data = head.tobytes()  # one copy (a bytearray slice and bytes() are two)
        del self._buffer[:size]
        self._wake()
        return data

    def break_(self) -> None:
        """The reader is gone: pending and later writes fail, reads see EOF."""
        self._broken = True
        self._buffer.clear()
        self._wake()
