"""Which REPORT/REVIEW files are about which (TASK, attempt), without reading them all;
which TASKs name which parent.

fcop 4.0.5 finds a TASK's REPORTs (T3's evidence, ``write_report``'s "one
final per attempt") by parsing *every* REPORT in ``fcop/reports/``; a project
with 10,000 settled TASKs pays that on every look-up. REPORTs and REVIEWs are
append-only: fcop publishes each one by linking a finished temporary to a
fresh name and never rewrites it. So a file's identity (its name and inode)
fixes its subject, and a folder whose entries did not change needs no new
listing:

* the folder is listed again only when its ``(mtime, inode)`` moved, or when
  the last listing began within :data:`RACY_NS` of its mtime (the "racy git"
  rule: a change in the same clock tick as the listing could leave the mtime
  unchanged; the kernel stamps directory changes with a coarse clock);
* a new or replaced entry is read once: its frontmatter parsed with libyaml
  (bounded by :data:`MAX_READ`) for ``subject_ref`` and ``attempt_id``;
* an entry that does not parse, is too large, or is not a regular file is
  *unknown* and offered to every look-up, so the caller's validation (fcop's
  own parser and schema) raises what fcop would have raised on it.

The same index over a stage folder of TASKs answers "the children of P": a
TASK's ``parent`` never changes, and a move to another stage is a new name in
another folder (one read per move).

In a large folder a listing itself is the cost (10,000 REPORTs: ~14 ms, paid
on the look-up after every publication). So once an index has listed a folder of
:data:`WATCH_FROM` entries or more, its :class:`FolderWatch` (one inotify
instance for a workspace's indexes, :class:`~baton.intake.feed.ChangeFeed`)
is armed, and from then on a look-up reads the kernel's queue of names created,
removed or renamed in the folder and reclassifies just those: no listing, and no
"racy" window (the kernel queues the event inside the publisher's ``link``). The
watch says when it may have missed something (armed anew, an overflow, a folder
replaced): every index then lists once more. Small folders (and machines where
inotify is missing or its instances are used up) keep the listing rule above,
so a project pays for an inotify instance only once it is large.

A look-up only *offers* candidates: callers validate each one through fcop
(``Workspace.read_validated``) and keep those whose validated fields match.
What the index cannot see by itself is a file rewritten in place (same name,
same inode) so that it now names another TASK: that breaks FCoP's
append-only rule, and the intake sweeper, which judges every changed file,
reports it through :meth:`SubjectIndex.forget`.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from baton.fcop_port.lifecycle.envelopes import emitted_frontmatter
from baton.intake.feed import ChangeFeed, open_feed

__all__ = ["MAX_READ", "RACY_NS", "WATCH_FROM", "FolderWatch", "SubjectIndex", "SubjectKey"]

WATCH_FROM = 1000
"""Entries in a folder from which its index follows the kernel's news instead of listing."""

RACY_NS = 100_000_000
"""A listing that began less than this after the folder's mtime is not trusted (100 ms:
ten of the kernel's coarsest timestamp ticks)."""

MAX_READ = 1 << 20
"""Bytes read to classify one file (the intake limit for an envelope); larger is unknown."""

SubjectKey = tuple[str, str | None]
"""(``subject_ref``, ``attempt_id``) as the file's frontmatter states them."""


@dataclass(slots=True)
class _Listing:
    """What one folder held at a listing: name → (inode, key or None when unknown)."""

    entries: dict[str, tuple[int, SubjectKey | None]] = field(default_factory=dict)
    by_key: dict[SubjectKey, set[str]] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)
    trusted: tuple[int, int] | None = None
    """The folder's (mtime_ns, inode) when a listing can be reused, else None."""

    def drop(self, name: str) -> None:
        old = self.entries.pop(name, None)
        if old is None:
            return
        key = old[1]
        if key is None:
            self.unknown.discard(name)
            return
        names = self.by_key.get(key)
        if names is not None:
            names.discard(name)
            if not names:
                del self.by_key[key]

    def add(self, name: str, inode: int, key: SubjectKey | None) -> None:
        self.entries[name] = (inode, key)
        if key is None:
            self.unknown.add(name)
        else:
            self.by_key.setdefault(key, set()).add(name)


