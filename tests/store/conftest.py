"""Helpers for the store tests: a fresh store per test and cheap event builders."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from baton.events.model import CanonicalEvent, Payload, TranscriptAssistant
from baton.store import CLUSTER_MIGRATIONS, Migration, Store
from baton.store.sqlite import SqliteStore
from tests.support.pg_fixtures import pg_databases, pg_dsn
from tests.support.records import TS, run_record

BACKENDS = ("sqlite", "postgres")
"""Every store test that does not reach for SQLite's raw connection runs on both."""


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


StoreFactory = Callable[..., Any]


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[StoreFactory]:
    """``open_store(extra_migrations=...)`` opens (or reopens) this test's store on its backend."""
    if request.param == "sqlite":
        yield lambda **kw: SqliteStore.open(db_path, **kw)
        return
    marker = request.node.get_closest_marker("sqlite_only")
    if marker is not None:
        pytest.skip(f"SQLite only: {marker.args[0] if marker.args else 'raw connection API'}")
    dsn: str = request.getfixturevalue("pg_dsn")
    from baton.store.pg import PgStore

    yield lambda **kw: PgStore.open(dsn, **kw)


@pytest.fixture
def open_cluster_store(open_store: StoreFactory) -> StoreFactory:
    """``open_store`` with the cluster's tables (PostgreSQL has them; SQLite opts in)."""

    def opened(*, extra_migrations: Sequence[Migration] = (), **kw: Any) -> Any:
        return open_store(extra_migrations=[*CLUSTER_MIGRATIONS, *extra_migrations], **kw)

    return opened


@pytest.fixture
def store(open_store: StoreFactory) -> Iterator[Store]:
    store = open_store()
    store.create_run(run_record())
    try:
        yield store
    finally:
        store.close()


__all__ = [
    "BACKENDS",
    "Migration",
    "StoreFactory",
    "event",
    "pg_databases",
    "pg_dsn",
    "run_record",
]
