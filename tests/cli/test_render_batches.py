"""The views write per read batch, and what they write is what event-by-event rendering wrote.

``data/live_view_trace.ndjson`` is ``baton run --json`` of ten fake-agent scenarios;
``data/live_view_trace*.txt`` are the live view of it as rendered (event by event,
one print each) before output was batched.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from baton.cli.render import DEFERRED_TYPES, HumanRenderer, NdjsonRenderer
from baton.events.model import CanonicalEvent

DATA = Path(__file__).with_name("data")
TRACE = [
    CanonicalEvent.model_validate_json(line)
    for line in (DATA / "live_view_trace.ndjson").read_text().splitlines()
]


def _labeler(event: CanonicalEvent) -> str | None:
    return "DEV" if event.seq % 3 else "QA"


def _render(cuts: set[int], labeled: bool) -> str:
    """The live view of the trace, inside an event loop, a batch ending after each cut."""
    out = io.StringIO()

    async def main() -> None:
        console = Console(file=out, width=100, highlight=False, soft_wrap=True)
        view = HumanRenderer(console, labeler=_labeler if labeled else None)
        for index, event in enumerate(TRACE):
            view(event)
            if index in cuts:
                view.batch_end()
        view.close()

    asyncio.run(main())
    return out.getvalue()


@pytest.mark.parametrize("labeled", [False, True])
@pytest.mark.parametrize("every", [1, 2, 7, 10_000])
def test_the_live_view_of_a_recorded_trace_is_unchanged(labeled: bool, every: int) -> None:
    golden = (DATA / f"live_view_trace{'.labeled' if labeled else ''}.txt").read_text()
    assert _render(set(range(0, len(TRACE), every)), labeled) == golden


@settings(max_examples=30, deadline=None)
@given(st.sets(st.integers(0, len(TRACE) - 1)), st.booleans())
def test_any_batching_renders_the_same_bytes(cuts: set[int], labeled: bool) -> None:
    golden = (DATA / f"live_view_trace{'.labeled' if labeled else ''}.txt").read_text()
    assert _render(cuts, labeled) == golden


class Recorder(io.StringIO):
    """A stdout that counts what reached it and its flushes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.flushes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)

    def flush(self) -> None:
        self.flushes += 1


def _split() -> tuple[list[CanonicalEvent], list[CanonicalEvent]]:
    streaming = [e for e in TRACE if e.type in DEFERRED_TYPES]
    other = [e for e in TRACE if e.type not in DEFERRED_TYPES]
    assert len(streaming) >= 3 and other
    return streaming, other


def test_ndjson_is_written_once_per_batch_and_at_anything_but_streaming_detail() -> None:
    streaming, other = _split()
    out = Recorder()

    async def main() -> None:
        view = NdjsonRenderer(out)
        for event in streaming[:3]:
            view(event)
        assert out.getvalue() == "" and out.flushes == 0  # still in the read batch
        view.batch_end()
        assert out.getvalue() == "".join(e.to_json() + "\n" for e in streaming[:3])
        assert (out.writes, out.flushes) == (1, 1)
        view.batch_end()  # nothing new: no write, no flush
        assert (out.writes, out.flushes) == (1, 1)
        view(streaming[0])
        view(other[0])  # e.g. a request or the turn's end: written at once, in order
        assert out.getvalue().endswith(streaming[0].to_json() + "\n" + other[0].to_json() + "\n")
        assert (out.writes, out.flushes) == (2, 2)

    asyncio.run(main())


def test_a_batch_nobody_ends_is_written_when_the_loop_turns() -> None:
    streaming, _ = _split()
    out = Recorder()

    async def main() -> None:
        view = NdjsonRenderer(out)
        view(streaming[0])
        assert out.getvalue() == ""
        await asyncio.sleep(0)
        assert out.getvalue() == streaming[0].to_json() + "\n"

    asyncio.run(main())


@pytest.mark.parametrize(
    "finish", [lambda view: view.close(), lambda view: view.batch_end()], ids=["close", "batch"]
)
def test_close_or_batch_end_writes_every_event_shown(
    finish: Callable[[NdjsonRenderer], None],
) -> None:
    out = Recorder()

    async def main() -> None:
        view = NdjsonRenderer(out)
        for event in TRACE:
            view(event)
        finish(view)
        assert out.getvalue() == "".join(e.to_json() + "\n" for e in TRACE)

    asyncio.run(main())


def test_the_live_view_writes_streaming_text_at_the_batch_end() -> None:
    streaming, _ = _split()
    out = io.StringIO()

    async def main() -> None:
        view = HumanRenderer(Console(file=out, width=100, soft_wrap=True))
        for event in streaming:
            view(event)
        assert out.getvalue() == ""
        view.batch_end()
        assert out.getvalue() != ""

    asyncio.run(main())
