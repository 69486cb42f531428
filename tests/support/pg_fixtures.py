"""Pytest fixtures for the PostgreSQL backend: one throwaway server per test process.

Import the fixtures into a ``conftest.py`` (``from tests.support.pg_fixtures import
pg_databases``). Where the server cannot run, tests skip with the reason; under
``BATON_REQUIRE_POSTGRES=1`` (what ``scripts/test`` sets, so CI) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import Databases, PostgresServer, postgres_unavailable

__all__ = ["pg_databases", "pg_dsn", "postgres_reason"]


def postgres_reason() -> str | None:
    """Why the PostgreSQL backend cannot be tested here, or ``None``."""
    reason = postgres_unavailable()
    if reason is None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            reason = "psycopg not installed (pip install 'baton[postgres]')"
    return reason


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[Databases]:
    """One throwaway PostgreSQL server per test process (xdist worker)."""
    reason = postgres_reason()
    if reason is not None:
        if os.environ.get("BATON_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here but cannot run: {reason}")
        pytest.skip(f"PostgreSQL backend: {reason}")
    root = Path(tempfile.mkdtemp(prefix="baton-cluster-pgtest-"))
    try:
        os.chmod(root, 0o755)  # the server runs as its own unprivileged user
        with PostgresServer(root / "pg") as server:
            yield Databases(server)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_dsn(pg_databases: Databases) -> Iterator[str]:
    """A fresh, empty database on the process's server, dropped afterwards."""
    dsn = pg_databases.create()
    try:
        yield dsn
    finally:
        pg_databases.drop(dsn)
