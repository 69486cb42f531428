"""Screening every file Core reads, not only the inbox.

Any file under ``fcop/`` may come from a hostile agent (agents work in the
project, and ``fcop/`` is in the project). Core reads far more than the file
baton asks about: ``create_task`` parses every TASK in every stage and every
operation fact, ``write_report`` every REPORT, a transition its receipts. So
baton screens the whole surface:

* ``fcop/operations/*.json`` (Core's create facts and lifecycle receipts);
* ``fcop/_lifecycle/<stage>/TASK-*.md`` (the doorbell owns the inbox);
* ``fcop/reports/REPORT-*.md``, ``fcop/reviews/REVIEW-*.md``, ``fcop/issues/ISSUE-*.md``.

A pass is two-phase. First an ``lstat`` of everything (cheap): links, non-files
and files over the cap are refused without being opened. Then every file whose
facts changed since it last passed is screened in the
:class:`~baton.coordination.intake.worker.ParseWorker`, once it is stable
(:func:`~baton.coordination.intake.stability.assess`); a file still settling is
left for the next pass. Verdicts are remembered by file identity, so a pass over
an unchanged workspace opens nothing.

The sweeper only judges; the caller decides: the daemon quarantines and files an
ISSUE, ``baton status`` shows the file as unsafe and reads around it.
:func:`oversize` is the ``lstat``-only check ``task new`` runs before Core's
whole-workspace scan. ``fcop/fcop.json`` is not swept: it is read, bounded, when
the workspace is opened (a bad manifest stops the command with a message), and
moving it away would destroy the workspace.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from baton.coordination.intake.limits import DEFAULT_LIMITS, IntakeLimits
from baton.coordination.intake.screen import Refused
from baton.coordination.intake.stability import FileFacts, Settling, Unstable, assess
from baton.coordination.intake.worker import ParseWorker

__all__ = [
    "APPEND_BUCKETS",
    "LIFECYCLE_STAGES",
    "Finding",
    "SweepReport",
    "Sweeper",
    "Target",
    "culprits",
    "oversize",
    "targets",
]

LIFECYCLE_STAGES = ("inbox", "active", "review", "done", "archive")
APPEND_BUCKETS = (("reports", "REPORT-"), ("reviews", "REVIEW-"), ("issues", "ISSUE-"))

Kind = Literal["envelope", "json"]


@dataclass(frozen=True, slots=True)
class Target:
    path: Path
    origin: str
    """Path relative to the project root (what messages and quarantine records say)."""
    kind: Kind
    expect_id: str | None
    facts: FileFacts
    is_regular: bool
    is_symlink: bool


@dataclass(frozen=True, slots=True)
class Finding:
    """A file Core must not read, with the verdict and the facts it was judged on."""

    path: Path
    origin: str
    verdict: Refused
    facts: FileFacts


@dataclass(frozen=True, slots=True)
class SweepReport:
    refused: tuple[Finding, ...]
    settling: tuple[str, ...]
    """Origins of files still changing (judged on a later pass)."""
    screened: int
    """Files opened by the worker in this pass."""
    seen: int


def _scan(directory: Path, prefix: str, suffix: str) -> Iterator[tuple[Path, os.stat_result]]:
    try:
        with os.scandir(directory) as entries:
            names = sorted(e.name for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        path = directory / name
        try:
            yield path, path.lstat()
        except FileNotFoundError:
            continue


def targets(
    project_root: Path, *, stages: Sequence[str] = LIFECYCLE_STAGES, appends: bool = True
) -> Iterator[Target]:
    """Every file of the screened surface, with its ``lstat`` facts (nothing opened)."""
    fcop = project_root / "fcop"
    listings: list[tuple[Path, str, str, Kind]] = [
        (fcop / "_lifecycle" / s, "TASK-", ".md", "envelope") for s in stages
    ]
    if appends:
        listings += [(fcop / d, p, ".md", "envelope") for d, p in APPEND_BUCKETS]
        listings.append((fcop / "operations", "", ".json", "json"))
    for directory, prefix, suffix, kind in listings:
        for path, st in _scan(directory, prefix, suffix):
            yield Target(
                path=path,
                origin=path.relative_to(project_root).as_posix(),
                kind=kind,
                expect_id=path.name[: -len(".md")] if kind == "envelope" else None,
                facts=FileFacts.of(st),
                is_regular=stat.S_ISREG(st.st_mode),
                is_symlink=stat.S_ISLNK(st.st_mode),
            )


def _cap(target: Target, limits: IntakeLimits) -> int:
    return limits.max_json_bytes if target.kind == "json" else limits.max_file_bytes


def _lstat_verdict(target: Target, limits: IntakeLimits) -> Refused | None:
    if target.is_symlink:
        return Refused("symlink", "a symlink (FCoP forbids links)")
    if not target.is_regular:
        return Refused("not_a_file", "not a regular file")
    cap = _cap(target, limits)
    if target.facts.size > cap:
        return Refused(
            "too_large", f"{target.facts.size} bytes, over the {cap}-byte limit; not read"
        )
    return None


def oversize(
    project_root: Path, *, limits: IntakeLimits = DEFAULT_LIMITS, appends: bool = False
) -> list[Finding]:
    """Files Core would read whole that break the caps, by ``lstat`` alone."""
    found = []
    for target in targets(project_root, appends=appends):
        verdict = _lstat_verdict(target, limits)
        if verdict is not None:
            found.append(Finding(target.path, target.origin, verdict, target.facts))
    if appends:
        return found
    for target in targets(project_root, stages=(), appends=True):
        if target.kind == "json":  # Core's create scan reads every operation fact
            verdict = _lstat_verdict(target, limits)
            if verdict is not None:
                found.append(Finding(target.path, target.origin, verdict, target.facts))
    return found


def culprits(
    project_root: Path, *, worker: ParseWorker, limits: IntakeLimits = DEFAULT_LIMITS
) -> list[Finding]:
    """After Core refused a whole-workspace operation: which files made it (screened now)."""
    sweeper = Sweeper(
        project_root,
        worker=worker,
        limits=limits,
        stages=LIFECYCLE_STAGES,
        appends=True,
        require_stable=False,
    )
    return list(sweeper.sweep().refused)


class Sweeper:
    """Screen the surface, remembering verdicts by file identity (thread-safe)."""

    def __init__(
        self,
        project_root: Path,
        *,
        worker: ParseWorker,
        limits: IntakeLimits = DEFAULT_LIMITS,
        stages: Sequence[str] = ("active", "review", "done", "archive"),
        appends: bool = True,
        require_stable: bool = True,
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = project_root
        self.worker = worker
        self.limits = limits
        self.stages = tuple(stages)
        self.appends = appends
        self.require_stable = require_stable
        """False for read-only callers (``status``): screen a fresh file now, don't wait."""
        self.wall_clock = wall_clock
        self.clock = clock
        self._passed: dict[str, FileFacts] = {}
        self._refused: dict[str, tuple[FileFacts, Refused]] = {}
        self._first: dict[str, tuple[FileFacts, float]] = {}
        """When a still-settling file was first seen (for ``max_settle_s``)."""
        self._lock = threading.Lock()

    def verdict(self, target: Target) -> Refused | Settling | None:
        """Judge one target now (None: Core may read it)."""
        with self._lock:
            return self._judge(target)[0]

    def sweep(self, *, require_stable: bool | None = None) -> SweepReport:
        """One pass over the surface (see the module docstring).

        ``require_stable=False`` judges fresh files now: right after an agent's turn
        ended, whatever it wrote is complete (Core itself never exposes a partial file
        under these names: it links finished temporaries into place).
        """
        with self._lock:
            saved = self.require_stable
            if require_stable is not None:
                self.require_stable = require_stable
            try:
                return self._sweep()
            finally:
                self.require_stable = saved

    def _sweep(self) -> SweepReport:
        refused: list[Finding] = []
        settling: list[str] = []
        screened = seen = 0
        present: set[str] = set()
        for target in targets(self.root, stages=self.stages, appends=self.appends):
            seen += 1
            present.add(target.origin)
            verdict, opened = self._judge(target)
            screened += opened
            if isinstance(verdict, Refused):
                refused.append(Finding(target.path, target.origin, verdict, target.facts))
            elif isinstance(verdict, Settling):
                settling.append(target.origin)
        for gone in set(self._passed) - present:
            del self._passed[gone]
        for gone in set(self._refused) - present:
            del self._refused[gone]
        for gone in set(self._first) - present:
            del self._first[gone]
        return SweepReport(tuple(refused), tuple(settling), screened, seen)

    def forget(self, origin: str) -> None:
        """Drop a remembered verdict (after the caller moved the file away)."""
        with self._lock:
            self._passed.pop(origin, None)
            self._refused.pop(origin, None)

    def _judge(self, target: Target) -> tuple[Refused | Settling | None, bool]:
        """The verdict, and whether the worker opened the file for it."""
        if self._passed.get(target.origin) == target.facts:
            return None, False
        known = self._refused.get(target.origin)
        if known is not None and known[0] == target.facts:
            return known[1], False
        verdict: Refused | Settling | None = _lstat_verdict(target, self.limits)
        opened = False
        if verdict is None:
            verdict, opened = self._screen(target)
        if not isinstance(verdict, Settling):
            self._first.pop(target.origin, None)
        if isinstance(verdict, Refused):
            self._passed.pop(target.origin, None)
            self._refused[target.origin] = (target.facts, verdict)
        elif verdict is None:
            self._refused.pop(target.origin, None)
            self._passed[target.origin] = target.facts
        return verdict, opened

    def _screen(self, target: Target) -> tuple[Refused | Settling | None, bool]:
        now = self.clock()
        first = self._first.setdefault(target.origin, (target.facts, now))
        stability = assess(
            target.facts,
            now_wall=self.wall_clock(),
            limits=self.limits,
            first_seen=first,
            now_mono=now,
        )
        if isinstance(stability, Unstable):
            return Refused(
                "unstable", f"still changing after {stability.seconds:.0f} s; not read"
            ), False
        if isinstance(stability, Settling) and self.require_stable:
            return stability, False
        if target.kind == "json":
            result = self.worker.screen_json(target.path)
        else:
            result = self.worker.screen_envelope(target.path, expect_id=target.expect_id)
        if result.before is not None and result.before != target.facts:
            return Settling(0.0), True  # replaced since the listing: judge it next pass
        if isinstance(result.verdict, Refused):
            return result.verdict, True
        if not result.still and self.require_stable:
            return Settling(self.limits.settle_s), True
        return None, True
