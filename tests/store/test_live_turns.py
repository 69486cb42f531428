"""The running turns read model: a turn is stalled from its ``turn.stalled`` until its
``turn.resumed`` (or its end); finished turns and finished runs are not listed."""

from __future__ import annotations

from datetime import datetime, timedelta

from baton.events.model import (
    Payload,
    TurnCompleted,
    TurnResumed,
    TurnStalled,
    TurnSubmitted,
)
from baton.store import Store
from baton.store.live_turns import live_turns
from tests.store.conftest import event
from tests.support.records import TS, run_record

SUBMITTED = TurnSubmitted(prompt_preview="go", prompt_bytes=2, prompt_sha256="0" * 64)


def _put(store: Store, run_id: str, *payloads: Payload, turn_id: str = "turn-1") -> None:
    for payload in payloads:
        seq = store.read_tx(
            lambda tx: tx.scalar(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", [run_id]
            )
        )
        store.append(event(seq + 1, run_id, payload).model_copy(update={"turn_id": turn_id}))
        store.flush_sync()


def test_a_stalled_turn_is_listed_with_its_silence_until_it_resumes(store: Store) -> None:
    _put(store, "run-1", SUBMITTED)
    [turn] = live_turns(store)
    assert not turn.stalled and turn.silence_ms(datetime.now()) == 0
    _put(store, "run-1", TurnStalled(silent_ms=60_000, threshold_ms=60_000, timeout_in_ms=90_000))
    [turn] = live_turns(store)
    ten_later = datetime.fromisoformat(TS.replace("Z", "+00:00")) + timedelta(seconds=10)
    assert turn.stalled and turn.stalled_at == TS
    assert turn.silence_ms(ten_later) == 70_000 and turn.timeout_in(ten_later) == 80_000
    assert turn.to_json(ten_later)["silent_ms"] == 70_000
    _put(store, "run-1", TurnResumed(silent_ms=70_000))
    [turn] = live_turns(store)
    assert not turn.stalled, "the agent spoke: the stall is cleared while the turn runs on"
    _put(store, "run-1", TurnCompleted(stop_reason="end_turn", duration_ms=1))
    assert live_turns(store) == []


def test_only_running_runs_count(store: Store) -> None:
    store.create_run(run_record("run-2"))
    _put(store, "run-1", SUBMITTED, TurnStalled(silent_ms=1, threshold_ms=1))
    _put(store, "run-2", SUBMITTED, TurnStalled(silent_ms=1, threshold_ms=1), turn_id="turn-9")
    assert {t.turn_id for t in live_turns(store)} == {"turn-1", "turn-9"}
    store.finish_run("run-2", "interrupted", TS)
    assert [t.run_id for t in live_turns(store)] == ["run-1"]
