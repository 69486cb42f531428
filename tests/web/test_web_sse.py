"""The SSE stream: replay after ``Last-Event-ID``, live follow, lag, other writers, the end.

Finished runs are read through ``httpx.ASGITransport`` (their stream ends, so
its buffering is harmless). Live streams never end on their own, so they go
through :class:`~tests.web.streaming.StreamingASGITransport`, read incrementally
under an ``asyncio.timeout`` guard (a bound on a hang, not a sleep). Lag and the
gap guard are driven on :func:`baton.web.sse.follow_run` directly, where the
subscription's backlog can be made tiny and the poll effectively disabled, so
the test proves *which* mechanism delivered the events.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from baton.app.recovery import open_store
from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.store.subscription import Subscription
from baton.web.app import create_app
from baton.web.sse import StoredLine, follow_run, parse_resume_point, sse_frame
from tests.web.conftest import BASE_URL
from tests.web.streaming import StreamingASGITransport
from tests.web.webbuild import TOKEN, TS, append

AUTH = {"Authorization": f"Bearer {TOKEN}"}
STREAM = "/api/runs/run-1/stream"
Frame = dict[str, str]


def parse_frames(text: str) -> list[Frame]:
    """SSE messages as dicts; ``data`` lines joined with ``\\n`` as a browser does."""
    frames: list[Frame] = []
    for block in text.split("\n\n"):
        frame: Frame = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            frame[name] = f"{frame[name]}\n{value}" if name == "data" and name in frame else value
        if frame:
            frames.append(frame)
    return frames


class SseReader:
    """Reads one SSE message at a time from a streaming response."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines: AsyncIterator[str] = response.aiter_lines()
        self.comments: list[str] = []

    async def frame(self) -> Frame:
        frame: Frame = {}
        async for line in self._lines:
            if line == "":
                if frame:
                    return frame
                continue
            if line.startswith(":"):
                self.comments.append(line)
                continue
            name, _, value = line.partition(": ")
            frame[name] = f"{frame[name]}\n{value}" if name in frame else value
        raise AssertionError(f"stream ended inside {frame}")

    async def event(self) -> Frame:
        """The next canonical event (skipping ``retry:``-only messages)."""
        while True:
            frame = await self.frame()
            if "data" in frame:
                assert "event" not in frame, frame
                return frame


def _events(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if "data" in f and "event" not in f]


# --------------------------------------------------------------------------- finished runs


