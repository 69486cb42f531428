"""The backend seam: a transaction handle that speaks portable SQL.

Repositories (``baton.store.requests_sql``, ``baton.store.team_sql``, ...) are
plain functions over a :class:`Tx`; they never see a driver connection, so the
same SQL runs on the embedded SQLite backend and on PostgreSQL. A backend builds
its ``Tx`` from one function, its :data:`Statement`, that runs a statement in its
dialect on its connection (:mod:`baton.store.sqlite`, :mod:`baton.store.pg`). The
rules that keep it portable:

* parameters are ``?`` placeholders; a backend rewrites them if it must
  (PostgreSQL's ``%s``);
* only the common subset: ``INSERT ... ON CONFLICT (...) DO UPDATE``,
  ``RETURNING`` is avoided, no ``rowid``, no SQLite pragmas, JSON kept as text;
* a uniqueness or foreign-key violation surfaces as :class:`StoreConflict`,
  whatever the driver calls it, so callers never catch a driver's errors;
* wake-up topics named with :meth:`Tx.wake` are rung only after COMMIT (the
  cross-process doorbell, :mod:`baton.store.wake`), never for a rolled-back
  write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from baton.errors import StoreError

__all__ = [
    "Columns",
    "Cursor",
    "Params",
    "Row",
    "RowValues",
    "SqlValue",
    "Statement",
    "StoreConflict",
    "Tx",
]

SqlValue = Any
"""One column's value as a driver takes or gives it (text, integer, real, blob or NULL).
``Any`` on purpose: the schema, not the type system, says which; each record's
``from_row``/``row`` converts to and from its typed fields."""

Row = tuple[SqlValue, ...]
"""One row as a query returns it, in the order of the ``SELECT``'s columns."""

Params = Sequence[SqlValue]
"""The ``?`` parameters of one statement."""

Columns = Mapping[str, SqlValue]
"""Column name → value, for an insert or an update (a table checks the names)."""

RowValues = dict[str, SqlValue]
"""A record's fields as a row being built (its ``row()``) or read back (``from_row``)."""


class StoreConflict(StoreError):
    """A write broke a uniqueness or reference rule (the row exists, the parent does not)."""


class Cursor(Protocol):
    """What a DB-API cursor (sqlite3's, psycopg's) gives back after one statement
    (``Any``: a driver's row of column values, whatever their SQL types)."""

    @property
    def rowcount(self) -> int: ...

    # Any: the driver's row type (a tuple, a sqlite3.Row ...); Tx turns it into a Row.
    def fetchone(self) -> Any: ...

    # Any: as fetchone.
    def fetchall(self) -> Sequence[Any]: ...


Statement = Callable[[str, Params], Cursor]
"""``(portable sql, params) -> cursor``: one backend's way to run a statement, raising
:class:`StoreConflict` for a conflict."""


class Tx:
    """One transaction (or read snapshot) on one backend connection."""

    __slots__ = ("_run", "_topics", "readonly")

    def __init__(self, statement: Statement, *, readonly: bool = False) -> None:
        self._run = statement
        self._topics: list[str] = []
        self.readonly = readonly

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run a write statement; returns the number of rows it changed."""
        if self.readonly:
            raise StoreError("a read snapshot cannot write")
        return self._run(sql, params).rowcount

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of a query, or ``None``."""
        row = self._run(sql, params).fetchone()
        return tuple(row) if row is not None else None

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        """Every row of a query."""
        return [tuple(r) for r in self._run(sql, params).fetchall()]

    def scalar(self, sql: str, params: Params = ()) -> SqlValue:
        """The first column of the first row, or ``None``."""
        row = self.one(sql, params)
        return row[0] if row is not None else None

    def wake(self, *topics: str) -> None:
        """Ring these topics for every listening process once this transaction commits."""
        self._topics.extend(topics)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._topics)
