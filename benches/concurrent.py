"""Many ``baton run`` processes on one project: no busy failures, and their total ingest.

``N`` runs (the flood agent, ``mixed`` kind, ``C`` updates each) start together on one
project and one store; the baseline is one run of ``N × C`` updates in the same project,
measured in the same round. Per row: the wall time of the whole batch, the updates per
second all the runs ingest together, that as a ratio to the single run's, and how many
runs failed or said anything about a busy or locked store (the target is none; issue 15
also asks for at least 0.5× the single process's rate).

Each of the N processes pays its own start (imports, store, agent spawn: ~0.3 s of CPU),
the single run pays it once, so the plain ratio is mostly the cost of N starts. The
ingest ratio cancels them as the ingest bench does: each batch is also run at a tenth of
its updates, and the rate is the difference, (t(C) − t(C/10)) over 0.9 × the updates,
for the N runs and for the single run alike. The target is judged on that ratio.
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
        text = err.decode(errors="replace")
        if proc.returncode != 0 or "locked" in text.lower() or "busy" in text.lower():
            bad += 1
            print(f"  a run of {runs} failed or waited (exit {proc.returncode}): {text[-600:]!r}")
    return time.perf_counter() - start, bad


def run(sizes: Sequence[int], count: int, repeats: int) -> None:
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-concurrent-"))
    rows = []
    try:
        small = max(1, count // 10)
        project = Project(tmp, (count, small, *(n * c for n in sizes for c in (count, small))))
        for runs in sizes:
            many: list[float] = []
            one: list[float] = []
            many_ingest: list[float] = []
            one_ingest: list[float] = []
            failures = 0
            for _ in range(repeats):
                walls = []
                for batch_runs, each in (
                    (runs, count),
                    (runs, small),
                    (1, runs * count),
                    (1, runs * small),
                ):
                    wall, bad = _batch(project, batch_runs, each)
                    walls.append(wall)
                    failures += bad
                many.append(runs * count / walls[0])
                one.append(runs * count / walls[2])
                ingested = runs * (count - small)
                many_ingest.append(ingested / max(walls[0] - walls[1], 1e-9))
                one_ingest.append(ingested / max(walls[2] - walls[3], 1e-9))
            rate, single = median(many), median(one)
            ingest_ratio = median(many_ingest) / median(one_ingest)
            rows.append(
                [
                    str(runs),
                    f"{count:,}",
                    f"{runs * count / rate:.1f}",
                    f"{rate:,.0f}",
                    f"{single:,.0f}",
                    f"{rate / single:.2f}",
                    f"{ingest_ratio:.2f}",
                    str(failures),
                    "MET" if failures == 0 and ingest_ratio >= 0.5 else "NOT MET",
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
            "ingest × one run",
            "failed or busy",
            "target",
        ],
        rows,
    )
    print(
        "\nWall times include each process's start (imports, store, agent spawn); the single "
        "run pays it once. Ingest × one run: both rates with the starts cancelled, "
        "(t(C) − t(C/10)) / 0.9 C (the target). Busy = any stderr line mentioning a busy or "
        "locked store."
    )
