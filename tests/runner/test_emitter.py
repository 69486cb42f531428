"""Listeners see events in seq order; decisions and endings only once committed."""

from __future__ import annotations

import asyncio
from typing import Any

from baton.events.acp_normalizer import Draft
from baton.events.model import CanonicalEvent, RequestCreated, TranscriptAssistant
from baton.events.sequencer import Sequencer
from baton.runner.emitter import EventEmitter


class GatedStore:
    """A store whose commits wait until the test opens the gate."""

    def __init__(self) -> None:
        self.appended: list[int] = []
        self.committed: list[int] = []
        self.gate = asyncio.Event()

    async def append_async(self, event: CanonicalEvent) -> None:
        self.appended.append(event.seq)

    def append_all(self, events: list[CanonicalEvent]) -> None:
        self.appended.extend(event.seq for event in events)

    async def room(self) -> None:
        return None

    async def flush(self) -> None:
        await self.gate.wait()
        self.committed = list(self.appended)


async def test_committed_only_exposure_keeps_sequence_order() -> None:
    store = GatedStore()
    emitter = EventEmitter(Sequencer("r"), store)  # type: ignore[arg-type]
    seen: list[tuple[int, list[int]]] = []
    emitter.listeners.append(lambda e: seen.append((e.seq, list(store.committed))))
    request: Any = emitter.emit(RequestCreated(request_id="q", kind="permission", title="t"))
    pending = asyncio.create_task(request)
    await asyncio.sleep(0)
    assert store.appended == [1] and seen == [], "not shown before its commit"
    await emitter.emit(TranscriptAssistant(message_id="m", text="after"))
    assert seen == [], "a later event waits behind the uncommitted one"
    store.gate.set()
    await pending
    assert [seq for seq, _ in seen] == [1, 2]
    assert 1 in seen[0][1], "the request was committed when it was shown"
    await emitter.emit(TranscriptAssistant(message_id="m", text="streams at once"))
    assert [seq for seq, _ in seen] == [1, 2, 3]


async def test_a_run_of_drafts_is_stamped_in_order_and_waits_behind_a_commit() -> None:
    """Streaming drafts go a run at a time; an event shown only once committed splits
    the run in its place, and what follows it is shown after it."""
    store = GatedStore()
    emitter = EventEmitter(Sequencer("r"), store)  # type: ignore[arg-type]
    seen: list[tuple[int, str]] = []
    emitter.listeners.append(lambda e: seen.append((e.seq, e.type)))
    drafts = [
        Draft(TranscriptAssistant(message_id="m", text="one")),
        Draft(TranscriptAssistant(message_id="m", text="two"), turn_id="own"),
        Draft(RequestCreated(request_id="q", kind="permission", title="t")),
        Draft(TranscriptAssistant(message_id="m", text="three")),
    ]
    stored: list[CanonicalEvent] = []
    emitter.listeners.append(stored.append)
    pending = asyncio.create_task(emitter.emit_drafts(drafts, session_id="s", turn_id="cur"))
    await asyncio.sleep(0)
    assert store.appended == [1, 2, 3] and [seq for seq, _ in seen] == [1, 2]
    store.gate.set()
    await pending
    assert store.appended == [1, 2, 3, 4]
    assert seen == [
        (1, "transcript.assistant"),
        (2, "transcript.assistant"),
        (3, "request.created"),
        (4, "transcript.assistant"),
    ]
    assert [e.turn_id for e in stored] == ["cur", "own", "cur", "cur"]
    assert {e.session_id for e in stored} == {"s"} and emitter.count == 4