def _classify(path: str, keys: tuple[str, str | None], required: bool) -> SubjectKey | None:
    """The file's (``keys[0]``, ``keys[1]``) values, or None when it cannot be read cheaply
    and safely. A missing or null first key is ``""`` unless ``required`` (then unknown)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_READ + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_READ:
        return None
    fields = emitted_frontmatter(data)
    if fields is None:
        return None
    subject = fields.get(keys[0])
    if subject is None and not required:
        subject = ""  # no parent (absent or null)
    attempt = None if keys[1] is None else fields.get(keys[1])
    if not isinstance(subject, str) or not (attempt is None or isinstance(attempt, str)):
        return None
    return subject, attempt


class FolderWatch:
    """The kernel's news of a workspace's index folders: one inotify instance, armed on
    first need, routing each changed name to its folder (thread-safe).

    :meth:`poll` returns a *generation*: it moves whenever the feed may have missed a
    change (armed, re-armed, an overflow, a folder replaced). An index keeps its
    listing current from the news only while the generation it listed under stands.
    """

    def __init__(self, root: Path, folders: Sequence[Path]) -> None:
        self.root = Path(root)
        self.folders = tuple(Path(f) for f in folders)
        self._feed: ChangeFeed | None = None
        self._wanted = False
        self._lock = threading.Lock()
        self._pending: dict[Path, set[str]] = {f: set() for f in self.folders}
        self.generation = 0

    def want(self) -> None:
        """An index found its folder large: arm the feed at the next poll."""
        self._wanted = True

    def poll(self) -> int | None:
        """Drain the kernel's queue into each folder's pending names; the generation, or
        None while the feed is not armed (indexes then list, by the mtime rule)."""
        if not self._wanted:
            return None
        with self._lock:
            if self._feed is None:
                self._feed = open_feed(self.root, self.folders)
                if self._feed is None:  # no inotify here: never again
                    self._wanted = False
                    return None
            changes = self._feed.drain()  # re-arms before it says "untrusted"
            for path in changes.paths:
                pending = self._pending.get(path.parent)
                if pending is not None:
                    pending.add(path.name)
            if not changes.trusted:
                self.generation += 1
            return self.generation if self._feed.armed else None

    def take(self, folder: Path) -> set[str]:
        """The names reported in ``folder`` since the last take."""
        with self._lock:
            names = self._pending.get(folder, set())
            self._pending[folder] = set()
            return names

    def close(self) -> None:
        with self._lock:
            if self._feed is not None:
                self._feed.close()
                self._feed = None
            self._wanted = False


class SubjectIndex:
    """Candidates for one (TASK, attempt) in one append-only folder (thread-safe)."""

    def __init__(
        self,
        folder: Path,
        prefix: str,
        *,
        keys: tuple[str, str | None] = ("subject_ref", "attempt_id"),
        required: bool = True,
        wall_ns: Callable[[], int] = time.time_ns,
        watch: FolderWatch | None = None,
        watch_from: int = WATCH_FROM,
    ) -> None:
        self.folder = Path(folder)
        self.prefix = prefix
        self.keys = keys
        """The frontmatter fields a look-up matches: (``subject_ref``, ``attempt_id``) for
        REPORTs and REVIEWs, (``parent``, None) for a stage of TASKs."""
        self.required = required
        self._wall_ns = wall_ns
        self._watch = watch
        self._watch_from = watch_from
        self._watched: int | None = None
        """The watch's generation the listing is kept current under (None: list)."""
        self._listing = _Listing()
        self._lock = threading.Lock()
        self.listings = 0
        """How many times the folder was listed (tests and benchmarks read it)."""
        self.reads = 0
        """How many files were read to classify them."""

    def lookup(self, subject: str, attempt: str | None) -> list[Path]:
        """Files that may be about (``subject``, ``attempt``), sorted by name (fcop's order).

        ``attempt=None`` offers every attempt of ``subject``.
        """
        with self._lock:
            self._refresh()
            listing = self._listing
            if attempt is not None or self.keys[1] is None:  # one key: a dict look-up
                names = set(listing.by_key.get((subject, attempt), ()))
            else:
                names = {
                    n for (s, _), group in listing.by_key.items() if s == subject for n in group
                }
            names |= listing.unknown
        return [self.folder / name for name in sorted(names)]

    def refresh(self) -> None:
        """List the folder now if its listing cannot be reused (reads each new file once)."""
        with self._lock:
            self._refresh()

    def forget(self, name: str) -> None:
        """``name`` changed in place or vanished: classify it again now (one read).

        A name the index does not know is left to the next listing (a new or removed
        entry moves the folder's mtime); a known one is read again under its current
        inode, so the listing stays trusted and no other file is read.
        """
        with self._lock:
            listing = self._listing
            known = listing.entries.get(name)
            if known is None:
                return
            listing.drop(name)
            path = os.path.join(self.folder, name)
            try:
                inode = os.lstat(path).st_ino
            except FileNotFoundError:
                return
            self._read(name, inode)

    def _read(self, name: str, inode: int) -> None:
        """Classify ``name`` (one read) into the listing, whatever it held for it before."""
        self._listing.drop(name)
        self.reads += 1
        key = _classify(os.path.join(self.folder, name), self.keys, self.required)
        self._listing.add(name, inode, key)

    def _refresh(self) -> None:
        watch = self._watch
        generation = None if watch is None else watch.poll()
        if watch is not None and generation is not None:
            if generation == self._watched:
                for name in watch.take(self.folder):
                    self._update(name)
                return
            watch.take(self.folder)  # the listing below covers them; later news stays queued
        self._list()
        self._watched = generation
        if watch is not None and len(self._listing.entries) >= self._watch_from:
            watch.want()

    def _update(self, name: str) -> None:
        """One name the kernel reported: dropped, or (re)classified when it is new, has
        another inode, or was unknown (written after it was created)."""
        if not (name.startswith(self.prefix) and name.endswith(".md")):
            return
        listing = self._listing
        path = os.path.join(self.folder, name)
        try:
            inode = os.lstat(path).st_ino
        except FileNotFoundError:
            listing.drop(name)
            return
        known = listing.entries.get(name)
        if known is not None and known[0] == inode and known[1] is not None:
            return  # a rewrite in place: the sweeper reports it (forget)
        self._read(name, inode)

    def _list(self) -> None:
        listing = self._listing
        try:
            before = os.lstat(self.folder)
        except FileNotFoundError:
            self._listing = _Listing()
            return
        identity = (before.st_mtime_ns, before.st_ino)
        if listing.trusted == identity:
            return
        started = self._wall_ns()
        seen: dict[str, int] = {}
        with os.scandir(self.folder) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith(self.prefix) and name.endswith(".md"):
                    seen[name] = entry.inode()
        self.listings += 1
        for name in [n for n in listing.entries if n not in seen]:
            listing.drop(name)
        for name, inode in seen.items():
            known = listing.entries.get(name)
            if known is not None and known[0] == inode:
                continue
            self._read(name, inode)
        racy = started - before.st_mtime_ns < RACY_NS
        listing.trusted = None if racy else identity
