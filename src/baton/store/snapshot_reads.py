"""Reads on pooled read-only connections: each one WAL snapshot, never blocking the writer.

WAL readers see the last committed snapshot, from any thread or process; a
read checks a connection out of :class:`~baton.store._readers.ReadPool` only
for as long as it runs.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from baton.errors import StoreError
from baton.store._readers import ReadPool
from baton.store.batch_writer import BatchWriter
from baton.store.tx import Tx

__all__ = ["SnapshotReads"]

T = TypeVar("T")


class SnapshotReads(BatchWriter):
    """``read``/``read_tx``/``aread`` over the store's read pool (set by the Store)."""

    _pool: ReadPool

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    def read_tx(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn(tx)`` on a read-only snapshot (blocking; call from a worker thread)."""
        return self.read(lambda conn: fn(Tx(conn, readonly=True)))

    async def aread(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`read_tx` without blocking the event loop."""
        return await asyncio.to_thread(self.read_tx, fn)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a read-only connection, in one consistent snapshot."""
        self._check_open()
        conn = self._pool.acquire()
        try:
            conn.execute("BEGIN")
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        finally:
            self._pool.release(conn)

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        self._check_open()
        conn = self._pool.acquire()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"store read failed: {exc}") from exc
        finally:
            self._pool.release(conn)
