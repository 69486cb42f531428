"""The sequencer builds envelopes without validating them (:meth:`CanonicalEvent.stamped`):
the object, its JSON line and its stored form are those validation builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from baton.events.acp_normalizer import Draft
from baton.events.model import (
    CanonicalEvent,
    Payload,
    ProviderNotice,
    ToolExecutionProgressed,
    TranscriptAssistant,
    _plain_line,
    storable,
)
from baton.events.sequencer import Sequencer, format_ts

texts = st.text(st.characters(codec=None, categories=None), max_size=20)
raws = st.none() | st.dictionaries(texts, st.integers() | texts | st.none(), max_size=3)
payloads = st.one_of(
    st.builds(
        TranscriptAssistant,
        message_id=texts,
        text=texts,
        chunks=st.integers(1, 9),
        content_type=st.just("text"),
    ),
    st.builds(
        ProviderNotice,
        category=texts,
        severity=st.sampled_from(["info", "warning", "error"]),
        summary=texts,
    ),
    st.builds(
        ToolExecutionProgressed,
        tool_call_id=texts,
        title=texts,
        kind=st.just("other"),
        status=st.just("in_progress"),
    ),
)


def _validated(event: CanonicalEvent) -> CanonicalEvent:
    data: dict[str, Any] = {name: getattr(event, name) for name in CanonicalEvent.model_fields}
    return CanonicalEvent(**data)


@given(
    payloads,
    st.none() | texts,
    st.none() | texts,
    raws,
    st.lists(st.sampled_from(["late", "unencodable_text"]), max_size=2),
)
def test_a_stamped_event_is_the_validated_one(
    payload: Payload, session_id: str | None, turn_id: str | None, raw: Any, flags: list[str]
) -> None:
    event = Sequencer("run-1", start_seq=4).stamp(
        payload, session_id=session_id, turn_id=turn_id, raw=raw, flags=flags
    )
    reference = _validated(event)
    assert event == reference
    assert event.model_fields_set == reference.model_fields_set
    assert event.to_json() == reference.to_json()
    assert CanonicalEvent.model_validate_json(event.to_json()) == reference.model_copy()


def test_an_untyped_identity_still_goes_through_validation() -> None:
    payload = TranscriptAssistant(message_id="m", text="t", chunks=1, content_type="text")
    with pytest.raises(ValueError):
        Sequencer("run-1").stamp(payload, session_id=42)  # type: ignore[arg-type]


@given(st.floats(1e9, 4e9), st.lists(st.floats(0, 0.004), min_size=1, max_size=30))
def test_timestamps_are_those_of_the_clock_however_close_together(
    base: float, deltas: list[float]
) -> None:
    """The sequencer reuses the last timestamp within one millisecond: the same text."""
    times = sorted(base + d for d in deltas)
    clock = iter(times)
    sequencer = Sequencer("r", clock=lambda: next(clock))
    for now in times:
        second = int(now)
        expected = format_ts(second).removesuffix(".000Z") + f".{int((now - second) * 1000):03d}Z"
        assert sequencer._ts() == expected


@given(
    st.lists(
        st.tuples(payloads, st.none() | texts, raws, st.sampled_from([(), ("late",)])),
        max_size=6,
    ),
    st.none() | texts,
    st.none() | texts,
)
def test_a_run_stamped_at_once_is_each_draft_stamped_at_one_moment(
    drafts: list[tuple[Payload, str | None, Any, tuple[str, ...]]],
    session_id: str | None,
    turn_id: str | None,
) -> None:
    run = [Draft(payload, raw, own, flags) for payload, own, raw, flags in drafts]
    at_once = Sequencer("r", start_seq=2, clock=lambda: 1.7e9).stamp_all(
        run, session_id=session_id, turn_id=turn_id
    )
    one_by_one = Sequencer("r", start_seq=2, clock=lambda: 1.7e9)
    each = [
        one_by_one.stamp(
            d.payload, session_id=session_id, turn_id=d.turn_id or turn_id, raw=d.raw, flags=d.flags
        )
        for d in run
    ]
    assert at_once == each
    assert [e.to_json() for e in at_once] == [e.to_json() for e in each]
    assert [e.seq for e in at_once] == list(range(3, 3 + len(run)))


TRACE = Path(__file__).parents[1] / "cli" / "data" / "live_view_trace.ndjson"


def _serializer_line(event: CanonicalEvent) -> str:
    return event.__pydantic_serializer__.to_json(event).decode()


def test_the_plain_line_is_the_serializers_over_a_recorded_trace() -> None:
    """Every event of ten fake-agent scenarios (17 types), without raw and flags so that
    the envelope is written by baton: byte for byte what the serializer writes."""
    events = [CanonicalEvent.model_validate_json(line) for line in TRACE.read_text().splitlines()]
    assert len({e.type for e in events}) >= 15
    for event in events:
        plain = event.model_copy(update={"raw": None, "flags": []})
        assert plain.to_json() == _serializer_line(plain) == _plain_line(plain.__dict__)
        if event.raw is not None or event.flags:  # the serializer's own path
            assert event.to_json() == _serializer_line(event)


@given(payloads, texts, st.none() | texts, st.none() | texts, texts, st.integers(1, 2**70))
def test_the_plain_line_is_the_serializers_for_any_ids(
    payload: Payload, run_id: str, session_id: str | None, turn_id: str | None, ts: str, seq: int
) -> None:
    """Any text in the ids and the timestamp (quotes, controls, non-BMP, lone surrogates):
    the same line, or the same refusal (which :func:`storable` then repairs)."""
    event = CanonicalEvent.stamped(
        payload.TYPE, seq, run_id, session_id, turn_id, ts, payload, None, []
    )
    try:
        expected = _serializer_line(event)
    except PydanticSerializationError:
        with pytest.raises(PydanticSerializationError):
            _plain_line(event.__dict__)
        assert "unencodable_text" in storable(event).flags
        return
    assert _plain_line(event.__dict__) == expected
