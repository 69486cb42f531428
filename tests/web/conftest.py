"""A real store and ledger in a temporary directory, and an app + client over them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from baton.app.recovery import open_store
from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.web.app import create_app
from tests.support.records import run_record
from tests.web.webbuild import TOKEN

BASE_URL = "http://127.0.0.1:8765"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "baton.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    store = open_store(db_path)
    store.create_run(run_record())
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
async def ledger(store: Store) -> AsyncIterator[Ledger]:
    ledger = Ledger(store)
    try:
        yield ledger
    finally:
        await ledger.aclose()


@pytest.fixture
def app(store: Store, ledger: Ledger) -> Starlette:
    # A short poll interval: streams notice other writers and a run's end quickly.
    return create_app(store, ledger, token=TOKEN, poll_interval=0.02)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """Authenticated with the bearer token, through ``httpx.ASGITransport``."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=BASE_URL,
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as client:
        yield client
