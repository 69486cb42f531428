"""The dashboard's browser logins: one-time login codes and the sessions they open.

Two small tables, written through the store's one writer, so a session outlives
the ``baton serve`` (or ``baton up --serve``) process that issued it and any baton
process of the project can mint a login code or revoke every session. Only
SHA-256 digests of the secrets are stored: a copy of ``baton.db`` opens no browser
session and replays no code. The rules themselves (lifetimes, who may log in from
which host) live in :mod:`baton.web.sessions`; this module is the SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from baton.store.migrations import Migration
from baton.store.store import Store
from baton.store.tx import Tx

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
"""Part of every store (:data:`baton.store.schema.STORE_MIGRATIONS`)."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A stored browser session (the secret itself is never stored)."""

    session_sha256: str
    origin: str
    created_at: float
    last_seen_at: float
    expires_at: float
    user_agent: str


async def insert_code(store: Store, code_sha256: str, *, now: float, expires_at: float) -> None:
    """Record a fresh login code (by digest); old spent or expired codes are purged."""

    def insert(tx: Tx) -> None:
        tx.execute("DELETE FROM web_login_codes WHERE expires_at < ?", (now - 86400,))
        tx.execute(
            "INSERT INTO web_login_codes (code_sha256, created_at, expires_at) VALUES (?, ?, ?)",
            (code_sha256, now, expires_at),
        )

    await store.write(insert)


async def consume_code(store: Store, code_sha256: str, *, now: float) -> bool:
    """Spend a code: True exactly once, while it is unexpired; False for any other code."""

    def spend(tx: Tx) -> bool:
        changed = tx.execute(
            "UPDATE web_login_codes SET used_at = ? "
            "WHERE code_sha256 = ? AND used_at IS NULL AND expires_at >= ?",
            (now, code_sha256, now),
        )
        return changed == 1

    return await store.write(spend)


async def insert_session(store: Store, row: SessionRow) -> None:
    """Record a session opened by a spent code; expired sessions are purged."""

    def insert(tx: Tx) -> None:
        tx.execute("DELETE FROM web_sessions WHERE expires_at < ?", (row.created_at,))
        tx.execute(
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

    await store.write(insert)


def find_session(store: Store, session_sha256: str) -> SessionRow | None:
    """The stored session with this digest, if any (blocking read; call off-loop)."""

    def query(tx: Tx) -> SessionRow | None:
        row = tx.one(
            "SELECT session_sha256, origin, created_at, last_seen_at, expires_at, user_agent"
            " FROM web_sessions WHERE session_sha256 = ?",
            (session_sha256,),
        )
        return SessionRow(*row) if row else None

    return store.read_tx(query)


async def touch_session(
    store: Store, session_sha256: str, *, now: float, expires_at: float
) -> None:
    """Slide a session's expiry forward (called at most once a minute per session)."""

    def touch(tx: Tx) -> None:
        tx.execute(
            "UPDATE web_sessions SET last_seen_at = ?, expires_at = ? WHERE session_sha256 = ?",
            (now, expires_at, session_sha256),
        )

    await store.write(touch)


async def revoke_all(store: Store) -> int:
    """Delete every browser session and unspent code; returns how many sessions ended."""

    def revoke(tx: Tx) -> int:
        count = tx.scalar("SELECT COUNT(*) FROM web_sessions")
        tx.execute("DELETE FROM web_sessions")
        tx.execute("DELETE FROM web_login_codes")
        return int(count or 0)

    return await store.write(revoke)