async def test_finished_run_replays_after_last_event_id(
    client: httpx.AsyncClient, store: Store
) -> None:
    await append(store, range(1, 11))
    store.finish_run("run-1", "completed", TS)
    stored = list(store.iter_event_json("run-1"))
    response = await client.get(STREAM, headers={"Last-Event-ID": "4"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = parse_frames(response.text)
    assert frames[0] == {"retry": "2000"}
    events = _events(frames)
    assert [int(f["id"]) for f in events] == list(range(5, 11))
    assert [f["data"] for f in events] == stored[4:]
    assert frames[-1]["event"] == "end"
    assert json.loads(frames[-1]["data"]) == {
        "run_id": "run-1",
        "status": "completed",
        "last_seq": 10,
    }


async def test_resume_point_header_beats_query(client: httpx.AsyncClient, store: Store) -> None:
    await append(store, range(1, 11))
    store.finish_run("run-1", "completed", TS)
    by_query = _events(parse_frames((await client.get(f"{STREAM}?after=7")).text))
    assert [f["id"] for f in by_query] == ["8", "9", "10"]
    both = await client.get(f"{STREAM}?after=2", headers={"Last-Event-ID": "8"})
    assert [f["id"] for f in _events(parse_frames(both.text))] == ["9", "10"]
    caught_up = parse_frames((await client.get(STREAM, headers={"Last-Event-ID": "10"})).text)
    assert _events(caught_up) == []
    assert json.loads(caught_up[-1]["data"])["last_seq"] == 10
    assert (await client.get(STREAM, headers={"Last-Event-ID": "x"})).status_code == 400
    assert (await client.get(f"{STREAM}?after=-3")).status_code == 400
    assert (await client.get("/api/runs/nope/stream")).status_code == 404


# ------------------------------------------------------------------------------ live runs


@pytest.fixture
async def streaming(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=StreamingASGITransport(app), base_url=BASE_URL, headers=AUTH
    ) as client:
        yield client


async def test_live_stream_continues_exactly(
    streaming: httpx.AsyncClient, store: Store, db_path: Path
) -> None:
    await append(store, range(1, 6))
    got: list[Frame] = []
    async with (
        asyncio.timeout(30),
        streaming.stream("GET", STREAM, headers={"Last-Event-ID": "2"}) as response,
    ):
        assert response.status_code == 200
        reader = SseReader(response)
        got += [await reader.event() for _ in range(3)]  # replayed from the store
        await append(store, range(6, 9))  # this process's writer: the subscription
        got += [await reader.event() for _ in range(3)]
        other = open_store(db_path)  # another writer (as `baton run` beside `baton serve`)
        try:
            await append(other, range(9, 11))
        finally:
            await other.aclose()
        got += [await reader.event() for _ in range(2)]  # found by re-reading the store
        store.finish_run("run-1", "completed", TS)
        end = await reader.frame()
    stored = list(store.iter_event_json("run-1"))
    assert [int(f["id"]) for f in got] == list(range(3, 11))
    assert [f["data"] for f in got] == stored[2:]
    assert end["event"] == "end"
    assert json.loads(end["data"])["last_seq"] == 10


async def test_reconnect_after_disconnect_has_no_gap_or_duplicate(
    streaming: httpx.AsyncClient, store: Store
) -> None:
    await append(store, range(1, 4))
    async with asyncio.timeout(30):
        async with streaming.stream("GET", STREAM) as response:
            reader = SseReader(response)
            first = [await reader.event() for _ in range(3)]
        # Disconnected (the transport waited for the server to finish); more happens meanwhile.
        await append(store, range(4, 8))
        last_id = first[-1]["id"]
        async with streaming.stream("GET", STREAM, headers={"Last-Event-ID": last_id}) as response:
            reader = SseReader(response)
            second = [await reader.event() for _ in range(4)]
    assert [int(f["id"]) for f in first + second] == list(range(1, 8))


async def test_idle_stream_sends_keepalives(store: Store, ledger: Ledger) -> None:
    app = create_app(store, ledger, token=TOKEN, poll_interval=0.01, keepalive=0.01)
    async with (
        httpx.AsyncClient(
            transport=StreamingASGITransport(app), base_url=BASE_URL, headers=AUTH
        ) as client,
        asyncio.timeout(30),
        client.stream("GET", STREAM) as response,
    ):
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith(":"):
                assert line == ": keepalive"
                break


# ------------------------------------------------------------------- follow_run directly


@pytest.fixture
def subscriptions(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[Subscription]:
    """Every subscription ``follow_run`` opens, to check which path delivered events."""
    opened: list[Subscription] = []
    original = store.subscribe

    def spy(*args: Any, **kwargs: Any) -> Subscription:
        subscription = original(*args, **kwargs)
        opened.append(subscription)
        return subscription

    monkeypatch.setattr(store, "subscribe", spy)
    return opened


async def _take(stream: AsyncGenerator[StoredLine | None, None], n: int) -> list[StoredLine]:
    taken: list[StoredLine] = []
    while len(taken) < n:
        item = await anext(stream)
        assert item is not None, "the poll interval is an hour: nothing should be idle"
        taken.append(item)
    return taken


async def test_lagging_subscription_falls_back_to_the_store(
    store: Store, subscriptions: list[Subscription]
) -> None:
    await append(store, range(1, 4))
    stream = follow_run(store, "run-1", after_seq=0, poll_interval=3600, max_backlog=2)
    try:
        async with asyncio.timeout(30):
            got = await _take(stream, 1)
            await append(store, range(4, 51))  # committed while nobody reads: overflows 2
            assert subscriptions[0].lagged
            got += await _take(stream, 49)
    finally:
        await stream.aclose()
    assert subscriptions[0].lag_count == 1
    assert [line.seq for line in got] == list(range(1, 51))
    assert [line.json for line in got] == list(store.iter_event_json("run-1"))


async def test_a_jump_ahead_is_filled_from_the_store(
    store: Store, db_path: Path, subscriptions: list[Subscription]
) -> None:
    await append(store, range(1, 4))
    stream = follow_run(store, "run-1", after_seq=0, poll_interval=3600)
    try:
        async with asyncio.timeout(30):
            got = await _take(stream, 3)
            other = open_store(db_path)
            try:
                await append(other, range(4, 5))  # never pushed to our subscription
            finally:
                await other.aclose()
            await append(store, range(5, 6))  # pushed: seq 5 right after 3
            got += await _take(stream, 2)
    finally:
        await stream.aclose()
    assert [line.seq for line in got] == [1, 2, 3, 4, 5]


async def test_closing_the_stream_closes_its_subscription(
    store: Store, subscriptions: list[Subscription]
) -> None:
    await append(store, range(1, 2))
    stream = follow_run(store, "run-1", after_seq=0, poll_interval=3600)
    await _take(stream, 1)
    await stream.aclose()
    await append(store, range(2, 3))
    with pytest.raises(StopAsyncIteration):
        await anext(subscriptions[0])  # closed: iteration ends at once


# ------------------------------------------------------------------------------ framing


def test_sse_frame_cannot_be_broken_by_line_breaks() -> None:
    frame = sse_frame("a\nb\r\nc\rd", event_id=3)
    assert frame == "id: 3\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    assert sse_frame("{}", event="end") == "event: end\ndata: {}\n\n"


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [
        (None, None, 0),
        ("5", None, 5),
        (None, "7", 7),
        ("5", "7", 5),
        ("", "7", 7),
        (" 9 ", None, 9),
    ],
)
def test_parse_resume_point(header: str | None, query: str | None, expected: int) -> None:
    assert parse_resume_point(header, query) == expected


@pytest.mark.parametrize("bad", ["-1", "x", "1.5", "١"])
def test_parse_resume_point_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="non-negative integer"):
        parse_resume_point(bad, None)
