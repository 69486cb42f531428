"""The backend seam: a transaction handle that speaks portable SQL.

Repositories (``baton.store.requests_sql``, ``baton.store.team_sql``, ...) are
plain functions over a :class:`Tx`; they never see a driver connection, so the
same SQL runs on the embedded SQLite backend today and on PostgreSQL next
(issue 16). The rules that keep it portable:

* parameters are ``?`` placeholders; a backend rewrites them if it must
  (PostgreSQL's ``%s``);
* only the common subset: ``INSERT ... ON CONFLICT (...) DO UPDATE``,
  ``RETURNING`` is avoided, no ``rowid``, no SQLite pragmas, JSON kept as text;
* a uniqueness or foreign-key violation surfaces as :class:`StoreConflict`,
  whatever the driver calls it, so callers never catch ``sqlite3`` errors;
* wake-up topics named with :meth:`Tx.wake` are rung only after COMMIT (the
  cross-process doorbell, :mod:`baton.store.wake`), never for a rolled-back
  write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from baton.errors import StoreError

__all__ = ["Row", "StoreConflict", "Tx"]

Row = tuple[Any, ...]


class StoreConflict(StoreError):
    """A write broke a uniqueness or reference rule (the row exists, the parent does not)."""


class Tx:
    """One transaction (or read snapshot) on one backend connection."""

    __slots__ = ("_conn", "_topics", "readonly")

    def __init__(self, conn: sqlite3.Connection, *, readonly: bool = False) -> None:
        self._conn = conn
        self._topics: list[str] = []
        self.readonly = readonly

    def _run(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, tuple(params))
        except sqlite3.IntegrityError as exc:
            raise StoreConflict(str(exc)) from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a write statement; returns the number of rows it changed."""
        if self.readonly:
            raise StoreError("a read snapshot cannot write")
        return self._run(sql, params).rowcount

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or ``None``."""
        row = self._run(sql, params).fetchone()
        return tuple(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        return [tuple(r) for r in self._run(sql, params).fetchall()]

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or ``None``."""
        row = self.one(sql, params)
        return row[0] if row is not None else None

    def wake(self, *topics: str) -> None:
        """Ring these topics for every listening process once this transaction commits."""
        self._topics.extend(topics)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._topics)
