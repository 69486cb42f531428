"""Session files, configuration and the output window (pure or filesystem only)."""

import json
from pathlib import Path

from baton.agents.builtin.config import DEFAULT_STEP_TIMEOUT, AgentConfig
from baton.agents.builtin.shell import OutputTail
from baton.agents.builtin.store import (
    MAX_STRING,
    MAX_TURNS,
    SessionStore,
    StoredSession,
    TurnRecord,
    new_session_id,
)


def record(cwd: str = "/w", updated: str = "2026-01-01T00:00:00.000Z") -> StoredSession:
    return StoredSession(
        session_id=new_session_id(), cwd=cwd, created_at=updated, updated_at=updated
    )


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    saved = record()
    saved.add_turn(
        TurnRecord(1, ({"sessionUpdate": "agent_message_chunk", "x": "y"},)),
        "2026-01-02T00:00:00.000Z",
    )
    store.save(saved)
    loaded = store.load(saved.session_id)
    assert loaded == saved
    assert [p.name for p in (tmp_path / "sessions").iterdir()] == [f"{saved.session_id}.json"]


def test_history_is_bounded(tmp_path: Path) -> None:
    saved = record()
    for number in range(1, MAX_TURNS + 6):
        saved.add_turn(TurnRecord(number, ({"text": "x" * (MAX_STRING * 2)},)), "t")
    assert [t.number for t in saved.turns] == list(range(6, MAX_TURNS + 6))
    assert saved.turn_count == MAX_TURNS + 5
    text = saved.turns[0].updates[0]["text"]
    assert len(text) < MAX_STRING + 100 and "characters not stored" in text


def test_unknown_or_unreadable_sessions_are_missing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    assert store.load(new_session_id()) is None
    assert store.load("../../etc/passwd") is None
    broken = new_session_id()
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / f"{broken}.json").write_text("{not json")
    assert store.load(broken) is None
    (tmp_path / "sessions" / f"{new_session_id()}.json").write_text(json.dumps({"version": 99}))
    assert store.list() == []


def test_list_is_newest_first_and_filters_by_cwd(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    old, new, elsewhere = (
        record(updated="2026-01-01"),
        record(updated="2026-02-01"),
        record("/o", "2026-03-01"),
    )
    for r in (old, new, elsewhere):
        store.save(r)
    assert [r.session_id for r in store.list()] == [
        elsewhere.session_id,
        new.session_id,
        old.session_id,
    ]
    assert [r.session_id for r in store.list("/w")] == [new.session_id, old.session_id]
    assert elsewhere.summary() == {
        "sessionId": elsewhere.session_id,
        "cwd": "/o",
        "updatedAt": "2026-03-01",
    }


def test_config_from_env(tmp_path: Path) -> None:
    assert AgentConfig.from_env(
        {"BATON_AGENT_STATE_DIR": "/s", "XDG_DATA_HOME": "/x"}
    ).state_dir == Path("/s")
    assert AgentConfig.from_env({"XDG_DATA_HOME": "/x"}).state_dir == Path("/x/baton-builtin")
    assert AgentConfig.from_env({"HOME": "/h"}).state_dir == Path("/h/.local/share/baton-builtin")
    assert (
        AgentConfig.from_env({"HOME": "/h", "BATON_BUILTIN_STEP_TIMEOUT": "2.5"}).step_timeout
        == 2.5
    )
    for bad in ("0", "-1", "soon", "inf", "nan"):
        assert (
            AgentConfig.from_env({"HOME": "/h", "BATON_BUILTIN_STEP_TIMEOUT": bad}).step_timeout
            == DEFAULT_STEP_TIMEOUT
        )


def test_output_tail_keeps_the_last_bytes() -> None:
    tail = OutputTail(cap=4)
    tail.add(b"ab")
    assert tail.text() == "ab"
    for chunk in (b"cdef", b"gh", b"ij"):
        tail.add(chunk)
    assert tail.total == 10
    assert tail.text() == "[output truncated: showing the last 4 of 10 bytes]\nghij"
