"""A store outage is ridden out (issue 30 item 3): writes wait, nothing is lost, it resumes.

* PostgreSQL stopped and started again under a store in use: queued writes and a read
  wait (the store says it is out, and why), then complete, each once; the doorbell
  listens again; past the outage limit the store gives up with one clear error;
* SQLite's disk full (a quota on the file, fault injection): the batch waits, the
  reason names the full disk, and everything is written once there is room.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.errors import StoreError
from baton.store.sqlite import SqliteBackend, SqliteStore, SqliteWriter
from baton.store.writer_connection import DEFAULT_BUSY_TIMEOUT_MS, connect_writer, prepare_files
from tests.support.pg_fixtures import postgres_reason
from tests.support.postgres import PostgresServer
from tests.support.records import run_record

TABLE = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"


def _note(number: int, body: str = "x") -> Any:
    return lambda tx: tx.execute("INSERT INTO notes (id, body) VALUES (?, ?)", (number, body))


def _notes(tx: Any) -> list[int]:
    return [int(r[0]) for r in tx.all("SELECT id FROM notes ORDER BY id")]


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """A server of the test's own: it is stopped and started again."""
    reason = postgres_reason()
    if reason is not None:
        if os.environ.get("BATON_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here but cannot run: {reason}")
        pytest.skip(f"PostgreSQL backend: {reason}")
    root = Path(tempfile.mkdtemp(prefix="baton-cluster-pgtest-"))
    try:
        os.chmod(root, 0o755)  # the server runs as its own unprivileged user
        with PostgresServer(root / "pg") as pg:
            yield pg
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_a_postgres_restart_is_ridden_out_and_nothing_is_written_twice(
    server: PostgresServer,
) -> None:
    from baton.store.pg import PgStore

    store = PgStore.open(server.socket_dsn(), outage_limit_s=120)
    try:
        await store.write(lambda tx: tx.execute(TABLE))
        store.create_run(run_record("run-1"))
        await store.write(_note(1))
        listener = await store.listener()
        rung = listener.subscribe("notes")
        server.stop()
        writes = [asyncio.ensure_future(store.write(_note(n))) for n in (2, 3)]
        read = asyncio.ensure_future(store.aread(_notes))
        await _until(lambda: store.outage is not None)
        outage = store.outage
        assert outage is not None and outage.reason, outage
        assert not any(w.done() for w in writes) and not read.done()  # waiting, not failed
        server.restart()
        await asyncio.wait_for(asyncio.gather(*writes), 60)
        assert await asyncio.wait_for(read, 60) in ([1], [1, 2], [1, 2, 3])
        assert await store.aread(_notes) == [1, 2, 3]  # each once
        assert store.outage is None
        rung.clear()

        def ring(tx: Any) -> None:
            tx.wake("notes")

        await store.write(ring)  # the doorbell listens again after the restart
        await asyncio.wait_for(rung.wait(), 60)
    finally:
        await store.aclose()


async def test_past_the_limit_the_store_gives_up_with_one_clear_error(
    server: PostgresServer,
) -> None:
    from baton.store.pg import PgStore

    store = PgStore.open(server.socket_dsn(), outage_limit_s=1.5)
    try:
        await store.write(lambda tx: tx.execute(TABLE))
        server.stop()
        with pytest.raises(StoreError, match=r"unreachable for 2 s"):
            await asyncio.wait_for(store.write(_note(1)), 60)
        with pytest.raises(StoreError, match="store failed"):
            await store.write(_note(2))
    finally:
        server.restart()
        await store.aclose()  # its failure was told already


class _Quota:
    """The disk's free room, as a page quota on every writer connection (fault injection)."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.lock = threading.Lock()


class _FullDiskBackend(SqliteBackend):
    def __init__(self, path: Path, quota: _Quota) -> None:
        super().__init__(path, busy_timeout_ms=DEFAULT_BUSY_TIMEOUT_MS)
        self.quota = quota

    def connect_writer(self) -> SqliteWriter:
        conn = connect_writer(self.path, DEFAULT_BUSY_TIMEOUT_MS)
        with self.quota.lock:
            conn.execute(f"PRAGMA max_page_count = {self.quota.pages}")
        self.writer = SqliteWriter(conn, self.path, DEFAULT_BUSY_TIMEOUT_MS)
        return self.writer


async def test_a_full_disk_waits_for_room_and_loses_nothing(tmp_path: Path) -> None:
    from baton.store.schema import STORE_MIGRATIONS

    path = tmp_path / "baton.db"
    prepare_files(path)
    quota = _Quota(100_000)
    store = SqliteStore._opened(
        _FullDiskBackend(path, quota),
        migrations=STORE_MIGRATIONS,
        batch_max=64,
        queue_max=1024,
        outage_limit_s=120,
    )
    try:
        await store.write(lambda tx: tx.execute(TABLE))
        pages = await store.aread(lambda tx: int(tx.scalar("PRAGMA page_count")))
        with quota.lock:
            quota.pages = pages + 2  # room for little more than nothing
        limit = f"PRAGMA max_page_count = {pages + 2}"
        await asyncio.wrap_future(store.execute_write(lambda conn: conn.execute(limit)))
        big = "y" * 200_000
        writes = [asyncio.ensure_future(store.write(_note(n, big))) for n in range(1, 4)]
        await _until(lambda: store.outage is not None)
        outage = store.outage
        assert outage is not None and "full" in outage.reason, outage
        assert not any(w.done() for w in writes)
        with quota.lock:
            quota.pages = 100_000  # the user freed space
        await asyncio.wait_for(asyncio.gather(*writes), 60)
        assert await store.aread(_notes) == [1, 2, 3] and store.outage is None
    finally:
        await store.aclose()


async def _until(check: Any, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # the writer thread's state: nothing to await but looking again
        if loop.time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.05)


def test_sqlite_full_is_an_outage_and_a_constraint_is_not(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "x.db", busy_timeout_ms=1)
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    assert "full" in (backend.transient(full) or "")
    assert backend.transient(sqlite3.IntegrityError("UNIQUE constraint failed")) is None
    assert backend.transient(OSError(28, "No space left on device")) is not None
