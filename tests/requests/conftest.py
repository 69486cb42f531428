from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.requests.ledger import REQUESTS_MIGRATIONS, Ledger
from baton.store.store import Store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "baton.db"


@pytest.fixture(params=["standalone", "store"])
async def ledger(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Ledger]:
    """The ledger over its own SQLite database, and over baton's store (shared writer)."""
    if request.param == "standalone":
        ledger = Ledger.open(db_path)
        try:
            yield ledger
        finally:
            await ledger.aclose()
        return
    db_path.parent.mkdir(parents=True, exist_ok=True)
    store = Store.open(db_path, extra_migrations=REQUESTS_MIGRATIONS)
    ledger = Ledger(store)
    try:
        yield ledger
    finally:
        await ledger.aclose()
        await store.aclose()
