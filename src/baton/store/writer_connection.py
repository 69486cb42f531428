"""The writer's connection: a private file, WAL with full sync, and a patient wait for the lock.

Several processes may write one store (a team loop beside the CLI, many ``baton
run`` on one project); ``BEGIN IMMEDIATE`` plus ``busy_timeout`` serialize them
and :func:`retry_busy` waits for the lock as long as it takes, saying so only
when the wait suggests a stuck peer.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from baton.errors import StoreError

__all__ = ["DEFAULT_BUSY_TIMEOUT_MS", "connect_writer", "prepare_files", "retry_busy"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long one ``BEGIN IMMEDIATE`` waits for another process's writer before it is retried."""
_BUSY_SAY_AFTER_S: Final = 30.0
"""A wait for the write lock this long is worth a line (a peer may be stuck); then every minute."""
_BUSY_SAY_EVERY_S: Final = 60.0
_PAGE_SIZE: Final = 8192
"""Set on a new file only; stored lines are a few hundred bytes, and 8 KiB pages
measured ~20% faster ingest than the 4 KiB default."""
_JOURNAL_SIZE_LIMIT: Final = 64 * 1024 * 1024
"""Truncate the WAL back to this after a checkpoint, so a burst does not leave a huge file."""


def _is_busy(exc: sqlite3.Error) -> bool:
    return (exc.sqlite_errorcode & 0xFF) == sqlite3.SQLITE_BUSY


def prepare_files(path: Path) -> None:
    """Create the parent directory 0700 and the database file 0600.

    SQLite creates ``-wal``/``-shm`` with the database file's permissions, so
    creating the file ourselves first is what keeps all three private.
    """
    try:
        if not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create store file {path}: {exc}") from exc
    os.close(fd)


def connect_writer(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """The one write connection: busy timeout, page size, WAL, synchronous=FULL, foreign keys."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        mode = retry_busy(
            lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone(),
            path=path,
            busy_timeout_ms=busy_timeout_ms,
        )
        if mode is None or str(mode[0]).lower() != "wal":
            raise StoreError(f"cannot put {path} in WAL mode (got {mode!r})")
        # synchronous=FULL: in WAL mode this fsyncs the WAL on every COMMIT,
        # and since a commit is a whole batch the cost is one fsync per batch.
        # NORMAL would fsync only at checkpoints: a committed batch then
        # survives a crash of *this process* (the OS page cache still has it)
        # but can vanish on a power loss or kernel crash. flush() returning is
        # our promise that the data is durable, so NORMAL would break
        # "nothing acknowledged is lost on a crash" for machine crashes.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA journal_size_limit = {_JOURNAL_SIZE_LIMIT}")
    except BaseException:
        conn.close()
        raise
    return conn


def retry_busy(fn: Callable[[], T], *, path: Path, busy_timeout_ms: int) -> T:
    """Run a lock-taking statement, waiting for as long as another writer holds the lock.

    A busy store is another process writing (many ``baton run`` on one project, a
    team loop beside the CLI): never a reason to fail a run or to alarm its user. SQLite's
    busy handler waits ``busy_timeout`` per attempt; this retries without limit and
    says so only when the wait gets long enough to suggest a stuck peer.
    """
    waiting_since: float | None = None
    said = 0.0
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            now = time.monotonic()
            if waiting_since is None:
                waiting_since = now - busy_timeout_ms / 1000
            waited = now - waiting_since
            if waited >= _BUSY_SAY_AFTER_S and now - said >= _BUSY_SAY_EVERY_S:
                said = now
                _log.warning(
                    "store %s: another process has held its write lock for %.0f s; still waiting",
                    path,
                    waited,
                )
