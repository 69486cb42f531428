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
:class:`~baton.intake.worker.ParseWorker`, once it is stable
(:func:`~baton.intake.stability.assess`); a file still settling is
left for the next pass. Verdicts are remembered by file identity, so a pass over
an unchanged workspace opens nothing.

With a change feed (``watch=True``, :mod:`~baton.intake.feed`), a
pass costs O(changes), not O(files): it judges only the names the kernel reported
since the last pass, plus the files still settling and those with more than one
link (see the feed's docstring for what inotify cannot see); a pass with nothing
reported lists no directory and stats nothing. It still makes a full pass
at the first sweep, whenever the feed cannot be trusted (armed or re-armed, an
overflow, a watch lost, a screened directory replaced, a read error, a pass that
failed half-way) and, as a backstop, at least every ``backstop_s`` (300 s: bounded
cost at 70,000 files, and it bounds how long a change inotify cannot see goes
unjudged). Without a feed (``watch=False``, or no inotify) every pass is full.

``on_change(origin)`` is called for every file judged on new facts (passed or
refused, not while settling; created, replaced or modified in place) and for every
remembered file that vanished or was forgotten (:meth:`Sweeper.forget`), in full and feed
passes alike: the hook for an index of REPORTs/REVIEWs. It is called after the
pass, outside the sweeper's lock, in the thread that ran the pass (so it may call
:meth:`Sweeper.passed_facts`); an exception from it is logged, not raised.

The sweeper only judges; the caller decides: the team loop quarantines and files an
ISSUE, ``baton status`` shows the file as unsafe and reads around it.
:func:`oversize` is the ``lstat``-only check ``task new`` runs before Core's
whole-workspace scan. ``fcop/fcop.json`` is not swept: it is read, bounded, when
the workspace is opened (a bad manifest stops the command with a message), and
moving it away would destroy the workspace.

Length: one concept, the sweep; the full pass, the feed pass and the verdict memory
they share (passed, refused, settling, multi-linked) must change together.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from pathlib import Path
from typing import Literal

from baton.intake.feed import ChangeFeed, open_feed
from baton.intake.limits import DEFAULT_LIMITS, IntakeLimits
from baton.intake.screen import Refused
from baton.intake.stability import FileFacts, Settling, Unstable, assess
from baton.intake.worker import ParseWorker

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

BACKSTOP_S = 300.0
"""With a change feed, a full pass at least this often (see the module docstring)."""

log = logging.getLogger(__name__)


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
    nlink: int = 1


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
    """Files whose ``lstat`` was taken in this pass."""
    full: bool = True
    """Whether this pass listed the whole surface (False: only what the feed reported)."""


@dataclass(frozen=True, slots=True)
class _Listing:
    """One screened directory and which of its names are screened."""

    directory: Path
    origin: str
    """The directory relative to the project root, posix (origins are built on it)."""
    prefix: str
    suffix: str
    kind: Kind

    def covers(self, name: str) -> bool:
        return name.startswith(self.prefix) and name.endswith(self.suffix)


def _listings(project_root: Path, stages: Sequence[str], appends: bool) -> list[_Listing]:
    dirs: list[tuple[str, str, str, Kind]] = [
        (f"fcop/_lifecycle/{s}", "TASK-", ".md", "envelope") for s in stages
    ]
    if appends:
        dirs += [(f"fcop/{d}", p, ".md", "envelope") for d, p in APPEND_BUCKETS]
        dirs.append(("fcop/operations", "", ".json", "json"))
    return [_Listing(project_root / rel, rel, p, x, kind) for rel, p, x, kind in dirs]


def _target(listing: _Listing, name: str, st: os.stat_result) -> Target:
    # Strings, not pathlib, for the origin: a full pass builds one Target per file
    # (pathlib's parsing was three quarters of a pass's CPU).
    return Target(
        path=listing.directory / name,
        origin=f"{listing.origin}/{name}",
        kind=listing.kind,
        expect_id=name[: -len(".md")] if listing.kind == "envelope" else None,
        facts=FileFacts.of(st),
        is_regular=stat.S_ISREG(st.st_mode),
        is_symlink=stat.S_ISLNK(st.st_mode),
        nlink=st.st_nlink,
    )


