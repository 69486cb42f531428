"""A run's committed events as Server-Sent Events, resumable by sequence number.

The SSE ``id:`` of every event is its per-run ``seq``, so a browser that loses
the connection reconnects with ``Last-Event-ID`` and the stream continues with
the next seq: no gap, no duplicate. :func:`follow_run` is the whole algorithm:

1. **Replay, then live, from one subscription.** ``store.subscribe(run_id,
   after_seq=...)`` first re-reads the run from the store after the resume
   point (behind a flush barrier, so nothing queued before the subscription is
   missed), then delivers events as they commit. If the consumer falls behind,
   the subscription is marked lagged and re-reads the gap from the store by seq
   instead of buffering without bound.
2. **The store is the source of truth; a cursor guards the output.** The last
   seq sent is kept here; anything at or below it is dropped, and an event that
   jumps ahead of it makes us read the gap from the store first. The
   subscription already promises this, but the guard is what makes the SSE
   contract hold even when (3) mixes in events from elsewhere.
3. **Other processes write too.** A subscription only carries the events of
   *this* process's writer, and ``baton serve`` usually runs beside the
   ``baton run`` that owns the run. So when the subscription is idle for
   ``poll_interval`` seconds, the store is read by seq after the cursor; that
   is also when a finished run is noticed and the stream ends.

A run that had already finished when the stream was opened is only replayed.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Final

from baton.app.facade.runs import CanonicalEvent
from baton.app.facade.store import TERMINAL_RUN_STATUSES, Store
from baton.errors import StoreError

__all__ = [
    "KEEPALIVE_SECONDS",
    "RETRY_MS",
    "StoredLine",
    "follow_run",
    "parse_resume_point",
    "sse_frame",
    "sse_stream",
]

RETRY_MS: Final = 2000
"""Sent as ``retry:`` so browsers reconnect after two seconds, not their default."""
KEEPALIVE_SECONDS: Final = 15.0
"""An SSE comment after this long without events: keeps proxies from closing an
idle stream, and a write is how a vanished client is eventually noticed."""
_PAGE: Final = 1000
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class StoredLine:
    """One committed event: its seq and its NDJSON line exactly as stored."""

    seq: int
    json: str


def sse_frame(data: str, *, event_id: int | None = None, event: str | None = None) -> str:
    """One SSE message. Every line break in ``data`` starts a new ``data:`` field,
    so no text can end the message early or inject a field (the client joins the
    lines back with ``\\n``)."""
    fields: list[str] = []
    if event is not None:
        fields.append(f"event: {event}")
    if event_id is not None:
        fields.append(f"id: {event_id}")
    fields.extend(f"data: {part}" for part in _LINE_BREAK.split(data))
    return "\n".join(fields) + "\n\n"


def parse_resume_point(last_event_id: str | None, after: str | None) -> int:
    """The seq to resume after: ``Last-Event-ID`` wins over ``?after=``.

    The browser sends ``Last-Event-ID`` on reconnect while the URL still carries
    the ``after`` of the first connection, so the header is the newer truth.
    Raises ``ValueError`` for anything but a non-negative integer.
    """
    raw = last_event_id if last_event_id not in (None, "") else after
    if raw in (None, ""):
        return 0
    assert raw is not None
    text = raw.strip()
    if not text.isascii() or not text.isdigit():
        raise ValueError(f"resume point must be a non-negative integer seq, got {raw!r}")
    return int(text)


_LINES: OrderedDict[tuple[str, int], str] = OrderedDict()
_LINES_MAX: Final = 8192


def _line_of(event: CanonicalEvent) -> str:
    """The event's JSON line, serialized once per process however many pages follow it.

    Every stream of a run receives the same committed event; with twenty pages open
    serializing it twenty times was the server's main cost under a flood. A seq is
    never reused within a run, so (run, seq) identifies the line for good.
    """
    key = (event.run_id, event.seq)
    line = _LINES.get(key)
    if line is None:
        line = event.to_json()
        _LINES[key] = line
        if len(_LINES) > _LINES_MAX:
            _LINES.popitem(last=False)
    return line


def _seq_of(line: str) -> int:
    seq = json.loads(line).get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise StoreError(f"stored event has no integer seq: {line[:80]!r}")
    return seq


def _read_page(store: Store, run_id: str, after: int, limit: int) -> list[StoredLine]:
    return [
        StoredLine(_seq_of(line), line)
        for line in store.iter_event_json(run_id, after_seq=after, limit=limit)
    ]


async def _read_after(
    store: Store, run_id: str, after: int, *, before: int | None = None
) -> AsyncIterator[StoredLine]:
    """Committed events with ``after < seq`` (and ``seq < before``), page by page, off-loop."""
    while True:
        limit = _PAGE if before is None else min(_PAGE, before - after - 1)
        if limit <= 0:
            return
        page = await asyncio.to_thread(_read_page, store, run_id, after, limit)
        for line in page:
            if before is not None and line.seq >= before:
                return
            yield line
            after = line.seq
        if len(page) < limit:
            return


async def _finished(store: Store, run_id: str) -> bool:
    run = await asyncio.to_thread(store.get_run, run_id)
    return run is None or run.status in TERMINAL_RUN_STATUSES


async def follow_run(
    store: Store,
    run_id: str,
    *,
    after_seq: int,
    poll_interval: float = 1.0,
    max_backlog: int = 10_000,
) -> AsyncGenerator[StoredLine | None, None]:
    """Every committed event of ``run_id`` after ``after_seq``, once each, in seq order.

    Yields ``None`` each time ``poll_interval`` passes without an event (the
    caller's chance to send a keepalive). Returns once the run has finished and
    everything committed was yielded, or when the store closes. See the module
    docstring for why this is safe against lag and against other writers.
    """
    cursor = after_seq
    if await _finished(store, run_id):
        async for line in _read_after(store, run_id, cursor):
            yield line
        return
    subscription = store.subscribe(run_id, after_seq=after_seq, max_backlog=max_backlog)
    pending: asyncio.Future[CanonicalEvent] | None = None
    try:
        while True:
            if pending is None:
                # One long-lived "next event" future; a poll timeout leaves it
                # running instead of cancelling the subscription mid-read.
                pending = asyncio.ensure_future(anext(subscription))
            done, _ = await asyncio.wait({pending}, timeout=poll_interval)
            if not done:
                finished = await _finished(store, run_id)
                async for line in _read_after(store, run_id, cursor):
                    cursor = line.seq
                    yield line
                if finished:
                    return
                yield None
                continue
            future, pending = pending, None
            try:
                event = future.result()
            except StopAsyncIteration:
                return  # the store closed
            seq = event.seq
            if seq <= cursor:
                continue
            if seq > cursor + 1:
                async for line in _read_after(store, run_id, cursor, before=seq):
                    cursor = line.seq
                    yield line
            cursor = seq
            yield StoredLine(seq, _line_of(event))
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.wait({pending})
            if not pending.cancelled():
                pending.exception()  # retrieved: a store failure here is already moot
        subscription.close()


async def sse_stream(
    store: Store,
    run_id: str,
    *,
    after_seq: int,
    poll_interval: float,
    keepalive: float = KEEPALIVE_SECONDS,
) -> AsyncGenerator[str, None]:
    """The text of an SSE response: ``retry:``, one message per event, then ``end``.

    Ends with an ``end`` event (``{"run_id", "status", "last_seq"}``) when the
    run is over, so a browser closes instead of reconnecting forever; a store
    failure ends it with a ``failed`` event carrying the message.
    """
    yield f"retry: {RETRY_MS}\n\n"
    last = after_seq
    idle = 0.0
    try:
        async for item in follow_run(
            store, run_id, after_seq=after_seq, poll_interval=poll_interval
        ):
            if item is None:
                idle += poll_interval
                if idle >= keepalive:
                    idle = 0.0
                    yield ": keepalive\n\n"
                continue
            idle = 0.0
            last = item.seq
            yield sse_frame(item.json, event_id=item.seq)
        run = await asyncio.to_thread(store.get_run, run_id)
        end = {"run_id": run_id, "status": run.status if run else None, "last_seq": last}
        yield sse_frame(json.dumps(end, ensure_ascii=False), event="end")
    except StoreError as exc:
        failed = {"error": type(exc).__name__, "message": str(exc)}
        yield sse_frame(json.dumps(failed, ensure_ascii=False), event="failed")
