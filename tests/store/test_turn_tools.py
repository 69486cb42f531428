"""A finished turn's recorded tool calls, read back for its reminder (issue 30 item 4)."""

from __future__ import annotations

from typing import Any

from baton.events.model import (
    CanonicalEvent,
    Payload,
    ToolExecutionCompleted,
    ToolOutput,
    TurnSubmitted,
)
from baton.store.turn_tools import recorded_calls
from baton.team.prompts import recorded_in
from baton.team.records import TurnRecord
from baton.team.states import DispatchState
from tests.store.conftest import StoreFactory
from tests.support.records import TS, run_record


def _event(seq: int, run_id: str, turn_id: str, payload: Payload) -> CanonicalEvent:
    return CanonicalEvent(
        type=payload.TYPE,
        seq=seq,
        run_id=run_id,
        session_id="s",
        turn_id=turn_id,
        ts=TS,
        payload=payload,
    )


def _tool(title: str, status: str, tail: str) -> ToolExecutionCompleted:
    return ToolExecutionCompleted(
        tool_call_id=title,
        title=title,
        kind="execute",
        status=status,
        output=ToolOutput(tail=tail, total_bytes=len(tail), sha256="0" * 64, truncated=False),
    )


def _submitted(digest: str) -> TurnSubmitted:
    return TurnSubmitted(prompt_preview="p", prompt_bytes=1, prompt_sha256=digest)


def test_the_reminder_reads_back_the_turn_its_prompt_digest_names(
    open_store: StoreFactory,
) -> None:
    store: Any = open_store()
    try:
        store.create_run(run_record("run-1"))
        store.create_run(run_record("run-1.QA.e1"))  # a cluster holder's run of the slot
        store.create_run(run_record("run-9.QA.e1"))  # another coordinator's: never read
        d1, d2 = "a" * 64, "b" * 64
        for e in (
            _event(1, "run-1", "t1", _submitted(d1)),
            _event(2, "run-1", "t1", _tool("sh: earlier", "completed", "x")),
            _event(1, "run-1.QA.e1", "t2", _submitted(d2)),
            _event(2, "run-1.QA.e1", "t2", _tool("sh: make test", "completed", "12 passed")),
            _event(3, "run-1.QA.e1", "t2", _tool("report: write_report", "failed", "refused")),
            _event(1, "run-9.QA.e1", "t9", _submitted(d2)),
            _event(2, "run-9.QA.e1", "t9", _tool("sh: other team", "completed", "")),
        ):
            store.append(e)
        store.flush_sync()
        calls = store.read_tx(lambda tx: recorded_calls(tx, "run-1", "QA", d2))
        assert [(c.title, c.status, c.output) for c in calls] == [
            ("sh: make test", "completed", "12 passed"),
            ("report: write_report", "failed", "refused"),
        ]
        assert store.read_tx(lambda tx: recorded_calls(tx, "run-1", "QA", "c" * 64)) == []
        turn = TurnRecord(
            task_id="TASK-1",
            dispatch=1,
            slot="QA",
            role="QA",
            kind="work",
            state=DispatchState.FINISHED,
            started_at=TS,
            run_id="run-1",
            prompt_sha256=d1,
        )
        (record,) = recorded_in(store)(turn)
        assert (record.title, record.status, record.is_report) == (
            "sh: earlier",
            "completed",
            False,
        )
    finally:
        store.close()
