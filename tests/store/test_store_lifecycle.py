"""Open/close lifecycle, file permissions, migrations, and no leaked fds or threads."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from baton.errors import StoreError
from baton.store import CORE_MIGRATIONS, Migration, apply_migrations
from baton.store.migrations import split_statements
from baton.store.schema import STORE_MIGRATIONS
from baton.store.sqlite import SqliteStore

from .conftest import event, run_record


def test_close_is_idempotent_and_later_use_raises(db_path: Path) -> None:
    store = SqliteStore.open(db_path)
    store.create_run(run_record())
    store.append(event(1))
    store.close()  # drains the queued event
    store.close()
    assert store.closed
    for call in (
        lambda: store.append(event(2)),
        lambda: store.execute_write(lambda c: None),
        lambda: store.flush_sync(),
        lambda: store.create_run(run_record("run-2")),
        lambda: store.list_runs(),
        lambda: store.get_run("run-1"),
        lambda: store.last_seq("run-1"),
        lambda: list(store.iter_events("run-1")),
        lambda: store.read(lambda c: None),
        lambda: store.subscribe(),
    ):
        with pytest.raises(StoreError, match="closed"):
            call()
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(store.flush())
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(store.append_async(event(2)))
    with SqliteStore.open(db_path) as again:
        assert again.last_seq("run-1") == 1


def test_close_from_a_write_function_is_refused(db_path: Path) -> None:
    with SqliteStore.open(db_path) as store, pytest.raises(StoreError, match="would deadlock"):
        store.execute_write(lambda c: store.close()).result()


def test_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new-dir" / "baton.db"
    with SqliteStore.open(path) as store:
        store.create_run(run_record())
        store.append(event(1))
        store.flush_sync()
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode)
            assert mode == 0o600, (suffix, oct(mode))
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_pragmas(db_path: Path) -> None:
    with SqliteStore.open(db_path) as store:
        assert store.read(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0]) == "wal"
        settings = store.execute_write(
            lambda c: tuple(
                c.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("synchronous", "foreign_keys", "busy_timeout")
            )
        ).result()
        assert settings == (2, 1, 5000)  # FULL, ON, ms


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_no_fd_or_thread_leak(tmp_path: Path) -> None:
    def cycle(i: int) -> None:
        store = SqliteStore.open(tmp_path / "leak.db")
        if store.get_run(f"run-{i}") is None:
            store.create_run(run_record(f"run-{i}"))
        subscription = store.subscribe(f"run-{i}")
        for seq in range(1, 21):
            store.append(event(seq, f"run-{i}"))
        store.flush_sync()
        assert len(list(store.iter_events(f"run-{i}"))) == 20
        assert store.list_runs()
        subscription.close()
        store.close()

    cycle(0)  # warm up lazily created module state
    fds, threads = _fd_count(), threading.active_count()
    for i in range(1, 21):
        cycle(i)
    assert _fd_count() == fds
    assert threading.active_count() == threads


# ------------------------------------------------------------------ migrations


def _applied(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT name, applied_at FROM schema_migrations ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


def test_upgrade_from_an_older_schema(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    old = sqlite3.connect(db_path, isolation_level=None)
    apply_migrations(old, CORE_MIGRATIONS[:1])  # a baton that only had runs
    old.execute(
        "INSERT INTO runs (run_id, kind, agent, cwd, status, created_at)"
        " VALUES ('old-run', 'run', 'fake', '/w', 'completed', 'then')"
    )
    old.close()

    notes_step = Migration(
        "test.0001_notes",
        """
        CREATE TABLE notes (id TEXT PRIMARY KEY, note TEXT DEFAULT 'a;b');  -- ; in a comment
        CREATE TRIGGER notes_touch AFTER INSERT ON notes BEGIN
            UPDATE notes SET note = note || ';' WHERE id = new.id;
        END;
        """,
    )
    with SqliteStore.open(db_path, extra_migrations=[notes_step]) as store:
        run = store.get_run("old-run")
        assert run is not None and run.status == "completed"
        store.create_run(run_record())
        store.append(event(1))
        store.flush_sync()
        store.execute_write(lambda c: c.execute("INSERT INTO notes (id) VALUES ('r')")).result()
        assert store.read(lambda c: c.execute("SELECT note FROM notes").fetchone()[0]) == "a;b;"
    names = [name for name, _ in _applied(db_path)]
    assert names == [m.name for m in STORE_MIGRATIONS] + ["test.0001_notes"]

    before = _applied(db_path)
    with SqliteStore.open(db_path, extra_migrations=[notes_step]) as store:  # nothing to do
        assert store.last_seq("run-1") == 1
    with SqliteStore.open(db_path) as store:  # a reader that does not know the extra step
        assert store.last_seq("run-1") == 1
    assert _applied(db_path) == before


def test_a_failing_migration_is_not_recorded(db_path: Path) -> None:
    good = Migration("test.0001_good", "CREATE TABLE good (x)")
    bad = Migration("test.0002_bad", "CREATE TABLE half (x); CREATE TABLE good (x)")
    threads = threading.active_count()
    with pytest.raises(StoreError, match=r"migration 'test\.0002_bad' failed"):
        SqliteStore.open(db_path, extra_migrations=[good, bad])
    assert threading.active_count() == threads
    names = [name for name, _ in _applied(db_path)]
    assert names[-1] == "test.0001_good"
    conn = sqlite3.connect(db_path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    assert "half" not in tables  # the failed step rolled back as a whole


def test_migration_names_are_unique(db_path: Path) -> None:
    one = Migration("test.0001", "CREATE TABLE t (x)")
    other = Migration("test.0001", "CREATE TABLE u (x)")
    with pytest.raises(StoreError, match=r"duplicate migration names: test\.0001"):
        SqliteStore.open(db_path, extra_migrations=[one, other])
    # The same step passed twice (a caller re-adding one the store has) is applied once.
    with SqliteStore.open(db_path, extra_migrations=[one, one, *STORE_MIGRATIONS]):
        pass
    assert [name for name, _ in _applied(db_path)].count("test.0001") == 1
    with pytest.raises(ValueError, match="non-empty"):
        Migration(" padded", "SELECT 1")


def test_split_statements() -> None:
    script = """
        CREATE TABLE a (x TEXT DEFAULT ';');
        -- a comment; with a semicolon
        CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT 2; END;
        ;
        CREATE TABLE b (y) -- no final semicolon
    """
    statements = split_statements(script)
    assert len(statements) == 3
    assert statements[0] == "CREATE TABLE a (x TEXT DEFAULT ';');"
    assert statements[1].endswith("BEGIN SELECT 1; SELECT 2; END;")
    assert statements[2].startswith("CREATE TABLE b (y)")
    conn = sqlite3.connect(":memory:")
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()
    with pytest.raises(StoreError, match="incomplete SQL"):
        split_statements("CREATE TABLE a (x DEFAULT 'unterminated);")


def test_odd_paths_work(tmp_path: Path) -> None:
    path = tmp_path / "dir with space #1 ?x=y" / "bätön 🙂.db"
    with SqliteStore.open(path) as store:
        store.create_run(run_record())
        store.append(event(1))
        store.flush_sync()
        assert store.last_seq("run-1") == 1  # read connection found the same file
    assert path.exists()
