"""The crash-point harness: SIGKILL ``baton up`` at every durable boundary and at random points.

Run it as a tool (``python -m tests.crash.harness [--long] [--kills N] [--seed S]
[--pressure]``; measured for issue 30: ``--kills 500 --pressure --seed 30`` under
``stress-ng`` CPU and fsync load beside other test runs on 2 cores, 103 flows, 706 runs of
``baton up``, 500 kills, 0 invariant breaks, 76 min) or
through ``tests/crash/test_crash_points.py`` (the CI share). It drives a real team flow
on the built-in agent through the real CLI, in a fresh project per flow:

* ADMIN gives PM a release checklist; PM (the leader) delegates to DEV, QA and OPS; each
  role's step appends one line to its side-effect counter file; PM consolidates; the
  consolidated report waits for ADMIN's review, which the harness approves (a human
  answer, from another process, as ``baton answer`` does it).

Each flow is driven by restarting ``baton up --until-idle`` until the root TASK is done.
A restart is killed (SIGKILL) at a chosen point:

* ``boundary``: the Nth durable write of one kind (``baton.crashpoints``: an ``fcop``
  publication, receipt-stage write or removal of each directory, a store commit), in the
  daemon or in a role's MCP server; the write completes, then the daemon dies;
* ``random``: after a random delay into the run (mid-turn, mid-startup, anywhere).

After every kill, and after every run that came back idle, the harness checks the
invariants of issue 9 (see :func:`check_after_kill`, :func:`check_at_rest`,
:func:`check_final`):

1. **one stage**: each TASK in exactly one FCoP stage and ``fcop``'s
   ``validate_workspace`` valid (at rest);
2. **no double claim / run**: every TASK has exactly one ``claim_task``; per TASK, the
   step's side effects ran at most once per turn baton dispatched for it, a turn that
   finished is never dispatched again, and a re-prompt follows only an interrupted (or
   failed) turn;
3. **no delegation or report lost**: PM's children are exactly DEV, QA and OPS, once each;
   every one reported and was accepted; the root's report reaches ADMIN;
4. **the review is in the inbox**: whenever the root waits in review, exactly one pending
   review request for it is in the ledger (and none once it is decided);
5. **no orphan**: within 1.5 s of a kill no process of that ``baton up`` is left (agents,
   their MCP servers, their steps, the reaper).

The report is a table: kill points (by kind) × invariants, with how many kills hit each.

These flows run with ``[team] isolation = "none"``; :mod:`tests.crash.worktree_flows`
is the same harness on task trees with their own branch and worktree (kills before and
after every git step; its own invariants), and ``--long`` runs its long share too.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.project import without_isolation

ROLES = ("DEV", "QA", "OPS")
CHECKLIST = """Release {n}.

- [ ] @DEV build the artifact
  ```sh
  date +%s.%N >> counters/DEV.log
  ```
- [ ] @QA test the artifact
  ```sh
  date +%s.%N >> counters/QA.log
  ```
- [ ] @OPS stage the release
  ```sh
  date +%s.%N >> counters/OPS.log
  ```
"""
INVARIANTS = (
    "one stage + valid",
    "no double claim/run",
    "no lost work",
    "review in inbox",
    "no orphan",
)
AFTERLIFE = 1.0
"""Seconds after a kill within which the last side effect of the dead daemon's agents may land."""
ORPHAN_DEADLINE = 10.0
"""Seconds within which every process of the dead daemon must be gone (the time taken is reported)."""
UP_TIMEOUT = 300.0


