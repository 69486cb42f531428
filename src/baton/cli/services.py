"""Long-running commands of a project announce themselves, so other shells can find them.

``baton up`` and ``baton serve`` write ``<state>/services/<name>.json`` (their pid,
start time and, for the dashboard, its URL without the token) when they start and
remove it when they stop; ``<name>.stop`` says a stop was asked for. (These files are
to become rows of the Store's services repository; this module is the only reader and
writer, so that swap stays here.) ``baton down`` finds the team loop there; a headless
``baton run`` finds the dashboard to point at. A record whose process is gone (a
crash, ``kill -9``) counts as absent.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from baton.fsutil import atomic_write
from baton.procgroup import process_alive

__all__ = ["announce", "find", "request_stop", "running_dashboard", "stop_requested"]


def _path(state_dir: Path, name: str) -> Path:
    return state_dir / "services" / f"{name}.json"


# Any: a JSON record a running service wrote for others to find.
def find(state_dir: Path, name: str) -> dict[str, Any] | None:
    """The record of a running ``name`` in this project, or ``None``."""
    try:
        data = json.loads(_path(state_dir, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    pid = data.get("pid")
    if not isinstance(pid, int) or pid <= 0 or not process_alive(pid):
        return None
    return {str(k): v for k, v in data.items()}


def running_dashboard(state_dir: Path) -> str | None:
    """The address of this project's running dashboard (no code, no token), if one runs."""
    record = find(state_dir, "serve")
    url = record.get("url") if record else None
    return url if isinstance(url, str) else None


def _stop_path(state_dir: Path, name: str) -> Path:
    return state_dir / "services" / f"{name}.stop"


def request_stop(state_dir: Path, name: str, pid: int) -> None:
    """Say that the stop about to be signalled to ``pid`` was asked for (``baton down``)."""
    atomic_write(_stop_path(state_dir, name), str(pid).encode("ascii"))


def stop_requested(state_dir: Path, name: str) -> bool:
    """Whether a stop was asked for this process (so it is not an interruption)."""
    try:
        return _stop_path(state_dir, name).read_text(encoding="ascii").strip() == str(os.getpid())
    except OSError:
        return False


# Any: the JSON record's fields, written as given.
@contextlib.contextmanager
def announce(state_dir: Path, name: str, **info: Any) -> Iterator[dict[str, Any]]:
    """Write the record for this process while the block runs, remove it after."""
    path = _path(state_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = {"pid": os.getpid(), "started_at": time.time(), **info}
    atomic_write(path, json.dumps(record).encode())
    try:
        yield record
    finally:
        current = find(state_dir, name)
        if current is None or current.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if stop_requested(state_dir, name):
            with contextlib.suppress(FileNotFoundError):
                _stop_path(state_dir, name).unlink()
