"""Running services (``baton up``, ``baton serve``): one row each, found by other processes.

No side files for state: a service announces itself here when it starts (kind, pid,
boot id, host, its URL or port) and removes its row when it stops. A reader (``baton
down``, ``baton status``, a headless run looking for the dashboard) checks liveness
itself (pid and boot id, like a run's owner), because a killed service cannot remove
its row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from baton.store.migrations import Migration
from baton.store.tx import Row, Tx

__all__ = [
    "SERVICES_MIGRATIONS",
    "ServiceRecord",
    "list_services",
    "register_service",
    "unregister_service",
]

SERVICES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "services.0001_table",
        """
        CREATE TABLE services (
            service_id TEXT PRIMARY KEY,
            kind       TEXT NOT NULL,
            pid        INTEGER NOT NULL,
            host       TEXT NOT NULL,
            boot_id    TEXT NOT NULL,
            started_at TEXT NOT NULL,
            url        TEXT,
            port       INTEGER,
            meta       TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX services_by_kind ON services (kind);
        """,
    ),
)

_COLUMNS: Final = (
    "service_id",
    "kind",
    "pid",
    "host",
    "boot_id",
    "started_at",
    "url",
    "port",
    "meta",
)
_SELECT: Final = f"SELECT {', '.join(_COLUMNS)} FROM services"  # noqa: S608 - constants


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """One running (or once running) service of the project."""

    service_id: str
    kind: str
    """``up``, ``serve``, ..."""
    pid: int
    host: str
    boot_id: str
    started_at: str
    url: str | None = None
    port: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def row(self) -> Row:
        return (
            self.service_id,
            self.kind,
            self.pid,
            self.host,
            self.boot_id,
            self.started_at,
            self.url,
            self.port,
            json.dumps(self.meta, sort_keys=True),
        )

    @classmethod
    def from_row(cls, row: Row) -> ServiceRecord:
        values = dict(zip(_COLUMNS, row, strict=True))
        values["meta"] = json.loads(values["meta"] or "{}")
        return cls(**values)


def register_service(tx: Tx, service: ServiceRecord) -> None:
    """Insert or replace ``service``'s row (same id: a restart of the same service)."""
    names = ", ".join(_COLUMNS)
    marks = ", ".join("?" for _ in _COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "service_id")
    tx.execute(
        f"INSERT INTO services ({names}) VALUES ({marks}) "  # noqa: S608 - constants
        f"ON CONFLICT (service_id) DO UPDATE SET {updates}",
        service.row(),
    )


def unregister_service(tx: Tx, service_id: str) -> int:
    return tx.execute("DELETE FROM services WHERE service_id = ?", (service_id,))


def list_services(tx: Tx, kind: str | None = None) -> list[ServiceRecord]:
    rows: list[Row] = (
        tx.all(f"{_SELECT} WHERE kind = ? ORDER BY started_at", (kind,))
        if kind is not None
        else tx.all(f"{_SELECT} ORDER BY started_at")
    )
    return [ServiceRecord.from_row(r) for r in rows]