class InvariantBroken(AssertionError):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass
class Tally:
    """Kills per kill point, and invariant checks (and breaks) per kill point."""

    kills: collections.Counter[str] = field(default_factory=collections.Counter)
    checks: dict[str, collections.Counter[str]] = field(default_factory=dict)
    breaks: list[str] = field(default_factory=list)
    flows: int = 0
    restarts: int = 0
    seconds: float = 0.0
    cleanup: float = 0.0
    """The longest wait for a dead daemon's processes to be gone (polling included)."""
    invariants: tuple[str, ...] = INVARIANTS
    """The table's columns (the worktree flows check their own set)."""

    def checked(self, point: str, invariant: str) -> None:
        self.checks.setdefault(point, collections.Counter())[invariant] += 1

    @property
    def total_kills(self) -> int:
        return sum(self.kills.values())

    def table(self) -> str:
        header = ["kill point", "kills", *self.invariants]
        rows = []
        for point in sorted(self.kills):
            checks = self.checks.get(point, collections.Counter())
            rows.append(
                [point, str(self.kills[point])]
                + [f"{checks[i]} ok" if checks[i] else "-" for i in self.invariants]
            )
        rows.append(
            [
                "**total**",
                str(self.total_kills),
                *[f"{sum(c[i] for c in self.checks.values())} ok" for i in self.invariants],
            ]
        )
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        out += [line(r) for r in rows]
        out.append(
            f"\n{self.flows} flows, {self.restarts} runs of `baton up`, {self.total_kills} kills, "
            f"{len(self.breaks)} invariant breaks, {self.seconds:.0f} s; slowest cleanup after a "
            f"kill {self.cleanup:.2f} s (as polled)"
        )
        return "\n".join(out)


# --------------------------------------------------------------------------- project


@dataclass
class Project:
    root: Path
    home: Path
    index: int

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "XDG_STATE_HOME": str(self.home / "xdg"),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_CACHE_HOME": str(self.home / "cache"),
            "XDG_DATA_HOME": str(self.home / "data"),
            "COLUMNS": "200",
        }

    def baton(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "baton", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    @classmethod
    def create(cls, base: Path, index: int) -> Project:
        root = base / f"flow-{index}" / "repo"
        home = base / f"flow-{index}" / "home"
        root.mkdir(parents=True)
        home.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        project = cls(root, home, index)
        done = project.baton("init")
        if done.returncode != 0:
            raise RuntimeError(f"baton init failed: {done.stderr}")
        without_isolation(root)
        (root / "counters").mkdir()
        (root / "TASK.md").write_text(CHECKLIST.format(n=index))
        created = project.baton(
            "task", "new", "--to", "PM", "--subject", f"Release {index}", "--body-file", "TASK.md"
        )
        if created.returncode != 0:
            raise RuntimeError(f"task new failed: {created.stderr}")
        return project

    # ------------------------------------------------------------------ facts

    def port(self) -> Any:
        from baton.fcop_port.port import FcopPort

        return FcopPort(self.root)

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.root / '.baton' / 'baton.db'}?mode=ro", uri=True)

    def root_task(self) -> str:
        tasks = []
        for stage in ("inbox", "active", "review", "done", "archive"):
            for path in (self.root / "fcop" / "_lifecycle" / stage).glob("TASK-*.md"):
                if "\nsender: ADMIN\n" in path.read_text(errors="replace").split("\n---\n", 1)[0]:
                    tasks.append(path.stem)
        ids = sorted(set(tasks))
        if len(ids) != 1:
            raise RuntimeError(f"expected one root TASK, found {ids}")
        return ids[0]


def _processes_of(project: Project, extra: Iterable[int] = ()) -> list[tuple[int, str]]:
    """Live processes of this project: cwd inside it, or one of ``extra``."""
    wanted = set(extra)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X"):
            continue
        mine = cwd.startswith(str(project.root.parent)) or pid in wanted
        if mine or (str(project.root) in cmd and "baton" in cmd):
            found.append((pid, cmd.strip()[:160]))
    return found


# ------------------------------------------------------------------------ invariants


