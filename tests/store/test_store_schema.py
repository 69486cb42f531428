"""Which tables a store has: every store's on one machine, the cluster's too on PostgreSQL,
and single-machine stores from before the split (which got the cluster tables) still work."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from baton.store import CLUSTER_MIGRATIONS, STORE_MIGRATIONS, SqliteStore, apply_migrations
from baton.store.tx import Tx

from .conftest import Migration, StoreFactory, event, run_record

CLUSTER_TABLES = {"cluster_placements", "cluster_credentials"}


def _tables(tx: Tx) -> set[str]:
    return {str(r[0]) for r in tx.all("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _applied(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY 1").fetchall()
    finally:
        conn.close()


def test_a_single_machine_store_has_no_cluster_table(db_path: Path) -> None:
    with SqliteStore.open(db_path) as store:
        tables = store.read_tx(_tables)
        names = store.read_tx(
            lambda tx: {r[0] for r in tx.all("SELECT name FROM schema_migrations")}
        )
    assert {"runs", "events", "team_tasks", "requests"} <= tables
    assert tables.isdisjoint(CLUSTER_TABLES)
    assert names == {m.name for m in STORE_MIGRATIONS}


def test_the_cluster_store_has_the_cluster_tables(pg_dsn: str) -> None:
    from baton.store.pg import PgStore

    with PgStore.open(pg_dsn) as store:
        tables = store.read_tx(
            lambda tx: {
                str(r[0])
                for r in tx.all("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            }
        )
        names = store.read_tx(
            lambda tx: {r[0] for r in tx.all("SELECT name FROM schema_migrations")}
        )
    assert tables >= CLUSTER_TABLES
    assert names == {m.name for m in (*STORE_MIGRATIONS, *CLUSTER_MIGRATIONS)}


def test_a_store_from_before_the_split_opens_and_works(db_path: Path) -> None:
    """Every store used to get the cluster steps: such a store opens without them, keeps
    them recorded (nothing re-applied, nothing dropped), and works as any other."""
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    apply_migrations(conn, (*STORE_MIGRATIONS, *CLUSTER_MIGRATIONS))  # the baton of before
    conn.execute(
        "INSERT INTO cluster_placements VALUES ('', 'dev', 'w1', 3, 'placed', 1e12, 'then')"
    )
    conn.close()
    before = _applied(db_path)
    with SqliteStore.open(db_path) as store:
        store.create_run(run_record())
        store.append(event(1))
        store.flush_sync()
        assert store.last_seq("run-1") == 1
        assert store.read_tx(_tables) >= CLUSTER_TABLES
    assert _applied(db_path) == before
    # Opened with the cluster's steps (a tool, a test): recorded ones are skipped, not re-run.
    with SqliteStore.open(db_path, extra_migrations=CLUSTER_MIGRATIONS) as store:
        rows = store.read_tx(lambda tx: tx.all("SELECT slot, epoch FROM cluster_placements"))
    assert rows == [("dev", 3)]
    assert _applied(db_path) == before


def test_each_list_applies_alone_in_order(tmp_path: Path) -> None:
    """No step of every store's list needs a cluster table, and the cluster's list needs
    only what every store has."""
    conn = sqlite3.connect(tmp_path / "alone.db", isolation_level=None)
    try:
        assert apply_migrations(conn, STORE_MIGRATIONS) == [m.name for m in STORE_MIGRATIONS]
        assert apply_migrations(conn, CLUSTER_MIGRATIONS) == [m.name for m in CLUSTER_MIGRATIONS]
        assert apply_migrations(conn, (*STORE_MIGRATIONS, *CLUSTER_MIGRATIONS)) == []
    finally:
        conn.close()


def test_a_migration_is_run_as_written(open_store: StoreFactory) -> None:
    """DDL is sent without parameters on both backends: a ``%`` or ``?`` is literal."""
    odd = Migration(
        "test.0001_odd",
        "CREATE TABLE odd (id TEXT PRIMARY KEY, share TEXT NOT NULL DEFAULT '100% ?')",
    )
    store = open_store(extra_migrations=[odd])
    try:
        store.write_sync(lambda tx: tx.execute("INSERT INTO odd (id) VALUES (?)", ("a",)))
        assert store.read_tx(lambda tx: tx.scalar("SELECT share FROM odd")) == "100% ?"
    finally:
        store.close()
