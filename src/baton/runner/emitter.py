"""The one place canonical events leave a session: stamp, store, show."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from baton.events.acp_normalizer import Draft
from baton.events.model import TERMINAL_TURN_TYPES, CanonicalEvent, Payload
from baton.events.sequencer import Sequencer
from baton.jsontypes import JsonValue

if TYPE_CHECKING:
    from baton.store.store import Store
    from baton.store.tx import Tx

__all__ = [
    "EventEmitter",
    "Listener",
]

Listener = Callable[[CanonicalEvent], None]
T = TypeVar("T")


@lru_cache(maxsize=256)  # the set of event types is closed (and small)
def _exposed_after_commit(event_type: str) -> bool:
    """Events a surface must never show before they are durable: decisions, refusals,
    endings. (Streaming detail is shown as soon as it is queued, to keep up.)"""
    return event_type.startswith(
        ("request.", "security.", "session.", "budget.")
    ) or event_type in (TERMINAL_TURN_TYPES)


class EventEmitter:
    """Stamps payloads with run/session/turn identity and appends them durably.

    Listeners (the CLI's live view, NDJSON output) see events in sequence order:
    human requests, security refusals, session changes and turn endings only once
    committed (persist before expose); streaming detail as soon as it is queued.
    """

    def __init__(self, sequencer: Sequencer, store: Store | None) -> None:
        self.sequencer = sequencer
        self.store = store
        self.listeners: list[Listener] = []
        self.batch_listeners: list[Callable[[], None]] = []
        """Called at the end of each read from the agent: listeners that buffer write now."""
        self.count = 0
        self._held: deque[list[Any]] = deque()
        """[event, waiting_for_commit, keep] in seq order, while an earlier event awaits its
        commit (``keep`` is False for the events of a state change that was refused)."""

    @property
    def run_id(self) -> str:
        return self.sequencer.run_id

    async def emit(
        self,
        payload: Payload,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        raw: JsonValue = None,
        flags: Sequence[str] = (),
    ) -> CanonicalEvent:
        event = self.sequencer.stamp(
            payload, session_id=session_id, turn_id=turn_id, raw=raw, flags=flags
        )
        await self._store_and_show(event)
        return event

    async def _store_and_show(self, event: CanonicalEvent) -> None:
        """Append one event and show it: streaming detail at once (behind any event still
        awaiting its commit), decisions, refusals and endings once committed (a run of
        streaming detail goes through :meth:`_streamed` instead)."""
        self.count += 1
        store = self.store
        if store is None:
            self._notify(event)
            return
        await store.append_async(event)
        if not self.listeners:
            return
        if _exposed_after_commit(event.type):
            entry = [event, True, True]
            self._held.append(entry)
            try:
                await store.flush()
            finally:
                entry[1] = False
                self._release()
        elif self._held:
            self._held.append([event, False, True])  # keep seq order behind a commit
        else:
            self._notify(event)

    async def commit(
        self,
        payloads: Sequence[Payload],
        fn: Callable[[Tx], T],
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> T:
        """Run ``fn`` and store ``payloads`` (stamped) in one transaction; return ``fn``'s result.

        The :class:`~baton.store.journal.Journal` of this run: a state change and the
        events that say so are committed together (:meth:`Store.write`), and listeners
        see the events only after that commit. If ``fn`` raises, nothing is stored,
        listeners see nothing, and the exception propagates.
        """
        result, _ = await self.commit_stamped(
            payloads, lambda _events: fn, session_id=session_id, turn_id=turn_id
        )
        return result

    async def commit_stamped(
        self,
        payloads: Sequence[Payload],
        build: Callable[[Sequence[CanonicalEvent]], Callable[[Tx], T]],
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> tuple[T, list[CanonicalEvent]]:
        """:meth:`commit`, with the change built from the stamped events (a row keyed by an
        event's ``(run_id, seq)``, like the usage ledger's); returns the result and events."""
        if self.store is None:
            raise RuntimeError("EventEmitter.commit needs a store")
        events = [self.sequencer.stamp(p, session_id=session_id, turn_id=turn_id) for p in payloads]
        fn = build(events)
        self.count += len(events)
        entries = [[event, True, True] for event in events]
        self._held.extend(entries)
        try:
            result = await self.store.write(fn, events=events)
        except BaseException:
            for entry in entries:
                entry[2] = False
            raise
        finally:
            for entry in entries:
                entry[1] = False
            self._release()
        return result, events

    def _release(self) -> None:
        while self._held and not self._held[0][1]:
            event, _, keep = self._held.popleft()
            if keep:
                self._notify(event)

    def _notify(self, event: CanonicalEvent) -> None:
        for listener in self.listeners:
            listener(event)

    async def emit_drafts(
        self, drafts: Iterable[Draft], *, session_id: str | None, turn_id: str | None
    ) -> None:
        """Each draft in the turn the agent's ids place it in (``turn_id`` when they place it
        nowhere), with its flags (``late``: not the current turn's). Streaming detail is
        stamped and queued a run at a time (:meth:`_streamed`); an event shown only once
        committed goes alone, in its place."""
        stamp = self.sequencer.stamp
        run: list[Draft] = []
        for draft in drafts:
            if not _exposed_after_commit(draft.payload.TYPE):
                run.append(draft)
                continue
            if run:
                await self._streamed(run, session_id, turn_id)
                run = []
            event = stamp(
                draft.payload,
                session_id=session_id,
                turn_id=draft.turn_id or turn_id,
                raw=draft.raw,
                flags=draft.flags,
            )
            await self._store_and_show(event)
        if run:
            await self._streamed(run, session_id, turn_id)

    async def _streamed(
        self, drafts: Sequence[Draft], session_id: str | None, turn_id: str | None
    ) -> None:
        """Streaming detail: stamped, queued under one lock, shown (behind any event still
        awaiting its commit). The wait for room comes first: nothing else may stamp
        between a seq and its append."""
        store = self.store
        if store is not None:
            await store.room()
        events = self.sequencer.stamp_all(drafts, session_id=session_id, turn_id=turn_id)
        self.count += len(events)
        if store is not None:
            store.append_all(events)
            if not self.listeners:
                return
        if self._held:
            self._held.extend([event, False, True] for event in events)
            return
        for event in events:
            self._notify(event)

    def batch_end(self) -> None:
        """One read from the agent is handled: buffered output is written (per batch, not
        per event: the events themselves were already handed to the listeners)."""
        for listener in self.batch_listeners:
            listener()

    async def flush(self) -> None:
        if self.store is not None:
            await self.store.flush()
