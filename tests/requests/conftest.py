from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.requests.ledger import REQUESTS_MIGRATIONS, Ledger
from baton.store.sqlite import SqliteStore
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "baton.db"


@pytest.fixture(params=["standalone", "store", "postgres"])
async def ledger(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Ledger]:
    """The ledger over its own SQLite database, over baton's store (shared writer), and
    over the PostgreSQL store (cluster mode; :mod:`tests.support.pg_fixtures`)."""
    if request.param == "postgres":
        from baton.store.pg import PgStore

        pg = PgStore.open(request.getfixturevalue("pg_dsn"))
        pg_ledger = Ledger(pg)  # type: ignore[arg-type]  # the Store face, on PostgreSQL
        try:
            yield pg_ledger
        finally:
            await pg_ledger.aclose()
            await pg.aclose()
        return
    if request.param == "standalone":
        ledger = Ledger.open(db_path)
        try:
            yield ledger
        finally:
            await ledger.aclose()
        return
    db_path.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore.open(db_path, extra_migrations=REQUESTS_MIGRATIONS)
    ledger = Ledger(store)
    try:
        yield ledger
    finally:
        await ledger.aclose()
        await store.aclose()
