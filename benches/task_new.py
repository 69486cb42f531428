"""``baton task new`` (FCoP T1) at 10 / 1,000 / 10,000 settled tasks, fcop's writer beside baton's.

The workspace is the doorbell benchmark's: ``baton init``'s, with N TASKs settled in
``done/`` with their whole history (create fact, three receipts, a REPORT, two
REVIEWs; see :class:`benches.doorbell.History`). No daemon runs.

Three figures per size:

* **in-process** — what ``baton task new`` does after its imports: open the project
  (``open_context``: config, team, authority key, the FCoP port) and create the TASK
  (``FcopPort.create_task``), with T1 written by fcop 4.0.5's ``fcop.Project``
  ("fcop", the baseline) or by baton's :mod:`baton.fcop_port.lifecycle`
  ("baton"), the two alternating sample by sample in one process;
* **T1 alone** — the ``create_task`` call inside it;
* **CLI** — the real command in a fresh process (``baton task new --json``), and the
  same command for an unknown role, which opens the project and stops before T1:
  the difference is T1, the rest is interpreter start and imports (issue 15 item 5).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benches.common import print_table
from benches.doorbell import (
    FSYNC,
    MODES,
    History,
    _cost,
    _ms,
    _no_fsync,
    _p50,
    _pct,
    _probes_for,
    _ratio,
)

SAMPLES = 20
QUICK_SAMPLES = 5
CLI_SAMPLES = 5
TARGET_MS = 50.0
"""Issue 15: ``task new`` p99 < 50 ms (T1: the command's own work, not interpreter start)."""
BATON = Path(sys.executable).with_name("baton")


@dataclass
class SizeResult:
    size: int
    inproc: dict[str, list[float]] = field(default_factory=dict)
    t1: dict[str, list[float]] = field(default_factory=dict)
    t1_cost: dict[str, list[tuple[float, float, int]]] = field(default_factory=dict)
    """(CPU ms, fsync ms, fsyncs) of each T1."""
    cli: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)
    build_s: float = 0.0


def _workspace(size: int, tmp: Path) -> tuple[Path, dict[str, str]]:
    from baton.fcop_port.project import init_project, open_context

    project = tmp / f"ws{size}"
    project.mkdir()
    env = {**os.environ, "BATON_STATE_DIR": str(tmp / f"state{size}")}
    init_project(project, environ=env)
    history = History.record(open_context(project, environ=env).port)
    with _no_fsync():
        for _ in range(size - 1):
            history.clone()
    return project, env


def _cli(project: Path, env: dict[str, str], role: str, i: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        [str(BATON), "task", "new", "--to", role, "--subject", f"cli {role} {i}", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        check=role != "NOBODY",
        timeout=600,
    )
    return (time.perf_counter() - start) * 1e3


def _measure(size: int, samples: int, tmp: Path, fcop_max: int | None = None) -> SizeResult:
    t0 = time.perf_counter()
    project, env = _workspace(size, tmp)
    result = SizeResult(size, build_s=time.perf_counter() - t0)
    counts = _probes_for(
        size, samples, fcop_max
    )  # fewer fcop samples where fcop's T1 takes seconds
    counts["baton"] = samples  # baton's T1 is O(1): its p99 needs the full count at every size
    result.inproc = {m: [] for m in MODES}
    result.t1 = {m: [] for m in MODES}
    result.t1_cost = {m: [] for m in MODES}
    load_start = os.getloadavg()[0]
    with FSYNC:
        _samples(project, env, counts, result)
    for i in range(CLI_SAMPLES):
        result.cli.append(_cli(project, env, "DEV", i))
        result.floor.append(_cli(project, env, "NOBODY", i))
    result.load = (load_start, os.getloadavg()[0])
    return result


def _samples(
    project: Path, env: dict[str, str], counts: dict[str, int], result: SizeResult
) -> None:
    from baton.fcop_port.project import open_context

    for i in range(max(counts.values())):
        for mode in MODES if i % 2 else MODES[::-1]:
            if len(result.t1[mode]) >= counts[mode]:
                continue
            start = time.perf_counter()
            ctx = open_context(project, environ=env)
            if mode == "fcop":
                ctx.port._lifecycle = None  # T1 through fcop.Project
            opened, cpu, synced, count = (
                time.perf_counter(),
                time.thread_time(),
                FSYNC.ms(),
                FSYNC.count(),
            )
            ctx.port.create_task(
                sender=ctx.team.human, recipient="DEV", subject=f"new {mode} {i}", body="b"
            )
            done = time.perf_counter()
            result.inproc[mode].append((done - start) * 1e3)
            result.t1[mode].append((done - opened) * 1e3)
            result.t1_cost[mode].append(
                ((time.thread_time() - cpu) * 1e3, FSYNC.ms() - synced, FSYNC.count() - count)
            )


def run(sizes: Sequence[int], samples: int, fcop_max: int | None = None) -> None:
    results = []
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-task-new-"))
    try:
        for size in sizes:
            t0 = time.perf_counter()
            results.append(_measure(size, samples, tmp, fcop_max))
            print(f"  task new n={size:,}: {time.perf_counter() - t0:.0f}s", flush=True)
            shutil.rmtree(tmp / f"ws{size}", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for r in results:
        base_in = _p50(r.inproc["fcop"])
        base_t1 = _p50(r.t1["fcop"])
        for mode in MODES:
            inproc, t1 = r.inproc[mode], r.t1[mode]
            if not t1:
                continue  # fcop skipped (--fcop-samples 0)
            rows.append(
                [
                    f"{r.size:,}",
                    mode,
                    str(len(t1)),
                    f"{_ms(statistics.median(inproc))} / {_ms(_pct(inproc, 0.99))}",
                    f"{_ms(statistics.median(t1))} / {_ms(_pct(t1, 0.99))}",
                    _cost(r.t1_cost[mode]),
                    "1" if mode == "fcop" else _ratio(statistics.median(inproc), base_in),
                    "1" if mode == "fcop" else _ratio(statistics.median(t1), base_t1),
                    "MET" if _pct(t1, 0.99) < TARGET_MS else "NOT MET",
                    f"{_ms(statistics.median(r.cli))} / {_ms(statistics.median(r.floor))}"
                    if mode == "baton"
                    else "–",
                    f"{r.load[0]:.1f}→{r.load[1]:.1f}",
                ]
            )
    print_table(
        "baton task new: open the project + T1 create, fcop's writer vs baton's (ms)",
        [
            "settled tasks",
            "T1 writer",
            "samples",
            "in-process p50 / p99",
            "T1 p50 / p99",
            "T1 CPU / fsync p50 (n)",
            "in-process ÷ fcop",
            "T1 ÷ fcop",
            f"T1 p99 < {TARGET_MS:.0f} ms",
            "CLI p50 / floor p50",
            "load 1-min",
        ],
        rows,
    )
    print(
        "in-process = open_context + FcopPort.create_task, as the command runs them after its "
        "imports; the writers alternate sample by sample. CLI = `baton task new --json` in a "
        "fresh process; floor = the same command for an unknown role (opens the project, stops "
        f"before T1). p99 is nearest-rank. Total {time.perf_counter() - started:.0f}s."
    )
