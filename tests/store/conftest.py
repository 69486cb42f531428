"""Helpers for the store tests: a fresh store per test and cheap event builders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.events.model import CanonicalEvent, Payload, TranscriptAssistant
from baton.store import RunRecord, Store

TS = "2026-01-02T03:04:05.678Z"


def run_record(run_id: str = "run-1", **overrides: object) -> RunRecord:
    fields: dict[str, object] = {
        "run_id": run_id,
        "kind": "run",
        "agent": "fake",
        "cwd": "/work",
        "status": "running",
        "created_at": TS,
    }
    fields.update(overrides)
    return RunRecord(**fields)  # type: ignore[arg-type]


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
