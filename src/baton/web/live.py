"""Live state for every open page: the inbox and the team board, over one SSE stream.

One :class:`LiveHub` per app computes the state once and fans it out, so twenty
open pages cost one ledger query (and one board snapshot) per change, not
twenty. It recomputes when the store commits an event in this process (a
request appeared, a turn ended: within milliseconds) and otherwise every
``poll_interval`` seconds (how changes made by another process, such as a
``baton up`` beside ``baton serve``, show up). A message is only sent when its
content changed.

Every message is the **whole** state of its topic, never a delta: a page that
reconnects after a dropped connection or a server restart is caught up by the
first message it receives, with nothing to replay. Three rules make every open
page converge to the store's state, whatever it saw before:

* **Stamped.** Each message carries ``as_of``, the server time its computation
  started, strictly increasing per hub; a page keeps the newest ``as_of`` it has
  shown (a page's own HTML carries its render time) and ignores anything older,
  so an old state never replaces a newer one, on any path (a reconnect, another
  tab's rebroadcast).
* **Fresh first.** A new stream's first message is computed after it subscribed,
  never a state cached from before (after a quiet spell that cache is old: a
  page opened then showed a pending request as over).
* **Repeated.** Instead of an SSE comment, an idle stream re-sends the newest
  states every ``keepalive`` seconds, so a page that skipped a message it could
  not order catches up anyway.

* ``inbox``: ``{"pending": [summary...], "settled": [summary...]}``. A summary is
  the request's id, kind, title, run, creation time, expiry (when known) and, once
  settled, its state and the decision as a sentence. Cards themselves are
  server-rendered HTML fetched from ``/fragments/requests/{id}``, so there is one
  renderer (:mod:`baton.web.dashboard`).
* ``board``: :func:`baton.web.board.snapshot_data`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from baton.aiotasks import cancel_and_wait
from baton.app.facade.requests import Ledger, RequestRecord, State
from baton.app.facade.store import Store
from baton.jsontypes import JsonObject
from baton.web.board import BoardSource, snapshot_data
from baton.web.sse import RETRY_MS, sse_frame
from baton.web.summaries import decision_text, expires_at

__all__ = ["TOPICS", "LiveHub", "inbox_state"]

log = logging.getLogger(__name__)

TOPICS: Final = frozenset({"inbox", "board"})
SETTLED_SHOWN: Final = 50
_WAKE_TYPES: Final = ("request.", "turn.", "session.", "tool.execution.completed")


async def inbox_state(ledger: Ledger) -> JsonObject:
    """The inbox as one message: every pending request, and the recently settled ones."""
    pending = await ledger.pending()
    settled = await ledger.list_requests(
        states=[State.ANSWERED, State.DELIVERED, State.CANCELLED, State.EXPIRED],
        limit=SETTLED_SHOWN,
    )
    return {
        "pending": [_summary(r) for r in pending],
        "settled": [_summary(r) for r in reversed(settled)],
    }


def _summary(record: RequestRecord) -> JsonObject:
    return {
        "request_id": record.request_id,
        "kind": record.kind,
        "title": record.title,
        "run_id": record.run_id,
        "state": record.state.value,
        "created_at": record.created_at,
        "expires_at": expires_at(record),
        "decision": decision_text(record) if record.state is not State.PENDING else None,
    }


@dataclass(eq=False)
class _Subscriber:
    topics: frozenset[str]
    queue: asyncio.Queue[tuple[str, str]] = field(default_factory=lambda: asyncio.Queue(16))
    unsent: set[str] = field(default_factory=set)
    """Topics this stream has not yet received a state of computed after it subscribed."""
    joined: float = field(default_factory=time.time)


def _message(state: str, as_of: float) -> str:
    """The SSE data of one topic: its state (a JSON object) with its ``as_of`` stamp."""
    stamp = json.dumps(as_of)
    return f'{{"as_of":{stamp},{state[1:]}' if state != "{}" else f'{{"as_of":{stamp}}}'


@dataclass(kw_only=True, eq=False)
class LiveHub:
    """Computes each topic's state once and hands it to every subscribed stream."""

    store: Store
    ledger: Ledger
    board: BoardSource | None
    poll_interval: float
    _subscribers: set[_Subscriber] = field(default_factory=set, init=False)
    _latest: dict[str, str] = field(default_factory=dict, init=False)
    """Each topic's newest state (JSON, without its stamp)."""
    _as_of: float = field(default=0.0, init=False)
    """When the newest computation started (every topic's stamp)."""
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _tail: asyncio.Task[None] | None = field(default=None, init=False)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def poke(self) -> None:
        """Recompute now (an action of this process changed something)."""
        self._wake.set()

    async def stream(
        self, topics: frozenset[str], *, keepalive: float
    ) -> AsyncGenerator[str, None]:
        """The SSE text for one page: the current state of its topics, then every change."""
        subscriber = _Subscriber(topics, unsent=set(topics))
        self._subscribers.add(subscriber)
        self._ensure_running()
        try:
            yield f"retry: {RETRY_MS}\n\n"
            self._wake.set()  # the first message: computed now, never a state cached earlier
            while True:
                try:
                    async with asyncio.timeout(keepalive):
                        topic, data = await subscriber.queue.get()
                except TimeoutError:
                    # Idle: the newest states again (they double as the keepalive).
                    repeated = [
                        sse_frame(_message(self._latest[t], self._as_of), event=t)
                        for t in sorted(topics - subscriber.unsent)
                        if t in self._latest
                    ]
                    yield "".join(repeated) or ": keepalive\n\n"
                    continue
                yield sse_frame(data, event=topic)
        finally:
            self._subscribers.discard(subscriber)

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="baton-web-live")
        if self._tail is None or self._tail.done():
            self._tail = asyncio.create_task(self._follow_store(), name="baton-web-live-tail")

    async def aclose(self) -> None:
        await cancel_and_wait((self._task, self._tail))

    async def _follow_store(self) -> None:
        """Wake the computation when this process commits an event that may change it."""
        try:
            async for event in self.store.subscribe(None, after_seq=None):
                if event.type.startswith(_WAKE_TYPES):
                    self._wake.set()
        except Exception:  # the store closed or failed: polling still works
            log.debug("live tail ended", exc_info=True)

    async def _run(self) -> None:
        while self._subscribers:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._publish()
            except Exception:  # one failed look never ends the stream: the next wake retries
                log.warning("live state could not be computed", exc_info=True)

    async def _publish(self) -> None:
        as_of = max(time.time(), self._as_of + 1e-6)  # strictly increasing, whatever the clock
        wanted = set().union(*(s.topics for s in self._subscribers)) if self._subscribers else set()
        computed: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {}
        pending: list[RequestRecord] | None = None
        if "inbox" in wanted or "board" in wanted:
            pending = await self.ledger.pending()
        if "inbox" in wanted:
            computed["inbox"] = lambda: inbox_state(self.ledger)
        if "board" in wanted and self.board is not None:
            board = self.board
            records = pending or []
            computed["board"] = lambda: _board_data(board, records)
        states = {
            topic: json.dumps(await compute(), ensure_ascii=False, separators=(",", ":"))
            for topic, compute in computed.items()
        }
        self._as_of = as_of
        for topic, data in states.items():
            changed = self._latest.get(topic) != data
            self._latest[topic] = data
            message = _message(data, as_of)
            for subscriber in list(self._subscribers):
                if topic not in subscriber.topics or not (changed or topic in subscriber.unsent):
                    continue
                if as_of >= subscriber.joined:
                    subscriber.unsent.discard(topic)
                if subscriber.queue.full():
                    # A stalled page: drop what it has not read; the newest state supersedes it.
                    with contextlib.suppress(asyncio.QueueEmpty):
                        while True:
                            subscriber.queue.get_nowait()
                subscriber.queue.put_nowait((topic, message))


async def _board_data(board: BoardSource, pending: list[RequestRecord]) -> JsonObject:
    snapshot = await asyncio.to_thread(board.snapshot, pending)
    return snapshot_data(snapshot)
