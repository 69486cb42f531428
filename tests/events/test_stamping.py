"""The sequencer builds envelopes without validating them (:meth:`CanonicalEvent.stamped`):
the object, its JSON line and its stored form are those validation builds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.events.model import (
    CanonicalEvent,
    Payload,
    ProviderNotice,
    ToolExecutionProgressed,
    TranscriptAssistant,
)
from baton.events.sequencer import Sequencer

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
