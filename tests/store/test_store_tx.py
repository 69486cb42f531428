"""``Store.write``: a state change and its events in one transaction; wake-ups after commit."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from baton.errors import StoreError
from baton.store import Migration, Store
from baton.store.sqlite import SqliteStore
from baton.store.tx import StoreConflict, Tx

from .conftest import StoreFactory, event, run_record

NOTES = Migration("test.0001_notes", "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)")


def _open(open_store: StoreFactory) -> Store:
    store: Store = open_store(extra_migrations=[NOTES])
    store.create_run(run_record())
    return store


def _note(tx: Tx, note_id: str, body: str) -> str:
    tx.execute("INSERT INTO notes (id, body) VALUES (?, ?)", (note_id, body))
    tx.wake("notes", f"note:{note_id}")
    return note_id


def _notes(tx: Tx) -> list[str]:
    return [r[0] for r in tx.all("SELECT id FROM notes ORDER BY id")]


async def test_the_change_and_its_events_commit_together(open_store: StoreFactory) -> None:
    store = _open(open_store)
    try:
        subscription = store.subscribe("run-1")
        store.append(event(1))
        result = await store.write(lambda tx: _note(tx, "a", "x"), events=[event(2), event(3)])
        store.append(event(4))
        await store.flush()
        assert result == "a"
        assert store.read_tx(_notes) == ["a"]
        assert [e.seq for e in store.iter_events("run-1")] == [1, 2, 3, 4]
        got = [await asyncio.wait_for(anext(subscription), 5) for _ in range(4)]
        assert [e.seq for e in got] == [1, 2, 3, 4]
        subscription.close()
    finally:
        store.close()


async def test_a_failing_change_stores_neither_its_rows_nor_its_events(
    open_store: StoreFactory,
) -> None:
    store = _open(open_store)

    class Refused(Exception):
        pass

    def half(tx: Tx) -> None:
        _note(tx, "half", "written, then refused")
        raise Refused("no")

    try:
        subscription = store.subscribe("run-1")
        with pytest.raises(Refused):
            await store.write(half, events=[event(1)])
        await store.write(lambda tx: _note(tx, "b", "ok"), events=[event(2)])
        assert store.read_tx(_notes) == ["b"]
        assert [e.seq for e in store.iter_events("run-1")] == [2]  # a gap, never a lie
        first = await asyncio.wait_for(anext(subscription), 5)
        assert first.seq == 2
        subscription.close()
        # The store is still healthy, and seqs still strictly increase.
        with pytest.raises(StoreError, match="strictly increase"):
            await store.write(lambda tx: None, events=[event(2)])
    finally:
        store.close()


async def test_a_duplicate_row_is_a_store_conflict(open_store: StoreFactory) -> None:
    store = _open(open_store)
    try:
        await store.write(lambda tx: _note(tx, "a", "x"))
        with pytest.raises(StoreConflict):
            await store.write(lambda tx: _note(tx, "a", "again"))
        with pytest.raises(StoreError, match="cannot write"):
            store.read_tx(lambda tx: tx.execute("DELETE FROM notes"))
    finally:
        store.close()


async def test_topics_ring_after_commit_and_never_for_a_rollback(open_store: StoreFactory) -> None:
    store = _open(open_store)
    try:
        listener = await store.listener()
        rung = listener.subscribe("note:a")

        def refused(tx: Tx) -> None:
            _note(tx, "a", "x")
            raise ValueError("rolled back")

        with pytest.raises(ValueError):
            await store.write(refused)
        await store.flush()
        await asyncio.sleep(0)
        assert not rung.is_set()
        await store.write(lambda tx: _note(tx, "a", "x"))
        await asyncio.wait_for(rung.wait(), 5)
    finally:
        store.close()


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from baton.store import Migration, SqliteStore
    notes = Migration("test.0001_notes", "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)")
    store = SqliteStore.open(Path(sys.argv[1]), extra_migrations=[notes])
    def write(tx):
        tx.execute("INSERT INTO notes (id, body) VALUES ('child', 'hello')")
        tx.wake("notes")
    store.write_sync(write)
    store.close()
    """
)


async def test_another_process_wakes_us_after_its_commit(db_path: Path) -> None:
    store = SqliteStore.open(db_path, extra_migrations=[NOTES])
    store.create_run(run_record())
    try:
        listener = await store.listener()
        rung = listener.subscribe("notes")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, str(db_path), stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        await asyncio.wait_for(rung.wait(), 10)
        assert store.read_tx(_notes) == ["child"]
    finally:
        store.close()


def test_services_are_rows_any_process_can_find(open_store: StoreFactory) -> None:
    from baton.store.services_sql import (
        ServiceRecord,
        list_services,
        register_service,
        unregister_service,
    )

    store = _open(open_store)
    try:
        up = ServiceRecord("up-1", "up", 4242, "host", "boot", "2026-01-01T00:00:00.000Z")
        web = ServiceRecord(
            "serve-1",
            "serve",
            4343,
            "host",
            "boot",
            "2026-01-01T00:00:01.000Z",
            url="http://127.0.0.1:8765/",
            port=8765,
            meta={"token": False},
        )
        store.write_sync(lambda tx: register_service(tx, up))
        store.write_sync(lambda tx: register_service(tx, web))
        assert store.read_tx(lambda tx: list_services(tx, "serve")) == [web]
        assert store.read_tx(list_services) == [up, web]
        store.write_sync(lambda tx: unregister_service(tx, "up-1"))
        assert store.read_tx(list_services) == [web]
    finally:
        store.close()


async def test_a_request_keeps_its_deadline(open_store: StoreFactory) -> None:
    from baton.requests.ledger import Ledger
    from tests.requests.reqbuild import META, permission

    store = _open(open_store)
    try:
        ledger = Ledger(store)
        record = await ledger.create(
            permission(), jsonrpc_id=1, expires_at="2026-01-01T00:10:00.000Z", **META
        )
        assert (await ledger.get(record.request_id)).expires_at == "2026-01-01T00:10:00.000Z"
    finally:
        store.close()
