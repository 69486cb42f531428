"""The queue every write goes through: producers fill it, the store's writer thread drains it.

Producers (any thread, any event loop) queue events (as rows, made on the producer so
one that cannot be stored is refused to it), write functions and flush markers, in
order and without blocking; the per-run seq check runs under the same lock as the
enqueue, so a run's seqs are queued strictly increasing. The queue also holds what
both sides must agree on: whether writes are accepted, the failure that stopped the
writer (refused to everyone after it, raised once by ``close`` if nobody was told), the
subscribers the writer hands committed events to, and the producers waiting for room
(``queue_max``: backpressure, never a drop). :mod:`baton.store.batch_writer` is the
other side.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.event_rows import EventRow, event_row, stage_seqs
from baton.store.subscription import Subscription
from baton.store.tx import Tx

__all__ = ["Flush", "QueueItem", "Shutdown", "Write", "WriteQueue"]

T = TypeVar("T")

_log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True, eq=False)
class Write:
    """A function to run on the writer thread, inside the batch's transaction, and the
    rows of the events that describe it (inserted in the same savepoint after it)."""

    # Any: each write returns its own result, handed back through ``future`` untouched.
    fn: Callable[[Tx], Any]
    future: concurrent.futures.Future[Any]
    rows: Sequence[EventRow]
    events: Sequence[CanonicalEvent]


@dataclass(slots=True, kw_only=True, eq=False)
class Flush:
    """Resolved once everything queued before it is committed."""

    future: concurrent.futures.Future[None]


class Shutdown:
    """Queued last by ``close()``: the writer drains up to it, then stops."""


_SHUTDOWN: Final = Shutdown()

QueueItem = tuple[EventRow, CanonicalEvent | None] | Write | Flush | Shutdown
"""An event is queued as its row, plus the model only while someone subscribes."""


def _wake_future(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class WriteQueue:
    """The queue and the state both sides share (see the module docstring).

    ``load_last_seq(run_id)`` seeds the per-run seq check from the store.
    """

    def __init__(self, label: str, *, queue_max: int, load_last_seq: Callable[[str], int]) -> None:
        self._label = label
        self.queue_max = queue_max
        self._load_last_seq = load_last_seq
        # ``_lock`` orders seq checks with enqueueing and guards the lifecycle flags;
        # the deque itself is thread-safe.
        self._lock = threading.Lock()
        self._items: deque[QueueItem] = deque()
        self._wake = threading.Event()
        self._last_seq: dict[str, int] = {}
        self.accepting = False
        self.closed = False
        self.failure: StoreError | None = None
        self._failure_surfaced = False
        self.subscribers: tuple[Subscription, ...] = ()
        self._space_lock = threading.Lock()
        self._space_waiters: list[asyncio.Future[None]] = []

    def __len__(self) -> int:
        return len(self._items)

    # -------------------------------------------------------------------- lifecycle

    def open(self) -> None:
        with self._lock:
            self.accepting = True

    def shut(self) -> bool:
        """Accept nothing more and queue the shutdown marker; False when already closed."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True
            if self.accepting:
                self.accepting = False
                self._items.append(_SHUTDOWN)
        self._wake.set()
        return True

    def refusal(self) -> StoreError:
        """Why nothing more is accepted: the failure (now surfaced), or closed."""
        if self.failure is not None:
            self._failure_surfaced = True
            err = StoreError(f"store failed: {self.failure}")
            err.__cause__ = self.failure
            return err
        return StoreError("store is closed")

    def untold_failure(self) -> StoreError | None:
        """The failure, the first time nobody has been told of it yet (``close`` raises it)."""
        if self.failure is None or self._failure_surfaced:
            return None
        return self.refusal()

    def told(self) -> None:
        """Someone was handed the failure (a future failed with it)."""
        self._failure_surfaced = True

    # -------------------------------------------------------------------- producers

    def append(self, events: Sequence[CanonicalEvent]) -> None:
        """Queue each event in order, under one lock: all or none."""
        if not self.accepting:
            raise self.refusal()
        rows = [event_row(event) for event in events]
        keep = bool(self.subscribers)
        with self._lock:
            if not self.accepting:
                raise self.refusal()
            stage_seqs(events, self._last_seq, self._load_last_seq)
            # Keep the model only for subscribers: otherwise it can die right here,
            # and a queue of plain str/int tuples is nearly free for the GC to scan
            # (measurably faster ingest than keeping every queued model alive).
            if keep:
                self._items.extend(zip(rows, events, strict=True))
            else:
                self._items.extend([(row, None) for row in rows])
        if not self._wake.is_set():
            self._wake.set()

    def submit(
        self, fn: Callable[[Tx], T], events: Sequence[CanonicalEvent]
    ) -> concurrent.futures.Future[T]:
        """Queue ``fn`` and its events as one savepoint; the future resolves after COMMIT."""
        rows = [event_row(e) for e in events]
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if not self.accepting:
                raise self.refusal()
            stage_seqs(events, self._last_seq, self._load_last_seq)
            self._items.append(Write(fn=fn, future=future, rows=rows, events=tuple(events)))
        self._wake.set()
        return future

    def submit_flush(self) -> concurrent.futures.Future[None]:
        """A future resolved once everything queued before it is committed."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            if not self.accepting:
                raise self.refusal()
            self._items.append(Flush(future=future))
        self._wake.set()
        return future

    def known_run(self, run_id: str) -> None:
        """A run this process created: its seqs start after 0 (no read needed)."""
        with self._lock:
            self._last_seq.setdefault(run_id, 0)

    async def room(self) -> None:
        """Return once fewer than ``queue_max`` items are queued (or the store stopped
        accepting, which the next append raises): the backpressure of producers."""
        while len(self._items) >= self.queue_max and self.accepting:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            with self._space_lock:
                self._space_waiters.append(waiter)
            # Re-check after registering: the writer may have drained in between.
            if len(self._items) < self.queue_max or not self.accepting:
                _wake_future(waiter)
            try:
                await waiter
            finally:
                with self._space_lock:
                    if waiter in self._space_waiters:
                        self._space_waiters.remove(waiter)

    def wake_space_waiters(self) -> None:
        with self._space_lock:
            waiters, self._space_waiters = self._space_waiters, []
        for waiter in waiters:
            try:
                waiter.get_loop().call_soon_threadsafe(_wake_future, waiter)
            except RuntimeError:
                continue  # that producer's event loop is closed; nobody to wake

    def add_subscriber(self, subscription: Subscription) -> None:
        with self._lock:
            if not self.accepting:
                raise self.refusal()
            self.subscribers = (*self.subscribers, subscription)

    def remove_subscriber(self, subscription: Subscription) -> None:
        with self._lock:
            self.subscribers = tuple(s for s in self.subscribers if s is not subscription)

    # ------------------------------------------------------------- the writer's side

    def take(self, batch_max: int) -> list[QueueItem]:
        """Up to ``batch_max`` items, waiting for the first (the writer thread only)."""
        items = self._items
        while not items:
            # Clear, then re-check: an append after the clear sets the event again,
            # an append before it is seen by the re-check.
            self._wake.clear()
            if not items:
                self._wake.wait()
        pop = items.popleft
        batch = [pop() for _ in range(min(len(items), batch_max))]
        if self._space_waiters:
            self.wake_space_waiters()
        return batch

    def fail(self, exc: BaseException) -> None:
        """The writer cannot go on: refuse new writes, fail everything queued, say so."""
        if exc is self.failure:
            return  # already handled where it happened
        err = exc if isinstance(exc, StoreError) else StoreError(f"store writer failed: {exc!r}")
        if err is not exc:
            err.__cause__ = exc
        _log.error("store %s failed; refusing further writes", self._label, exc_info=err)
        with self._lock:
            if self.failure is None:
                self.failure = err
            self.accepting = False
            pending = list(self._items)
            self._items.clear()
        for item in pending:
            if isinstance(item, Write | Flush) and item.future.set_running_or_notify_cancel():
                item.future.set_exception(err)
                self._failure_surfaced = True
        self.wake_space_waiters()
        for subscription in self.subscribers:
            subscription._end(err)
