"""Moving a refused file out of ``fcop/``, with its reason beside it.

A file that is not an FCoP envelope Core can read is not FCoP state: left in
place it breaks Core for everyone (``create_task`` parses every TASK in every
stage; ``write_report`` every REPORT). It is moved into baton's state directory
(``.baton/quarantine/<UTC stamp>-<name>``) with ``<that>.reason.json`` next to
it saying where it came from, why, and its ``lstat`` facts. It is never moved
when it changed since the verdict (another look decides then), and never
deleted: a human can inspect or restore it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from baton.fsutil import atomic_write, fsync_dir
from baton.intake.stability import FileFacts
from baton.security.paths import sanitize_id

__all__ = ["quarantine", "reason_path"]


def reason_path(quarantined: Path) -> Path:
    """The sidecar holding why ``quarantined`` was moved."""
    return quarantined.with_name(quarantined.name + ".reason.json")


def quarantine(
    path: Path,
    *,
    into: Path,
    reason: str,
    detail: str,
    origin: str,
    expected: FileFacts | None = None,
    extra: dict[str, Any] | None = None,  # JSON: added to the .reason.json sidecar
) -> Path | None:
    """Move ``path`` into ``into``; None when it vanished or changed since ``expected``."""
    try:
        now = path.lstat()
    except FileNotFoundError:
        return None
    if expected is not None:
        same_kind = stat.S_ISLNK(now.st_mode) or (
            now.st_ino == expected.ino and now.st_size == expected.size
        )
        if not same_kind:
            return None
    into.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = into / f"{stamp}-{sanitize_id(path.name)}"
    os.rename(path, target)
    fsync_dir(path.parent)
    record = {
        "origin": origin,
        "reason": reason,
        "detail": detail,
        "quarantined_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "facts": asdict(FileFacts.of(now)),
        **(extra or {}),
    }
    atomic_write(reason_path(target), json.dumps(record, indent=2, sort_keys=True).encode())
    return target
