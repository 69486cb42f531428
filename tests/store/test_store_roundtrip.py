"""Events come back exactly as appended: every payload type, any Unicode, byte for byte."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel

from baton.events.model import PAYLOAD_TYPES, CanonicalEvent, Payload
from baton.store import Store

from .conftest import event

UNICODE_SAMPLES = [
    "plain ascii",
    "e\u0301 a\u0308 n\u0303 \u1e9b\u0323 — combining marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334 zalgo",
    "👩‍👩‍👧‍👦 family, 🇯🇵 flag, 👍🏽 skin tone, 🧑‍💻",
    "שלום עולם (Hebrew, RTL)",
    "مرحبا بالعالم (Arabic, RTL)",
    "mixed \u202eRTL override\u202c and \u2067isolate\u2069",
    "中文, 日本語, 한국어",
    "astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and 𓀀",
    'quotes " \\ / and controls \n \t \r \x00 \x1f \u2028 \u2029',
    "BOM \ufeff and noncharacter \uffff",
]


def _sample(annotation: Any, text: str) -> Any:
    """A non-default value for a field type, filling optional parts too."""
    origin = get_origin(annotation)
    if annotation is str:
        return text
    if annotation is bool:
        return True
    if annotation is int:
        return 7
    if annotation is float:
        return 1.25
    if origin is Literal:
        return get_args(annotation)[0]
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        return _sample(options[0], text)
    if origin is list:
        return [_sample(get_args(annotation)[0], text)]
    if origin is dict:
        return {"key": text, "n": [1, 2.5, None, True]}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _build(annotation, text)
    return {"any": text, "nested": {"list": [text, 1, None]}}  # JsonValue


def _build(model: type[BaseModel], text: str) -> Any:
    fields = {name: _sample(info.annotation, text) for name, info in model.model_fields.items()}
    if model.__name__ == "ArtifactGenerated" or model.__name__ == "ArtifactViewed":
        fields["registered"] = False
    return model(**fields)


def all_payloads(text: str) -> list[Payload]:
    return [_build(cls, text) for cls in PAYLOAD_TYPES.values()]


def test_every_payload_type_is_sampled() -> None:
    built = {p.TYPE for p in all_payloads("x")}
    assert built == set(PAYLOAD_TYPES)


@pytest.mark.sqlite_only("reads the raw SQLite column")
def test_round_trip_is_byte_exact(store: Store) -> None:
    appended: list[CanonicalEvent] = []
    seq = 0
    for text in UNICODE_SAMPLES:
        for payload in all_payloads(text):
            seq += 1
            appended.append(event(seq, payload=payload, raw={"native": text, "n": seq}))
    for e in appended:
        store.append(e)
    store.flush_sync()

    lines = list(store.iter_event_json("run-1"))
    assert lines == [e.to_json() for e in appended]
    # Byte-exact at the SQLite level too, not only after Python decoding.
    blobs = store.read(
        lambda c: [r[0] for r in c.execute("SELECT CAST(json AS BLOB) FROM events ORDER BY seq")]
    )
    assert blobs == [e.to_json().encode("utf-8") for e in appended]
    parsed = list(store.iter_events("run-1"))
    assert parsed == appended
    assert [p.to_json() for p in parsed] == lines


@pytest.mark.sqlite_only("reads the raw SQLite columns")
def test_columns_mirror_the_envelope(store: Store) -> None:
    e = event(1, text="x")
    store.append(e)
    store.flush_sync()
    row = store.read(
        lambda c: c.execute(
            "SELECT run_id, seq, type, session_id, turn_id, ts FROM events"
        ).fetchone()
    )
    assert row == (e.run_id, e.seq, e.type, e.session_id, e.turn_id, e.ts)


def test_large_payload_round_trips(store: Store) -> None:
    big = "ü🙂" * 200_000
    e = event(1, text=big)
    store.append(e)
    store.flush_sync()
    assert list(store.iter_event_json("run-1")) == [e.to_json()]


def test_paging_after_seq_and_limit(store: Store) -> None:
    events = [event(s) for s in range(1, 2501)]
    for e in events:
        store.append(e)
    store.flush_sync()
    assert [e.seq for e in store.iter_events("run-1")] == list(range(1, 2501))
    assert [e.seq for e in store.iter_events("run-1", after_seq=998, limit=5)] == [
        999,
        1000,
        1001,
        1002,
        1003,
    ]
    assert len(list(store.iter_event_json("run-1", after_seq=1000, limit=1500))) == 1500
    assert list(store.iter_event_json("run-1", after_seq=2500)) == []
    assert list(store.iter_event_json("run-1", limit=0)) == []
    assert list(store.iter_event_json("no-such-run")) == []
    assert store.last_seq("run-1") == 2500
    assert store.last_seq("no-such-run") == 0
