"""Canonical events as rows of the ``events`` table: serialized, inserted, parsed back.

An event is serialized on its producer (:func:`event_row`), so one that cannot
be stored is refused there instead of failing a whole batch later. A batch is
inserted with as few statements as possible (:func:`insert_rows`): the number
of sqlite3 calls, not the rows, bounds ingest.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store.tx import Params, Row

__all__ = [
    "EVENT_PAGE_SQL",
    "MAX_ROWS_PER_INSERT",
    "EventRow",
    "event_row",
    "insert_rows",
    "paged_event_json",
    "parse_event",
    "stage_seqs",
]

MAX_ROWS_PER_INSERT: Final = 2048 if sqlite3.sqlite_version_info >= (3, 32, 0) else 128
"""Rows per INSERT statement: 7 parameters each, under SQLITE_MAX_VARIABLE_NUMBER
(32766 since SQLite 3.32, 999 before)."""


def _insert_sql(rows: int) -> str:
    """An INSERT of ``rows`` rows padded with all-NULL rows that the WHERE drops."""
    values = ",".join(["(?,?,?,?,?,?,?)"] * rows)  # placeholders only, never data
    return (
        "INSERT INTO events (run_id, seq, type, session_id, turn_id, ts, json)"  # noqa: S608
        f" SELECT * FROM (VALUES {values}) WHERE column1 IS NOT NULL"
    )


_INSERT_SQL: Final = {
    size: _insert_sql(size) for size in (1 << k for k in range(MAX_ROWS_PER_INSERT.bit_length()))
}
"""One statement per power of two: a handful of statements stay prepared in the
cache, and any batch up to 2048 events is a single sqlite3 call."""
_PADDING: Final = (None,) * (7 * MAX_ROWS_PER_INSERT)

EventRow = tuple[str, int, str, str | None, str | None, str, str]
"""``(run_id, seq, type, session_id, turn_id, ts, json)``."""


def stage_seqs(
    events: Sequence[CanonicalEvent], last_seq: dict[str, int], load: Callable[[str], int]
) -> None:
    """Check that each run's seqs strictly increase past ``last_seq`` (``load`` seeds a
    run not seen yet), then record the new last seqs: all or none (every backend's rule;
    the caller holds its queue's lock)."""
    staged: dict[str, int] = {}
    for event in events:
        run_id, seq = event.run_id, event.seq
        last = staged.get(run_id)
        if last is None:
            last = last_seq.get(run_id)
            if last is None:
                last = load(run_id)
        if seq <= last:
            raise StoreError(
                f"run {run_id!r}: seq {seq} does not follow {last} (seqs must strictly increase)"
            )
        staged[run_id] = seq
    last_seq.update(staged)


def event_row(event: CanonicalEvent) -> EventRow:
    """The ``events`` row of ``event``, serialized on the producer (refused there if it cannot be)."""
    try:
        line = event.to_json()
    except Exception as exc:  # whatever the serializer raises: this event is refused
        raise StoreError(
            f"event {event.type} seq {event.seq} of run {event.run_id!r} "
            f"cannot be serialized: {exc}"
        ) from exc
    return (event.run_id, event.seq, event.type, event.session_id, event.turn_id, event.ts, line)


def parse_event(line: str) -> CanonicalEvent:
    """A stored ``events.json`` line back as its model."""
    try:
        return CanonicalEvent.model_validate_json(line)
    except ValueError as exc:
        raise StoreError(f"stored event does not parse: {exc}") from exc


def insert_rows(conn: sqlite3.Connection, rows: Sequence[EventRow]) -> None:
    """Insert with as few statements as possible (one per 2048 rows).

    Each statement step releases and re-takes the GIL, and while the event
    loop is busy every re-take can wait a whole switch interval (5 ms), so
    the number of sqlite3 calls per batch, not the rows, bounds ingest.
    """
    for start in range(0, len(rows), MAX_ROWS_PER_INSERT):
        chunk = rows[start : start + MAX_ROWS_PER_INSERT]
        size = 1 << (len(chunk) - 1).bit_length()
        params = list(itertools.chain.from_iterable(chunk))
        params.extend(_PADDING[: 7 * (size - len(chunk))])
        conn.execute(_INSERT_SQL[size], params)


EVENT_PAGE_SQL: Final = (
    "SELECT seq, json FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_READ_PAGE: Final = 1000


def paged_event_json(
    fetch: Callable[[str, Params], Sequence[Row]],
    run_id: str,
    *,
    after_seq: int = 0,
    limit: int | None = None,
) -> Iterator[str]:
    """A run's stored lines by seq, read in pages with ``fetch(EVENT_PAGE_SQL, params)``.

    Each page is its own short read (every backend), so an abandoned iterator holds
    no connection or snapshot.
    """
    cursor = after_seq
    remaining = limit
    while remaining is None or remaining > 0:
        page = _READ_PAGE if remaining is None else min(_READ_PAGE, remaining)
        rows = fetch(EVENT_PAGE_SQL, (run_id, cursor, page))
        for _, line in rows:
            yield line
        if len(rows) < page:
            return
        cursor = rows[-1][0]
        if remaining is not None:
            remaining -= len(rows)
