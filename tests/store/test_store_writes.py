"""Seq enforcement, runs and sessions, flush semantics, execute_write, failures."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from baton.errors import StoreError
from baton.events.model import CanonicalEvent, TranscriptAssistant
from baton.store import SessionRecord, Store
from baton.store.sqlite import SqliteStore

from .conftest import TS, StoreFactory, event, run_record

# ----------------------------------------------------------------------- seqs


def test_seqs_must_strictly_increase(store: Store) -> None:
    store.append(event(1))
    store.append(event(2))
    with pytest.raises(StoreError, match="seq 2 does not follow 2"):
        store.append(event(2))
    with pytest.raises(StoreError, match="seq 1 does not follow 2"):
        store.append(event(1))
    store.append(event(5))  # gaps are allowed, only order is enforced
    store.flush_sync()
    assert [e.seq for e in store.iter_events("run-1")] == [1, 2, 5]


def test_a_batch_is_queued_all_or_none(store: Store) -> None:
    store.create_run(run_record("run-2"))
    store.append_all([event(1), event(1, "run-2"), event(2), event(2, "run-2")])
    with pytest.raises(StoreError, match="seq 3 does not follow 3"):
        store.append_all([event(3), event(4, "run-2"), event(3)])  # the last is out of order
    with pytest.raises(StoreError, match="seq 2 does not follow 2"):
        store.append_all([event(2, "run-2")])
    store.append_all([event(3), event(3, "run-2")])  # nothing of the refused batch counted
    store.flush_sync()
    assert [e.seq for e in store.iter_events("run-1")] == [1, 2, 3]
    assert [e.seq for e in store.iter_events("run-2")] == [1, 2, 3]


def test_seqs_are_per_run(store: Store) -> None:
    store.create_run(run_record("run-2"))
    store.append(event(1, "run-1"))
    store.append(event(1, "run-2"))
    store.append(event(2, "run-2"))
    store.flush_sync()
    assert store.last_seq("run-1") == 1
    assert store.last_seq("run-2") == 2


def test_unknown_run_is_refused_at_append(store: Store) -> None:
    with pytest.raises(StoreError, match="unknown run 'nope'"):
        store.append(event(1, "nope"))


def test_reopened_store_continues_from_committed_seq(
    open_store: StoreFactory, store: Store
) -> None:
    for seq in (1, 2, 3):
        store.append(event(seq))
    store.close()
    with open_store() as again:
        with pytest.raises(StoreError, match="does not follow 3"):
            again.append(event(3))
        again.append(event(4))
        again.flush_sync()
        assert again.last_seq("run-1") == 4


def test_unserializable_event_is_refused_and_seq_not_consumed(store: Store) -> None:
    bad = CanonicalEvent(
        type="transcript.assistant",
        seq=1,
        run_id="run-1",
        ts=TS,
        payload=TranscriptAssistant(message_id="m", text="lone surrogate \ud800"),
    )
    with pytest.raises(StoreError, match="cannot be serialized"):
        store.append(bad)
    with pytest.raises(StoreError, match="cannot be serialized"):
        store.append(event(1, raw={"not json": object()}))
    store.append(event(1))
    store.flush_sync()
    assert store.last_seq("run-1") == 1


# ---------------------------------------------------------------- runs, sessions


def test_runs(store: Store) -> None:
    store.create_run(run_record("run-2", created_at="2026-02-01T00:00:00.000Z", meta={"k": "ü"}))
    with pytest.raises(StoreError, match="cannot create run 'run-2'"):
        store.create_run(run_record("run-2"))
    assert [r.run_id for r in store.list_runs()] == ["run-2", "run-1"]
    assert [r.run_id for r in store.list_runs(limit=1)] == ["run-2"]
    got = store.get_run("run-2")
    assert got == run_record("run-2", created_at="2026-02-01T00:00:00.000Z", meta={"k": "ü"})
    assert store.get_run("nope") is None

    store.finish_run("run-2", "completed", "2026-02-01T00:01:00.000Z")
    store.finish_run("run-2", "completed", "2026-02-01T00:09:00.000Z")  # same status: no-op
    finished = store.get_run("run-2")
    assert finished is not None
    finished_as = ("completed", "2026-02-01T00:01:00.000Z")
    assert (finished.status, finished.ended_at) == finished_as
    with pytest.raises(StoreError, match="already finished as 'completed'"):
        store.finish_run("run-2", "failed", TS)
    store.finish_run("run-2", "interrupted", TS, if_running=True)  # another's judgement
    again = store.get_run("run-2")
    assert again is not None and (again.status, again.ended_at) == finished_as
    store.finish_run("run-1", "interrupted", TS, if_running=True)  # still running: moved
    interrupted = store.get_run("run-1")
    assert interrupted is not None and interrupted.status == "interrupted"
    with pytest.raises(StoreError, match="unknown run"):
        store.finish_run("nope", "failed", TS)
    with pytest.raises(StoreError, match="not a terminal run status"):
        store.finish_run("run-2", "running", TS)


def test_run_record_validates() -> None:
    with pytest.raises(ValueError, match="unknown run status"):
        run_record(status="paused")


def test_run_meta_must_be_json(store: Store) -> None:
    with pytest.raises(StoreError, match="meta is not JSON"):
        store.create_run(run_record("run-x", meta={"x": object()}))


def _session(session_id: str, identity_key: str, **overrides: object) -> SessionRecord:
    fields: dict[str, object] = {
        "session_id": session_id,
        "agent": "fake",
        "agent_session_id": f"agent-{session_id}",
        "cwd": "/work",
        "identity_key": identity_key,
        "created_at": TS,
        "updated_at": TS,
    }
    fields.update(overrides)
    return SessionRecord(**fields)  # type: ignore[arg-type]


def test_sessions(store: Store) -> None:
    first = _session(
        "s1", "fake:/work:planner", role="planner", run_id="run-1", state={"mode": "ask"}
    )
    store.upsert_session(first)
    assert store.get_session("s1") == first
    assert store.find_session("fake:/work:planner") == first
    assert store.get_session("nope") is None
    assert store.find_session("nope") is None

    updated = _session(
        "s1",
        "fake:/work:planner",
        created_at="2030-01-01T00:00:00.000Z",
        updated_at="2026-03-01T00:00:00.000Z",
        state={"mode": "code"},
    )
    store.upsert_session(updated)
    got = store.get_session("s1")
    assert got is not None
    assert got.created_at == TS  # kept from the first insert
    assert (got.updated_at, got.state, got.role) == (
        "2026-03-01T00:00:00.000Z",
        {"mode": "code"},
        None,
    )

    store.upsert_session(_session("s2", "fake:/work:coder", updated_at="2026-04-01T00:00:00.000Z"))
    assert [s.session_id for s in store.list_sessions()] == ["s2", "s1"]
    assert [s.session_id for s in store.list_sessions(limit=1)] == ["s2"]
    with pytest.raises(StoreError, match="cannot save session 's3'"):
        store.upsert_session(_session("s3", "fake:/work:coder"))  # identity key taken


# ----------------------------------------------------------------------- flush


@pytest.mark.sqlite_only("reads the SQLite file from a second connection")
async def test_flush_is_the_acknowledgement_point(store: Store, db_path: Path) -> None:
    for seq in range(1, 101):
        await store.append_async(event(seq))
    await store.flush()
    # Committed means visible to an independent connection.
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("SELECT count(*), max(seq) FROM events").fetchone() == (100, 100)
    finally:
        conn.close()
    await store.flush()  # nothing pending: returns anyway
    store.flush_sync(timeout=10)


@pytest.mark.sqlite_only("holds the writer with execute_write")
def test_flush_sync_times_out_while_the_writer_is_held(store: Store) -> None:
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    held = store.execute_write(hold)
    entered.wait()
    store.append(event(1))
    with pytest.raises(StoreError, match="did not complete within"):
        store.flush_sync(timeout=0.05)
    release.set()
    held.result()
    store.flush_sync()
    assert store.last_seq("run-1") == 1


async def test_append_async_waits_when_the_queue_is_full(db_path: Path) -> None:
    with SqliteStore.open(db_path, queue_max=4) as store:
        store.create_run(run_record())
        entered, release = threading.Event(), threading.Event()

        def hold(conn: sqlite3.Connection) -> None:
            entered.set()
            release.wait()

        held = store.execute_write(hold)
        entered.wait()

        async def produce() -> None:
            for seq in range(1, 11):
                await store.append_async(event(seq))

        producer = asyncio.create_task(produce())
        await asyncio.sleep(0)  # the producer runs until the queue is full
        assert store.queued == 4
        assert not producer.done()
        release.set()
        await producer
        await store.flush()
        held.result()
        assert store.last_seq("run-1") == 10


# -------------------------------------------------------------- execute_write


@pytest.mark.sqlite_only("execute_write (raw connection)")
async def test_execute_write_is_ordered_with_events(store: Store) -> None:
    for seq in range(1, 51):
        store.append(event(seq))
    seen = store.execute_write(lambda c: c.execute("SELECT count(*) FROM events").fetchone()[0])
    store.append(event(51))
    assert await asyncio.wrap_future(seen) == 50
    await store.flush()
    assert store.last_seq("run-1") == 51


@pytest.mark.sqlite_only("execute_write (raw connection)")
def test_execute_write_result_is_delivered_after_commit(store: Store, db_path: Path) -> None:
    seen_on_done: list[int] = []
    checked = threading.Event()

    def update(conn: sqlite3.Connection) -> str:
        conn.execute("UPDATE runs SET cwd = 'changed' WHERE run_id = 'run-1'")
        return "ok"

    def on_done(_: object) -> None:
        other = sqlite3.connect(db_path)
        try:
            seen_on_done.append(other.execute("SELECT cwd = 'changed' FROM runs").fetchone()[0])
        finally:
            other.close()
            checked.set()

    future = store.execute_write(update)
    future.add_done_callback(on_done)
    assert future.result() == "ok"
    checked.wait()
    assert seen_on_done == [1]


@pytest.mark.sqlite_only("execute_write (raw connection)")
def test_a_failing_write_rolls_back_alone(store: Store) -> None:
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    def failing(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE runs SET cwd = 'half-done'")
        raise RuntimeError("boom")

    store.execute_write(hold)
    entered.wait()
    # Queue events, a failing write and a good write: they share one batch.
    store.append(event(1))
    bad = store.execute_write(failing)
    store.append(event(2))
    good = store.execute_write(lambda c: c.execute("UPDATE runs SET agent = 'renamed'").rowcount)
    release.set()
    with pytest.raises(RuntimeError, match="boom"):
        bad.result()
    assert good.result() == 1
    store.flush_sync()
    run = store.get_run("run-1")
    assert run is not None
    assert (run.cwd, run.agent) == ("/work", "renamed")
    assert store.last_seq("run-1") == 2


@pytest.mark.sqlite_only("execute_write (raw connection)")
def test_cancelled_write_never_runs(store: Store) -> None:
    entered, release = threading.Event(), threading.Event()
    ran: list[bool] = []

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    store.execute_write(hold)
    entered.wait()
    cancelled = store.execute_write(lambda c: ran.append(True))
    assert cancelled.cancel()
    release.set()
    store.flush_sync()
    assert ran == []


@pytest.mark.sqlite_only("execute_write (raw connection)")
def test_sync_writes_from_a_write_function_are_refused(store: Store) -> None:
    def nested(conn: sqlite3.Connection) -> None:
        store.create_run(run_record("inner"))

    with pytest.raises(StoreError, match="would deadlock"):
        store.execute_write(nested).result()


@pytest.mark.sqlite_only("read() (raw connection)")
def test_read_runs_in_a_snapshot(store: Store) -> None:
    store.append(event(1))
    store.flush_sync()
    assert store.read(lambda c: c.execute("SELECT count(*) FROM events").fetchone()[0]) == 1
    with pytest.raises(sqlite3.OperationalError):
        store.read(lambda c: c.execute("DELETE FROM events"))  # read-only connection


# --------------------------------------------------------------------- failures


def _poison_next_seq(db_path: Path, seq: int) -> None:
    """Commit (run-1, seq) behind the store's back, so its own insert collides."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO events VALUES ('run-1', ?, 'transcript.assistant', NULL, NULL, 'ts', '{}')",
            (seq,),
        )
    finally:
        conn.close()


async def test_a_failed_batch_surfaces_and_the_store_refuses_writes(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore.open(db_path)
    store.create_run(run_record())
    store.append(event(1))
    await store.flush()
    _poison_next_seq(db_path, 2)
    store.append(event(2))
    with pytest.raises(StoreError, match="store write failed") as failed:
        await store.flush()
    assert isinstance(failed.value.__cause__, sqlite3.IntegrityError)
    with pytest.raises(StoreError, match="store failed"):
        store.append(event(3))
    with pytest.raises(StoreError, match="store failed"):
        await store.flush()
    with pytest.raises(StoreError, match="store failed"):
        store.execute_write(lambda c: None)
    assert "refusing further writes" in caplog.text
    assert store.last_seq("run-1") == 2  # reads still work; seq 2 is the foreign row
    store.close()  # already reported: close does not raise again
    store.close()


def test_close_raises_a_failure_nobody_saw(db_path: Path) -> None:
    store = SqliteStore.open(db_path)
    store.create_run(run_record())
    store.append(event(1))
    store.flush_sync()
    _poison_next_seq(db_path, 2)
    store.append(event(2))
    with pytest.raises(StoreError, match="store failed"):
        store.close()
    store.close()
