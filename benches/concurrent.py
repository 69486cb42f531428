"""Many ``baton run`` processes on one project: no busy failures, and their total ingest.

``N`` runs (the flood agent, ``mixed`` kind, ``C`` updates each) start together on one
project and one store; the baseline is one run of ``N × C`` updates in the same project,
measured in the same round. Per row: the wall time of the whole batch, the updates per
second all the runs ingest together, that as a ratio to the single run's, and how many
runs failed or said anything about a busy or locked store (the target is none; issue 15
also asks for at least 0.5× the single process's rate).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benches.common import median, print_table
from benches.ingest import BATON, Project

SIZES = (8, 32, 64)
QUICK_SIZES = (4,)


def _batch(project: Project, runs: int, count: int) -> tuple[float, int]:
    """Start ``runs`` runs at once; (wall seconds, runs that failed or mentioned a busy store)."""
    args = [str(BATON), "run", "--agent", f"flood-mixed-{count}", "--json", "go"]
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            args,
            cwd=project.root,
            env=project.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(runs)
    ]
    bad = 0
    for proc in procs:
        _, err = proc.communicate(timeout=1800)
        text = err.decode(errors="replace").lower()
        if proc.returncode != 0 or "locked" in text or "busy" in text:
            bad += 1
    return time.perf_counter() - start, bad


def run(sizes: Sequence[int], count: int, repeats: int) -> None:
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-concurrent-"))
    rows = []
    try:
        project = Project(tmp, (count, *(n * count for n in sizes)))
        for runs in sizes:
            many: list[float] = []
            one: list[float] = []
            failures = 0
            for _ in range(repeats):
                wall, bad = _batch(project, runs, count)
                many.append(runs * count / wall)
                failures += bad
                wall, bad = _batch(project, 1, runs * count)
                one.append(runs * count / wall)
                failures += bad
            rate, single = median(many), median(one)
            rows.append(
                [
                    str(runs),
                    f"{count:,}",
                    f"{runs * count / rate:.1f}",
                    f"{rate:,.0f}",
                    f"{single:,.0f}",
                    f"{rate / single:.2f}",
                    str(failures),
                    "MET" if failures == 0 and rate >= 0.5 * single else "NOT MET",
                ]
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(
        f"concurrent runs on one project, median of {repeats}; "
        f"load {load_start:.1f}→{os.getloadavg()[0]:.1f}",
        [
            "runs",
            "updates each",
            "batch wall s",
            "updates/s together",
            "one run, same total",
            "× one run",
            "failed or busy",
            "target",
        ],
        rows,
    )
    print(
        "\nWall times include each process's start (imports, store, agent spawn); the single "
        "run pays it once. Busy = any stderr line mentioning a busy or locked store."
    )
