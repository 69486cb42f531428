"""The dashboard's browser logins: one-time login codes and the sessions they open.

Two small tables, written through the store's one writer, so a session outlives
the ``baton serve`` (or ``baton up --serve``) process that issued it and any baton
process of the project can mint a login code or revoke every session. Only
SHA-256 digests of the secrets are stored: a copy of ``baton.db`` opens no browser
session and replays no code. The rules themselves (lifetimes, who may log in from
which host) live in :mod:`baton.web.sessions`; this module is the SQL.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from baton.store.migrations import Migration
from baton.store.store import Store

T = TypeVar("T")

__all__ = [
    "WEB_MIGRATIONS",
    "SessionRow",
    "consume_code",
    "find_session",
    "insert_code",
    "insert_session",
    "revoke_all",
    "touch_session",
]

WEB_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        "web.0001_sessions",
        """
        CREATE TABLE web_login_codes (
            code_sha256 TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used_at REAL
        );
        CREATE TABLE web_sessions (
            session_sha256 TEXT PRIMARY KEY,
            origin TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_seen_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            user_agent TEXT NOT NULL DEFAULT ''
        );
        """,
    ),
)
"""Pass to ``Store.open`` with the other parts' migrations (``runner.context.open_store``)."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A stored browser session (the secret itself is never stored)."""

    session_sha256: str
    origin: str
    created_at: float
    last_seen_at: float
    expires_at: float
    user_agent: str


async def _write(store: Store, fn: Callable[[sqlite3.Connection], T]) -> T:
    return await asyncio.wrap_future(store.execute_write(fn))


async def insert_code(store: Store, code_sha256: str, *, now: float, expires_at: float) -> None:
    """Record a fresh login code (by digest); old spent or expired codes are purged."""

    def insert(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM web_login_codes WHERE expires_at < ?", (now - 86400,))
        conn.execute(
            "INSERT INTO web_login_codes (code_sha256, created_at, expires_at) VALUES (?, ?, ?)",
            (code_sha256, now, expires_at),
        )

    await _write(store, insert)


async def consume_code(store: Store, code_sha256: str, *, now: float) -> bool:
    """Spend a code: True exactly once, while it is unexpired; False for any other code."""

    def spend(conn: sqlite3.Connection) -> bool:
        cursor = conn.execute(
            "UPDATE web_login_codes SET used_at = ? "
            "WHERE code_sha256 = ? AND used_at IS NULL AND expires_at >= ?",
            (now, code_sha256, now),
        )
        return cursor.rowcount == 1

    return await _write(store, spend)


async def insert_session(store: Store, row: SessionRow) -> None:
    """Record a session opened by a spent code; expired sessions are purged."""

    def insert(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM web_sessions WHERE expires_at < ?", (row.created_at,))
        conn.execute(
            "INSERT INTO web_sessions (session_sha256, origin, created_at, last_seen_at,"
            " expires_at, user_agent) VALUES (?, ?, ?, ?, ?, ?)",
            (
                row.session_sha256,
                row.origin,
                row.created_at,
                row.last_seen_at,
                row.expires_at,
                row.user_agent,
            ),
        )

    await _write(store, insert)


def find_session(store: Store, session_sha256: str) -> SessionRow | None:
    """The stored session with this digest, if any (blocking read; call off-loop)."""

    def query(conn: sqlite3.Connection) -> SessionRow | None:
        row = conn.execute(
            "SELECT session_sha256, origin, created_at, last_seen_at, expires_at, user_agent"
            " FROM web_sessions WHERE session_sha256 = ?",
            (session_sha256,),
        ).fetchone()
        return SessionRow(*row) if row else None

    return store.read(query)


async def touch_session(
    store: Store, session_sha256: str, *, now: float, expires_at: float
) -> None:
    """Slide a session's expiry forward (called at most once a minute per session)."""

    def touch(conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE web_sessions SET last_seen_at = ?, expires_at = ? WHERE session_sha256 = ?",
            (now, expires_at, session_sha256),
        )

    await _write(store, touch)


async def revoke_all(store: Store) -> int:
    """Delete every browser session and unspent code; returns how many sessions ended."""

    def revoke(conn: sqlite3.Connection) -> int:
        count = conn.execute("SELECT COUNT(*) FROM web_sessions").fetchone()[0]
        conn.execute("DELETE FROM web_sessions")
        conn.execute("DELETE FROM web_login_codes")
        return int(count)

    return await _write(store, revoke)
