"""Many ``baton run`` processes on one project share one store and never fail on it busy.

Issue 15 item 4: 64 concurrent runs logged "store busy; retrying" and some could fail
once SQLite's busy handler gave up. Here the write lock is held by another process for
longer than the store's whole old retry budget (busy timeout x attempts) while several
runs start and stream, as a slow peer would: every run must still finish, nothing about
a busy or locked database may reach the user, and every event must be in the store.
No timing is asserted; speed is measured in ``benches/`` (``--only concurrent``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from baton.store.sqlite import SqliteStore
from tests.cli.conftest import spawn_baton

RUNS = 4
UPDATES = 300


def _has_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (its store is open: it is about to write)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if Path(os.readlink(fd)) == path:
                return True
        except OSError:
            continue
    return False


def _flood_profile(project: Path) -> None:
    with (project / "baton.toml").open("a") as toml:
        toml.write(
            "\n[profiles.flood]\n"
            f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
            f'"flood", "--count", "{UPDATES}"]\n'
        )


def test_concurrent_runs_wait_for_a_busy_store_instead_of_failing(
    project: Path, user_home: Path
) -> None:
    _flood_profile(project)
    db = project / ".baton" / "baton.db"
    with SqliteStore.open(db):
        pass  # the schema exists, as in a project that has run before
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA busy_timeout = 60000")
    holder.execute("BEGIN IMMEDIATE")  # a peer holding the write lock
    runs = [
        spawn_baton(project, "run", "--agent", "flood", "--json", f"go {i}", home=user_home)
        for i in range(RUNS)
    ]
    outputs: dict[int, tuple[str, str]] = {}

    def collect(i: int, proc: subprocess.Popen[str]) -> None:
        outputs[i] = proc.communicate(timeout=300)

    readers = [threading.Thread(target=collect, args=(i, p)) for i, p in enumerate(runs)]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 240
        while not all(_has_open(p.pid, db) for p in runs) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling /proc for a condition, bounded
        assert all(_has_open(p.pid, db) for p in runs), "the runs never opened the store"
        # The injected fault: hold the lock longer than the old budget (3 attempts x 5 s
        # busy timeout), then let go. Not a wait for a condition: the duration is the fault.
        time.sleep(16)
    finally:
        holder.execute("COMMIT")
        holder.close()
    for reader in readers:
        reader.join(timeout=300)
    for i, proc in enumerate(runs):
        out, err = outputs[i]
        assert proc.returncode == 0, err
        assert "locked" not in err.lower() and "busy" not in err.lower(), err
        assert out.strip(), f"run {i} printed no events"
    with SqliteStore.open(db) as store:
        finished = store.list_runs()
        assert len(finished) == RUNS
        assert {r.status for r in finished} == {"completed"}, [r.status for r in finished]
        printed = {
            json.loads(out.splitlines()[0])["run_id"]: out.splitlines()
            for out, _ in outputs.values()
        }
        for record in finished:
            stored = list(store.iter_event_json(record.run_id))
            assert len(stored) == len(printed[record.run_id]) > 10
            assert any('"turn.completed"' in line for line in stored)
