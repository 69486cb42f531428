"""Plain-data builders shared by store and web tests."""

from __future__ import annotations

from typing import Any

from baton.store.records import RunRecord

TS = "2026-01-02T03:04:05.678Z"


def run_record(run_id: str = "run-1", **overrides: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "kind": "run",
        "agent": "fake",
        "cwd": "/work",
        "status": "running",
        "created_at": TS,
    }
    fields.update(overrides)
    return RunRecord(**fields)