def check_after_kill(
    project: Project,
    tally: Tally,
    point: str,
    reaper_pids: set[int],
    killed_at: float,
    counters: Iterable[Path] | None = None,
) -> None:
    """No process of the dead daemon is left, and none did work more than 1 s after it died.

    ``counters``: the side-effect logs the steps append to (default: the release flow's,
    ``counters/ROLE.log`` in the project)."""
    deadline = time.monotonic() + ORPHAN_DEADLINE
    started = time.monotonic()
    left = _processes_of(project, reaper_pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _processes_of(project, reaper_pids)
    tally.cleanup = max(tally.cleanup, time.monotonic() - started)
    if left:
        for pid, _ in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise InvariantBroken("no orphan", f"{len(left)} processes outlived the kill: {left}")
    logs = (
        [project.root / "counters" / f"{role}.log" for role in ROLES]
        if counters is None
        else counters
    )
    for path in logs:
        if path.exists():
            late = [float(t) for t in path.read_text().split() if float(t) > killed_at + AFTERLIFE]
            if late:
                raise InvariantBroken(
                    "no orphan", f"{path.stem}'s step ran {late[0] - killed_at:.2f}s after the kill"
                )
    tally.checked(point, "no orphan")


def _stages(project: Project) -> dict[str, list[str]]:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for stage in ("inbox", "active", "review", "done", "archive"):
        for path in (project.root / "fcop" / "_lifecycle" / stage).glob("TASK-*.md"):
            found[path.stem].append(stage)
    return found


def _check_one_stage(project: Project) -> None:
    from baton.fcop_port.recovery import validate_workspace

    doubles = {t: s for t, s in _stages(project).items() if len(s) != 1}
    if doubles:
        raise InvariantBroken("one stage + valid", f"TASKs in several stages: {doubles}")
    verdict = validate_workspace(project.root)
    if not verdict["valid"]:
        raise InvariantBroken("one stage + valid", f"validate_workspace: {verdict['errors'][:3]}")


def _counter(project: Project, role: str) -> int:
    path = project.root / "counters" / f"{role}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _check_runs(project: Project, port: Any, root: str) -> None:
    """Claims once; side effects at most once per dispatched turn; no finished turn redone."""
    for task_id in _stages(project):
        with contextlib.suppress(Exception):
            info = port.read_task(task_id)
            if info.stage != "inbox" and info.claims != 1:
                raise InvariantBroken(
                    "no double claim/run", f"{task_id} was claimed {info.claims} times"
                )
    with contextlib.closing(project.db()) as db:
        turns = db.execute(
            "SELECT task_id, dispatch, kind, state, outcome FROM team_turns ORDER BY task_id, dispatch"
        ).fetchall()
    by_task: dict[str, list[tuple[int, str, str, str | None]]] = collections.defaultdict(list)
    for task_id, dispatch, kind, state, outcome in turns:
        by_task[task_id].append((dispatch, kind, state, outcome))
    for task_id, rows in by_task.items():
        work = [r for r in rows if r[1] != "review"]
        for before, after in itertools.pairwise(work):
            if after[1] == "resume" and before[2] != "interrupted":
                raise InvariantBroken(
                    "no double claim/run",
                    f"{task_id}: turn {after[0]} re-prompts a turn that was {before[2]}",
                )
            if after[1] == "work" and before[1] == "work" and before[2] == "finished":
                raise InvariantBroken(
                    "no double claim/run", f"{task_id}: its finished work turn ran again"
                )
    children = [c for c in port.children(root)]
    for child in children:
        runs = _counter(project, child.recipient)
        dispatched = [
            r for r in by_task.get(child.task_id, []) if r[1] in ("work", "resume", "retry")
        ]
        if runs > max(1, len(dispatched)):
            raise InvariantBroken(
                "no double claim/run",
                f"{child.recipient}'s step ran {runs} times for {len(dispatched)} dispatched turns",
            )


def _check_no_lost_work(port: Any, root: str, *, final: bool) -> None:
    children = port.children(root)
    recipients = sorted(c.recipient for c in children)
    if recipients and recipients != sorted(ROLES) and final:
        raise InvariantBroken("no lost work", f"PM delegated to {recipients}")
    if len(recipients) != len(set(recipients)):
        raise InvariantBroken("no lost work", f"a delegation was doubled: {recipients}")
    if final:
        for child in children:
            head = port.find_report_head(child.task_id, child.attempt_id)
            if child.stage != "done" or head is None:
                raise InvariantBroken(
                    "no lost work", f"{child.recipient}'s {child.task_id} is {child.stage}"
                )


def _check_review(project: Project, port: Any, root: str) -> str | None:
    """The root's pending review request, if any; raise if the ledger disagrees with FCoP.

    In review, exactly one review request is open (pending, or answered and not yet
    applied); in any other stage none is.
    """
    stage = port.read_task(root).stage
    with contextlib.closing(project.db()) as db:
        rows = db.execute(
            "SELECT request_id, state FROM requests WHERE kind = 'review' AND jsonrpc_id LIKE ?",
            (f'"review:{root}:%',),
        ).fetchall()
    open_ = [(r, s) for r, s in rows if s in ("pending", "answered")]
    if stage == "review" and len(open_) != 1:
        raise InvariantBroken(
            "review in inbox", f"root in review with {len(open_)} open review requests: {rows}"
        )
    if stage != "review" and open_:
        raise InvariantBroken("review in inbox", f"root is {stage} but a review is open: {open_}")
    pending = [r for r, s in open_ if s == "pending"]
    return pending[0] if pending else None


def check_at_rest(project: Project, tally: Tally, points: list[str]) -> str | None:
    """Invariants 1-4 after a run came back idle, credited to every kill it recovered from."""
    port = project.port()
    root = project.root_task()
    for invariant, check in (
        ("one stage + valid", lambda: _check_one_stage(project)),
        ("no double claim/run", lambda: _check_runs(project, port, root)),
        ("no lost work", lambda: _check_no_lost_work(port, root, final=False)),
    ):
        check()
        for point in points:
            tally.checked(point, invariant)
    review = _check_review(project, port, root)
    for point in points:
        tally.checked(point, "review in inbox")
    return review


def check_final(project: Project, tally: Tally, points: list[str]) -> None:
    port = project.port()
    root = project.root_task()
    _check_one_stage(project)
    _check_runs(project, port, root)
    _check_no_lost_work(port, root, final=True)
    if port.read_task(root).stage != "done":
        raise InvariantBroken("no lost work", "the root TASK did not finish")
    _check_review(project, port, root)
    for role in ROLES:
        if _counter(project, role) < 1:
            raise InvariantBroken("no lost work", f"{role}'s step never ran")
    for point in points:
        tally.checked(point, "no lost work")


# ------------------------------------------------------------------------------ runs


@dataclass
class Kill:
    """Where to kill one run: the Nth write of a kind, or after a delay."""

    kind: str | None = None
    at: int = 0
    delay: float | None = None

    @property
    def point(self) -> str:
        if self.delay is not None:
            return "random: mid-run"
        return f"boundary: {self.kind or 'any durable write'}"


def run_up(
    project: Project, kill: Kill | None, trace: Path
) -> tuple[int, set[int], list[str], float]:
    """One ``baton up --until-idle``: (exit code, reaper pids, kinds it wrote, time it ended)."""
    counter = trace.with_suffix(".count")
    counter.unlink(missing_ok=True)
    trace.unlink(missing_ok=True)
    env = {**project.env, "BATON_CRASH_COUNTER": str(counter), "BATON_CRASH_TRACE": str(trace)}
    if kill is not None and kill.delay is None:
        env["BATON_CRASH_AT"] = str(kill.at)
        if kill.kind:
            env["BATON_CRASH_KIND"] = kill.kind
    proc = subprocess.Popen(
        [sys.executable, "-m", "baton", "up", "--until-idle"],
        cwd=project.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    reapers: set[int] = set()
    try:
        if kill is not None and kill.delay is not None:
            try:
                proc.wait(kill.delay)
            except subprocess.TimeoutExpired:
                reapers = _reapers_of(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
        else:
            # a boundary kill needs the reaper's pid too, if it fires
            deadline = time.monotonic() + 10
            while not reapers and proc.poll() is None and time.monotonic() < deadline:
                reapers = _reapers_of(proc.pid)
                if not reapers:
                    time.sleep(0.02)
        code = proc.wait(UP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise RuntimeError("baton up did not finish in time") from None
    ended = time.time()
    err = proc.stderr.read() if proc.stderr else ""
    if code not in (0, -signal.SIGKILL):
        raise RuntimeError(f"baton up exited {code}: {err[-3000:]}")
    kinds = [line.split()[1] for line in trace.read_text().splitlines()] if trace.exists() else []
    return code, reapers, kinds, ended


def _reapers_of(pid: int) -> set[int]:
    out = set()
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
                if ppid == pid and b"baton.team.reaper" in (entry / "cmdline").read_bytes():
                    out.add(int(entry.name))
    return out


def drive_flow(
    base: Path,
    index: int,
    kills: list[Kill],
    tally: Tally,
    *,
    max_runs: int = 200,
) -> list[str]:
    """Drive one flow to its end, killing runs as planned; returns the write kinds seen."""
    project = Project.create(base, index)
    trace = base / f"flow-{index}" / "trace"
    seen: list[str] = []
    plan = list(kills)
    runs = 0
    answered = False
    recovering: list[str] = []
    """Kill points since the last run that came back idle: its checks are their recovery's."""
    while True:
        runs += 1
        if runs > max_runs:
            raise RuntimeError(f"flow {index} did not finish in {max_runs} runs")
        kill = plan.pop(0) if plan else None
        code, reapers, kinds, ended = run_up(project, kill, trace)
        tally.restarts += 1
        seen += kinds
        if code == -signal.SIGKILL:
            assert kill is not None
            point = kill.point
            if kill.delay is None and kinds:
                point = f"boundary: {kinds[-1]}"
            tally.kills[point] += 1
            check_after_kill(project, tally, point, reapers, ended)
            recovering.append(point)
            continue
        point = "at rest (no kill)" if kill is None else f"{kill.point} (did not fire)"
        review = check_at_rest(project, tally, [point, *recovering])
        finished_points = [point, *recovering]
        recovering = []
        port = project.port()
        root = project.root_task()
        stage = port.read_task(root).stage
        if stage == "done":
            check_final(project, tally, finished_points)
            tally.flows += 1
            return seen
        if review is not None and not answered:
            done = project.baton("answer", review, "--accept", "--reason", "ship it")
            if done.returncode != 0:
                raise RuntimeError(f"baton answer failed: {done.stderr}")
            answered = True
        elif kill is None and not plan:
            raise InvariantBroken(
                "no lost work",
                f"idle with the root in {stage}, nothing left for a human "
                f"({'answered' if answered else 'no review'})",
            )


def boundary_kinds(base: Path, tally: Tally) -> tuple[list[str], list[str]]:
    """The durable writes of an undisturbed flow: (kinds in first-seen order, every write)."""
    seen = drive_flow(base, 0, [], tally)
    order: list[str] = []
    for kind in seen:
        if kind not in order:
            order.append(kind)
    return order, seen


KILLS_PER_FLOW = 6
"""Kills planned per flow; each killed run restarts the same flow, so it makes progress."""


def boundary_plans(kinds: list[str], every: list[str]) -> list[list[Kill]]:
    """Every kind of durable write, killed at its first and (when it repeats) last occurrence."""
    counts = collections.Counter(every)
    targeted = [Kill(kind=k, at=1) for k in kinds]
    targeted += [Kill(kind=k, at=counts[k]) for k in kinds if counts[k] > 1]
    return [targeted[i : i + KILLS_PER_FLOW] for i in range(0, len(targeted), KILLS_PER_FLOW)]


def random_plans(kills: int, rng: random.Random) -> list[list[Kill]]:
    """Random delays into a run, and the Nth durable write of any kind."""
    plans = []
    while sum(map(len, plans)) < kills:
        plan = []
        for _ in range(min(KILLS_PER_FLOW, kills - sum(map(len, plans)))):
            if rng.random() < 0.5:
                plan.append(Kill(delay=rng.uniform(0.5, 8.0)))
            else:
                plan.append(Kill(at=rng.randint(1, 60)))
        plans.append(plan)
    return plans


def campaign(
    kills: int, *, seed: int, base: Path, boundaries: bool = True, first_flow: int = 1
) -> Tally:
    """Every boundary kind (when ``boundaries``), then random kills until ``kills`` have fired."""
    rng = random.Random(seed)
    tally = Tally()
    started = time.monotonic()
    plans: list[list[Kill]] = []
    if boundaries:
        kinds, every = boundary_kinds(base, tally)
        plans += boundary_plans(kinds, every)
    index = first_flow
    while plans or tally.total_kills < kills:
        plan = plans.pop(0) if plans else random_plans(kills - tally.total_kills, rng)[0]
        try:
            drive_flow(base, index, plan, tally)
        except InvariantBroken as exc:
            tally.breaks.append(f"flow {index}: {exc}")
        index += 1
    tally.seconds = time.monotonic() - started
    return tally


PRESSURE_WRITER = r"""
import os, sys, time
path = sys.argv[1]
with open(path, "wb") as out:
    while True:  # a writer that keeps the disk's fsync queue and one core busy
        out.write(os.urandom(64 * 1024))
        out.flush()
        os.fsync(out.fileno())
        if out.tell() > 64 * 1024 * 1024:
            out.seek(0)
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            pass
"""


@contextlib.contextmanager
def pressure(where: Path) -> Iterator[str]:
    """CPU and fsync pressure for the campaign's length (issue 30 item 6): ``stress-ng``
    (one CPU worker at 60 % and one writer fsyncing its file), else two parallel writers
    that fsync in a loop. Stopped, with everything it wrote, when the campaign ends."""
    where.mkdir(parents=True, exist_ok=True)
    stress = shutil.which("stress-ng")
    if stress is not None:
        argv = [
            stress,
            "--cpu", "1", "--cpu-load", "60",
            "--hdd", "1", "--hdd-bytes", "64M", "--hdd-opts", "fsync",
            "--temp-path", str(where), "--timeout", "0", "--quiet",
        ]  # fmt: skip
        procs = [subprocess.Popen(argv, start_new_session=True)]
        what = "stress-ng --cpu 1 --cpu-load 60 --hdd 1 --hdd-opts fsync"
    else:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", PRESSURE_WRITER, str(where / f"w{n}")],
                start_new_session=True,
            )
            for n in range(2)
        ]
        what = "2 parallel fsync writers"
    try:
        yield what
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(where, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.harness")
    parser.add_argument(
        "--long", action="store_true", help="at least 500 kills, then the worktree flows' long run"
    )
    parser.add_argument("--kills", type=int, default=None)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--keep", type=Path, default=None, help="keep the projects here")
    parser.add_argument("--json", type=Path, default=None, help="write the tally as JSON")
    parser.add_argument(
        "--pressure",
        action="store_true",
        help="run under CPU and fsync pressure (stress-ng, else parallel writers)",
    )
    args = parser.parse_args(argv)
    kills = args.kills or (500 if args.long else 60)
    base = args.keep or Path(tempfile.mkdtemp(prefix="baton-crash-"))
    base.mkdir(parents=True, exist_ok=True)
    with pressure(base / "pressure") if args.pressure else contextlib.nullcontext() as load:
        return _run(args, kills, base, load)


def _run(args: argparse.Namespace, kills: int, base: Path, load: str | None) -> int:
    tally = campaign(kills, seed=args.seed, base=base)
    if load:
        print(f"under pressure: {load}")
    print(tally.table())
    for line in tally.breaks:
        print("BROKEN", line)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "kills": dict(tally.kills),
                    "checks": {k: dict(v) for k, v in tally.checks.items()},
                    "breaks": tally.breaks,
                    "flows": tally.flows,
                    "restarts": tally.restarts,
                    "seconds": tally.seconds,
                    "pressure": load,
                },
                indent=2,
            )
        )
    code = 1 if tally.breaks else 0
    if args.long:  # and the task trees' git steps (issue 26)
        from tests.crash.worktree_flows import main as worktree_main

        code |= worktree_main(
            ["--long", "--seed", str(args.seed), "--keep", str(base / "worktrees")]
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