def _listed(listings: Iterable[_Listing]) -> Iterator[Target]:
    for listing in listings:
        directory = os.fspath(listing.directory)
        try:
            with os.scandir(directory) as entries:
                names = sorted(e.name for e in entries if listing.covers(e.name))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            try:
                st = os.lstat(os.path.join(directory, name))
            except FileNotFoundError:
                continue
            yield _target(listing, name, st)


def targets(
    project_root: Path, *, stages: Sequence[str] = LIFECYCLE_STAGES, appends: bool = True
) -> Iterator[Target]:
    """Every file of the screened surface, with its ``lstat`` facts (nothing opened)."""
    return _listed(_listings(project_root, stages, appends))


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


@dataclass(eq=False)
class Sweeper:
    """Screen the surface, remembering verdicts by file identity (thread-safe)."""

    root: Path
    """The project root (the directory holding ``fcop/``)."""
    _: KW_ONLY
    worker: ParseWorker
    limits: IntakeLimits = DEFAULT_LIMITS
    stages: Sequence[str] = ("active", "review", "done", "archive")
    appends: bool = True
    require_stable: bool = True
    """False for read-only callers (``status``): screen a fresh file now, don't wait."""
    wall_clock: Callable[[], float] = time.time
    clock: Callable[[], float] = time.monotonic
    watch: InitVar[bool] = False
    backstop_s: float = BACKSTOP_S
    on_change: Callable[[str], None] | None = None
    feed: ChangeFeed | None = field(default=None, init=False)
    """The change feed (None: every pass is full); opened at the first sweep."""
    _listings: list[_Listing] = field(init=False)
    _by_dir: dict[Path, _Listing] = field(init=False)
    _by_origin: dict[str, _Listing] = field(init=False)
    _passed: dict[str, FileFacts] = field(default_factory=dict, init=False)
    _refused: dict[str, tuple[FileFacts, Refused]] = field(default_factory=dict, init=False)
    _first: dict[str, tuple[FileFacts, float]] = field(default_factory=dict, init=False)
    """When a still-settling file was first seen (for ``max_settle_s``)."""
    _linked: set[str] = field(default_factory=set, init=False)
    """Files seen with more than one link: looked at every pass (see the feed)."""
    _last_full: float | None = field(default=None, init=False)
    """When the last full pass began (None: never, or one failed half-way)."""
    _changed: list[str] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self, watch: bool) -> None:
        self.stages = tuple(self.stages)
        self._listings = _listings(self.root, self.stages, self.appends)
        self._by_dir = {listing.directory: listing for listing in self._listings}
        self._by_origin = {listing.origin: listing for listing in self._listings}
        if watch:
            self.feed = open_feed(self.root, [listing.directory for listing in self._listings])

    def verdict(self, target: Target) -> Refused | Settling | None:
        """Judge one target now (None: Core may read it)."""
        with self._lock:
            verdict = self._judge(target)[0]
            changed = self._take_changed()
        self._notify(changed)
        return verdict

    def passed_facts(self, origin: str) -> FileFacts | None:
        """The facts ``origin`` passed screening with (None: not passed, or unknown)."""
        with self._lock:
            return self._passed.get(origin)

    def sweep(self, *, require_stable: bool | None = None) -> SweepReport:
        """One pass over the surface, or over what changed (see the module docstring).

        ``require_stable=False`` judges fresh files now: right after an agent's turn
        ended, whatever it wrote is complete (Core itself never exposes a partial file
        under these names: it links finished temporaries into place). The feed is read
        without blocking in this call, so it holds every change the kernel queued
        before it: nothing the agent wrote during its turn is left for a later pass.
        """
        with self._lock:
            saved = self.require_stable
            if require_stable is not None:
                self.require_stable = require_stable
            try:
                report = self._sweep()
            except BaseException:
                self._last_full = None  # a pass that failed half-way: the next is full
                raise
            finally:
                self.require_stable = saved
                changed = self._take_changed()
        self._notify(changed)
        return report

    def close(self) -> None:
        """Release the change feed (its inotify instance); later passes are full."""
        with self._lock:
            if self.feed is not None:
                self.feed.close()
                self.feed = None

    def forget(self, origin: str) -> None:
        """Drop a remembered verdict (after the caller moved the file away)."""
        with self._lock:
            known = self._passed.pop(origin, None) or self._refused.pop(origin, None)
            self._first.pop(origin, None)
            self._linked.discard(origin)
        if known is not None:
            self._notify([origin])

    # ------------------------------------------------------------------ passes

    def _sweep(self) -> SweepReport:
        now = self.clock()
        if self.feed is not None:
            changes = self.feed.drain()  # before any listing: a later change stays queued
            due = self._last_full is None or now - self._last_full >= self.backstop_s
            if changes.trusted and not due:
                return self._feed_pass(changes.paths)
        self._last_full = now
        return self._full_pass()

    def _full_pass(self) -> SweepReport:
        refused: list[Finding] = []
        settling: list[str] = []
        screened = seen = 0
        present: set[str] = set()
        for target in _listed(self._listings):
            seen += 1
            present.add(target.origin)
            verdict, opened = self._judge(target)
            screened += opened
            if isinstance(verdict, Refused):
                refused.append(Finding(target.path, target.origin, verdict, target.facts))
            elif isinstance(verdict, Settling):
                settling.append(target.origin)
        for gone in (set(self._passed) | set(self._refused) | set(self._first)) - present:
            self._vanished(gone)
        return SweepReport(tuple(refused), tuple(settling), screened, seen, full=True)

    def _feed_pass(self, paths: frozenset[Path]) -> SweepReport:
        """Judge what the feed reported, what is settling and what is multi-linked."""
        candidates: dict[str, tuple[_Listing, str]] = {}
        for path in paths:
            listing = self._by_dir.get(path.parent)
            if listing is not None and listing.covers(path.name):
                candidates[f"{listing.origin}/{path.name}"] = (listing, path.name)
        for origin in (*self._first, *self._linked):
            folder, _, name = origin.rpartition("/")
            listing = self._by_origin.get(folder)
            if listing is not None:
                candidates.setdefault(origin, (listing, name))
        settling: list[str] = []
        screened = seen = 0
        for origin in sorted(candidates):
            listing, name = candidates[origin]
            seen += 1
            try:
                st = os.lstat(listing.directory / name)
            except FileNotFoundError:
                self._vanished(origin)
                continue
            verdict, opened = self._judge(_target(listing, name, st))
            screened += opened
            if isinstance(verdict, Settling):
                settling.append(origin)
        refused = tuple(
            Finding(self.root / origin, origin, verdict, facts)
            for origin, (facts, verdict) in sorted(self._refused.items())
        )
        return SweepReport(refused, tuple(settling), screened, seen, full=False)

    def _vanished(self, origin: str) -> None:
        known = self._passed.pop(origin, None) or self._refused.pop(origin, None)
        self._first.pop(origin, None)
        self._linked.discard(origin)
        if known is not None:
            self._changed.append(origin)

    def _take_changed(self) -> list[str]:
        changed, self._changed = self._changed, []
        return changed

    def _notify(self, origins: Sequence[str]) -> None:
        if self.on_change is None:
            return
        for origin in origins:
            try:
                self.on_change(origin)
            except Exception:  # a listener's bug never stops a sweep
                log.exception("intake sweep: on_change(%r) failed", origin)

    def _judge(self, target: Target) -> tuple[Refused | Settling | None, bool]:
        """The verdict, and whether the worker opened the file for it."""
        if target.nlink > 1:
            self._linked.add(target.origin)
        else:
            self._linked.discard(target.origin)
        passed = self._passed.get(target.origin)
        if passed == target.facts:
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
        if not isinstance(verdict, Settling):
            self._changed.append(target.origin)  # judged on facts it was not judged on
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
