"""Live tails of committed events ("effects after commit").

The writer thread hands each committed batch to every subscription with one
short, non-blocking call per batch. A subscription buffers at most
``max_backlog`` events; past that it is marked *lagged*: the writer stops
buffering for it and only remembers, per run, the first seq it missed (memory
bounded by the number of runs, not events). The consumer then re-reads the gap
from the store by seq and rejoins the live stream, dropping any event it has
already delivered, so a slow consumer never blocks the writer and never sees a
gap, a duplicate or a reordering within a run.

Events written by *other* processes sharing the file are not pushed here (each
process only knows its own writer); tail those by seq with ``Store.iter_events``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from baton.errors import StoreError
from baton.events.model import CanonicalEvent

__all__ = ["Subscription"]

ReadPage = Callable[[str, int, int], list[CanonicalEvent]]
"""``(run_id, after_seq, limit) -> events``: a read of committed events."""

_CATCH_UP_PAGE = 1000


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Subscription:
    """An async iterator of committed events, for one run or for all runs.

    Use ``async for event in store.subscribe(run_id): ...``; iteration ends when
    the subscription or the store is closed, and raises :class:`StoreError` if
    the store failed. Within a run events arrive in seq order; across runs, in
    commit order except while catching up after a lag.
    """

    def __init__(
        self,
        *,
        run_id: str | None,
        max_backlog: int,
        after_seq: int | None,
        read_page: ReadPage,
        barrier: Callable[[], Awaitable[None]],
        on_close: Callable[[Subscription], None],
    ) -> None:
        if max_backlog < 1:
            raise ValueError("max_backlog must be at least 1")
        if after_seq is not None and run_id is None:
            raise ValueError("after_seq needs a run_id (seqs are per run)")
        self.run_id = run_id
        self._max_backlog = max_backlog
        self._read_page = read_page
        self._barrier = barrier
        self._on_close = on_close
        # Shared with the writer thread, guarded by _lock.
        self._lock = threading.Lock()
        self._buffer: deque[CanonicalEvent] = deque()
        self._lagged = False
        self._missed: dict[str, int] = {}
        self._lag_count = 0
        self._ended = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        # Consumer-only state.
        self._delivered: dict[str, int] = {}
        self._replay: deque[CanonicalEvent] = deque()
        self._catch_up: dict[str, int] = {}
        self._needs_barrier = False
        if run_id is not None and after_seq is not None:
            self._delivered[run_id] = after_seq
            self._catch_up[run_id] = after_seq
            # Events appended before subscribe() are not pushed to us; wait until
            # they are committed so the store read below includes them.
            self._needs_barrier = True

    # ----------------------------------------------------------- observability

    @property
    def lagged(self) -> bool:
        """True while the live buffer is abandoned and the gap is still to be re-read."""
        return self._lagged

    @property
    def lag_count(self) -> int:
        """How many times this subscription overflowed ``max_backlog``."""
        return self._lag_count

    @property
    def backlog(self) -> int:
        """Events buffered and not yet consumed."""
        return len(self._buffer)

    # ------------------------------------------------------------ writer side

    def _publish(self, events: Sequence[CanonicalEvent]) -> None:
        """Called by the writer after COMMIT; never blocks on the consumer."""
        run_id = self.run_id
        mine = events if run_id is None else [e for e in events if e.run_id == run_id]
        if not mine:
            return
        with self._lock:
            if self._ended:
                return
            if not self._lagged and len(self._buffer) + len(mine) > self._max_backlog:
                self._lagged = True
                self._lag_count += 1
            if self._lagged:
                missed = self._missed
                for event in mine:
                    missed.setdefault(event.run_id, event.seq)
            else:
                self._buffer.extend(mine)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._schedule_wake(waiter)

    def _end(self, error: BaseException | None) -> None:
        """The store closed (``error`` None) or failed; wake the consumer to finish."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._error = error
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._schedule_wake(waiter)

    @staticmethod
    def _schedule_wake(waiter: asyncio.Future[None]) -> None:
        try:
            waiter.get_loop().call_soon_threadsafe(_wake, waiter)
        except RuntimeError:
            # The consumer's event loop is closed: nobody is left to wake.
            return

    # ---------------------------------------------------------- consumer side

    def close(self) -> None:
        """Stop receiving; iteration ends after this. Idempotent."""
        with self._lock:
            already = self._ended
            self._ended = True
            self._buffer.clear()
            self._missed.clear()
            self._lagged = False
            waiter, self._waiter = self._waiter, None
        self._replay.clear()
        self._catch_up.clear()
        if waiter is not None:
            self._schedule_wake(waiter)
        if not already:
            self._on_close(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __aiter__(self) -> Subscription:
        return self

    def _fresh(self, event: CanonicalEvent) -> bool:
        """Deliver each (run, seq) once, in increasing order: drops catch-up overlap."""
        if event.seq <= self._delivered.get(event.run_id, 0):
            return False
        self._delivered[event.run_id] = event.seq
        return True

    async def __anext__(self) -> CanonicalEvent:
        while True:
            if self._replay:
                event = self._replay.popleft()
                if self._fresh(event):
                    return event
                continue
            if self._catch_up:
                await self._catch_up_page()
                continue
            with self._lock:
                if self._buffer:
                    # Take the whole backlog at once: one lock round per batch.
                    self._replay, self._buffer = self._buffer, self._replay
                    continue
                if self._lagged:
                    # Rejoin live first, then re-read: everything committed before
                    # this point is in the store, everything after it is buffered.
                    self._lagged = False
                    for run_id, first_missed in self._missed.items():
                        after = self._delivered.get(run_id, first_missed - 1)
                        self._catch_up.setdefault(run_id, after)
                    self._missed = {}
                    continue
                if self._ended:
                    if self._error is not None:
                        raise StoreError(f"store failed: {self._error}") from self._error
                    raise StopAsyncIteration
                waiter = asyncio.get_running_loop().create_future()
                self._waiter = waiter
            try:
                await waiter
            finally:
                with self._lock:
                    if self._waiter is waiter:
                        self._waiter = None

    async def _catch_up_page(self) -> None:
        if self._needs_barrier:
            await self._barrier()
            self._needs_barrier = False
        run_id, after = next(iter(self._catch_up.items()))
        page = await asyncio.to_thread(self._read_page, run_id, after, _CATCH_UP_PAGE)
        if run_id not in self._catch_up:  # closed while reading
            return
        self._replay.extend(page)
        if len(page) < _CATCH_UP_PAGE:
            del self._catch_up[run_id]
        else:
            self._catch_up[run_id] = page[-1].seq
