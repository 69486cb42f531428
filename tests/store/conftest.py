"""Helpers for the store tests: a fresh store per test and cheap event builders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.events.model import CanonicalEvent, Payload, TranscriptAssistant
from baton.store import Store
from tests.support.records import TS, run_record


def event(
    seq: int,
    run_id: str = "run-1",
    payload: Payload | None = None,
    *,
    raw: object = None,
    text: str | None = None,
) -> CanonicalEvent:
    if payload is None:
        payload = TranscriptAssistant(
            message_id="m1", text=text if text is not None else f"chunk {seq}"
        )
    return CanonicalEvent(
        type=payload.TYPE,
        seq=seq,
        run_id=run_id,
        session_id="sess-1",
        turn_id="turn-1",
        ts=TS,
        payload=payload,
        raw=raw,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "baton.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    store = Store.open(db_path)
    store.create_run(run_record())
    try:
        yield store
    finally:
        store.close()
