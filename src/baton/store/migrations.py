"""Named schema migrations, applied once each, in order, through the writer.

A migration is recorded by name in ``schema_migrations`` inside the same
transaction that applies it, so a crash can never leave a half-applied step
marked done. Several processes (on several hosts, with PostgreSQL) may open the
same store at once: each missing step is re-checked under the store's write lock
(:meth:`~baton.store.backend.WriterConnection.begin`), so whoever comes second
sees the row and skips it. :func:`migrate` is that rule, once, for both backends.

Every table lives here, in ``store/`` (the request ledger's in
:mod:`baton.store.requests_sql`, the team loop's in :mod:`baton.store.team_sql`);
which steps a store gets is :mod:`baton.store.schema` (every store's, and the
cluster store's on top). Names are global, so they carry their area
(``requests.0001_ledger``). A step passed twice (a caller adding one the store
already has) is applied once. Names present in the database but unknown to the
caller are ignored: an older baton must still read a newer store, and a
single-machine store that an older baton gave the cluster tables keeps them,
recorded and never read, without a step to drop them (see :mod:`baton.store.schema`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from baton.errors import StoreError
from baton.events.sequencer import utc_now

if TYPE_CHECKING:
    from baton.store.backend import WriterConnection

__all__ = [
    "CORE_MIGRATIONS",
    "SCHEMA_MIGRATIONS_SQL",
    "TURN_MARKS_SQL",
    "Migration",
    "migrate",
    "split_statements",
    "unique_migrations",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One named schema step; ``sql`` may hold several statements."""

    name: str
    sql: str

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise ValueError(f"migration name must be non-empty and unpadded: {self.name!r}")


SCHEMA_MIGRATIONS_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
)
"""

TURN_MARKS_SQL = (
    "'turn.submitted', 'turn.stalled', 'turn.resumed', "
    "'turn.completed', 'turn.failed', 'turn.cancelled'"
)
"""The event types that say where a turn stands (:mod:`baton.store.live_turns` reads them
through the ``events_turn_marks`` partial index, whose WHERE must be this same list)."""

CORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "core.0001_runs",
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            agent TEXT NOT NULL,
            cwd TEXT NOT NULL,
            status TEXT NOT NULL CHECK (
                status IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')
            ),
            created_at TEXT NOT NULL,
            ended_at TEXT,
            meta TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX runs_by_created_at ON runs (created_at);
        """,
    ),
    Migration(
        "core.0002_sessions",
        """
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            agent_session_id TEXT NOT NULL,
            cwd TEXT NOT NULL,
            identity_key TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            role TEXT,
            run_id TEXT,
            state TEXT NOT NULL DEFAULT '{}'
        );
        CREATE UNIQUE INDEX sessions_by_identity_key
            ON sessions (identity_key) WHERE identity_key IS NOT NULL;
        CREATE INDEX sessions_by_updated_at ON sessions (updated_at);
        """,
    ),
    # A rowid table on purpose, not WITHOUT ROWID: stored lines are a few hundred
    # bytes, past the ~1/20-page size where WITHOUT ROWID pays off, and measured
    # ingest was equal or better this way. The implicit rowid also gives a
    # store-wide commit order for free. No index on ``type``: every extra index is
    # another b-tree write per event on the hottest path; add one in a later
    # migration when a query needs it.
    Migration(
        "core.0003_events",
        """
        CREATE TABLE events (
            run_id TEXT NOT NULL REFERENCES runs (run_id),
            seq INTEGER NOT NULL CHECK (seq >= 1),
            type TEXT NOT NULL,
            session_id TEXT,
            turn_id TEXT,
            ts TEXT NOT NULL,
            json TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        """,
    ),
    # A partial index: only the few events that move a turn (submitted, stalled, resumed,
    # ended) are written to it, so ingest of a flooding transcript does not pay for it.
    Migration(
        "core.0004_turn_marks",
        f"CREATE INDEX events_turn_marks ON events (run_id, seq) WHERE type IN ({TURN_MARKS_SQL});",
    ),
)
"""baton's own tables: ``runs``, ``sessions``, ``events`` (``schema_migrations`` is
bootstrapped by :func:`apply_migrations` itself, since it records the others)."""


def split_statements(sql: str) -> list[str]:
    """Split a script into statements, respecting quotes, comments and triggers.

    ``Connection.executescript`` would COMMIT first, which breaks the
    one-transaction-per-migration rule, so statements run one by one.
    """
    statements: list[str] = []
    buffer = ""
    for piece in sql.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            if statement.strip(";").strip():
                statements.append(statement)
            buffer = ""
    leftover = buffer[:-1].strip()
    if leftover:
        raise StoreError(f"incomplete SQL statement in migration: {leftover[:80]!r}")
    return statements


def unique_migrations(migrations: Sequence[Migration]) -> list[Migration]:
    """The steps in order, each once; two different steps under one name raise.

    Shared by every backend (:func:`migrate`).
    """
    unique: dict[str, Migration] = {}
    clashes: set[str] = set()
    for migration in migrations:
        seen = unique.setdefault(migration.name, migration)
        if seen.sql != migration.sql:
            clashes.add(migration.name)
    if clashes:
        raise StoreError(f"duplicate migration names: {', '.join(sorted(clashes))}")
    return list(unique.values())  # the same step passed twice is applied once


def migrate(conn: WriterConnection, migrations: Sequence[Migration]) -> list[str]:
    """Apply the steps not yet recorded, each in its own transaction; return their names.

    One rule for every backend: the steps already recorded are skipped without taking
    the write lock (the common case: a store opened again); each missing one is
    checked again under the lock (another opener may have applied it meanwhile), then
    applied and recorded in the same transaction. Raises :class:`StoreError` naming
    the failing step; earlier steps stay applied. ``conn`` is outside a transaction.
    """
    migrations = unique_migrations(migrations)
    conn.create_if_missing(conn.ddl(SCHEMA_MIGRATIONS_SQL))
    tx = conn.tx()
    applied = {row[0] for row in tx.all("SELECT name FROM schema_migrations")}
    done: list[str] = []
    for migration in migrations:
        if migration.name in applied:
            continue
        statements = [conn.ddl(s) for s in split_statements(migration.sql)]
        try:
            conn.begin()
            if tx.one("SELECT 1 FROM schema_migrations WHERE name = ?", (migration.name,)) is None:
                for statement in statements:
                    conn.execute(statement)
                tx.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                    (migration.name, utc_now()),
                )
                done.append(migration.name)
            conn.commit()
        except Exception as exc:
            if conn.in_transaction:
                conn.rollback()
            raise StoreError(f"migration {migration.name!r} failed: {exc}") from exc
    return done
