"""One table's checked, parameterized SQL: its name, columns and key are constants.

Callers name columns; a name outside the table's columns is refused
(:class:`~baton.errors.StoreError`) before any SQL is built, so only constants
and ``?`` parameters ever reach SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.errors import StoreError
from baton.store.tx import Columns, Params, Row, SqlValue, Tx

__all__ = ["Table", "resolve_prefix"]


class Table:
    """One table: its name, columns and key, with checked, parameterized SQL."""

    def __init__(self, name: str, columns: Sequence[str], key: str) -> None:
        self.name = name
        self.columns = tuple(columns)
        self.key = key
        self._known = frozenset(columns)
        self._select = f"SELECT {', '.join(self.columns)} FROM {name}"  # noqa: S608 - constants

    def _check(self, names: Sequence[str]) -> None:
        unknown = set(names) - self._known
        if unknown:
            raise StoreError(f"{self.name}: unknown columns {sorted(unknown)}")

    def get(self, tx: Tx, key: SqlValue) -> Row | None:
        return tx.one(f"{self._select} WHERE {self.key} = ?", (key,))

    def where(
        self,
        tx: Tx,
        clause: str = "",
        params: Params = (),
        *,
        order: str | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        """Rows matching ``clause`` (a constant SQL fragment with ``?`` parameters)."""
        sql = self._select + (f" WHERE {clause}" if clause else "")
        sql += f" ORDER BY {order or self.key}"
        values = list(params)
        if limit is not None:
            sql += " LIMIT ?"
            values.append(int(limit))
        return tx.all(sql, values)

    def insert(self, tx: Tx, values: Columns) -> None:
        names = list(values)
        self._check(names)
        tx.execute(
            f"INSERT INTO {self.name} ({', '.join(names)}) "  # noqa: S608 - checked names
            f"VALUES ({', '.join('?' for _ in names)})",
            [values[n] for n in names],
        )

    def upsert(self, tx: Tx, values: Columns) -> None:
        """Insert, or update every given column of the row with the same key."""
        names = list(values)
        self._check(names)
        if self.key not in values:
            raise StoreError(f"{self.name}: upsert needs {self.key}")
        updates = ", ".join(f"{n} = excluded.{n}" for n in names if n != self.key)
        tx.execute(
            f"INSERT INTO {self.name} ({', '.join(names)}) "  # noqa: S608 - checked names
            f"VALUES ({', '.join('?' for _ in names)}) "
            f"ON CONFLICT ({self.key}) DO UPDATE SET {updates}",
            [values[n] for n in names],
        )

    def update(
        self,
        tx: Tx,
        key: SqlValue,
        values: Columns,
        *,
        guard: Columns | None = None,
    ) -> int:
        """Update the row with ``key`` where every ``guard`` column still has its value."""
        names = list(values)
        guard = dict(guard or {})
        self._check([*names, *guard])
        assignments = ", ".join(f"{n} = ?" for n in names)
        conditions = "".join(
            f" AND {n} IS NULL" if v is None else f" AND {n} = ?" for n, v in guard.items()
        )
        return tx.execute(
            f"UPDATE {self.name} SET {assignments} WHERE {self.key} = ?{conditions}",  # noqa: S608
            [*values.values(), key, *(v for v in guard.values() if v is not None)],
        )

    def delete(self, tx: Tx, key: SqlValue) -> int:
        return tx.execute(f"DELETE FROM {self.name} WHERE {self.key} = ?", (key,))  # noqa: S608

    def count(self, tx: Tx, clause: str = "", params: Params = ()) -> int:
        sql = f"SELECT count(*) FROM {self.name}" + (f" WHERE {clause}" if clause else "")  # noqa: S608
        return int(tx.scalar(sql, params) or 0)


def resolve_prefix(tx: Tx, table: str, key: str, prefix: str) -> list[str]:
    """``[prefix]`` when it is a whole ``key`` of ``table``, else up to two keys starting
    with it (two: enough to say "ambiguous"). ``table`` and ``key`` are the caller's
    constants; ``prefix`` is only ever a parameter, its ``LIKE`` wildcards escaped."""
    if tx.one(f"SELECT 1 FROM {table} WHERE {key} = ?", (prefix,)) is not None:  # noqa: S608
        return [prefix]
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = tx.all(
        f"SELECT {key} FROM {table} WHERE {key} LIKE ? ESCAPE '\\' LIMIT 2",  # noqa: S608
        (escaped + "%",),
    )
    return [str(r[0]) for r in rows]
