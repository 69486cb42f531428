"""Which screened files changed since the last look, from the kernel (Linux inotify).

The sweeper (:mod:`~baton.intake.sweep`) would otherwise list and
``lstat`` every file of the screened surface on every pass: O(history). The feed
holds one inotify instance with a non-recursive watch on each screened directory
(entries created, deleted, renamed in or out, written in place, truncated,
``chmod``/``utime``'d) and a watch on each ancestor up to the project root (a
screened directory created, removed or replaced). A pass then judges only the
names the kernel reported.

Why inotify directly and not ``watchfiles`` (the doorbell's fallback where this feed cannot
arm):

* ``watchfiles`` drops the kernel's overflow signal (notify's rescan event has no
  path, and ``RustNotify`` keeps only events with one: read in its 1.x source), so
  a lost event would go unnoticed; here ``IN_Q_OVERFLOW`` makes the next pass full;
* its events arrive after a debounce, in a thread, so a pass right after a turn
  could miss a write the kernel already queued. Here :meth:`ChangeFeed.drain` reads
  the instance without blocking, in the caller's thread: the kernel queues an event
  inside the write system call, so every change made before ``drain`` is called is
  in what it returns. That read is the after-turn barrier. No thread, nothing to join.

:meth:`ChangeFeed.drain` says ``trusted=False`` (the caller must do a full pass)
right after the instance is armed or re-armed, after an overflow, when a watch went
away (a screened directory deleted, moved or replaced, ``IN_IGNORED``), when an
ancestor's entry leading to a screened directory changed, and after any read error;
it re-arms *before* returning, so the full pass lists under a live watch.

Between two passes the kernel holds the events (``max_queued_events``, 16,384 by
default); more than that is an overflow, and costs one full pass, never a miss.

What inotify does not report (so the sweeper's slow full pass stays as a
backstop): a write through a hard link in another directory (checked: linking a
screened file out and writing the other name gives its directory no event), and
writes into a shared ``mmap`` after its descriptor was closed (only the close is
reported); the kernel tells a directory's watch only about changes made through a
name in that directory. The sweeper takes the ``lstat`` of every file seen with
more than one link on every pass, which covers a file linked in from elsewhere, not one
linked out after it passed.

Where inotify cannot be used (not Linux, no ``inotify_simple``, the instance or
watch limits reached, a screened directory that is not a directory), :func:`open_feed`
returns ``None`` or :meth:`ChangeFeed.drain` keeps saying untrusted: the sweeper does
a full pass each time, as before.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ChangeFeed", "Changes", "open_feed"]

log = logging.getLogger(__name__)

# inotify.h (the values are the kernel ABI).
_MODIFY = 0x002
_ATTRIB = 0x004
_CLOSE_WRITE = 0x008
_MOVED_FROM = 0x040
_MOVED_TO = 0x080
_CREATE = 0x100
_DELETE = 0x200
_DELETE_SELF = 0x400
_MOVE_SELF = 0x800
_Q_OVERFLOW = 0x4000
_IGNORED = 0x8000
_ONLYDIR = 0x01000000
_DONT_FOLLOW = 0x02000000
_EXCL_UNLINK = 0x04000000

_ENTRIES = _CREATE | _DELETE | _MOVED_FROM | _MOVED_TO
_SELF = _DELETE_SELF | _MOVE_SELF
_SCREENED_MASK = (
    _ENTRIES | _MODIFY | _ATTRIB | _CLOSE_WRITE | _SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK
)
_ANCESTOR_MASK = _ENTRIES | _SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK


@dataclass(frozen=True, slots=True)
class Changes:
    paths: frozenset[Path]
    """Entries of screened directories the kernel reported (any event: judge again)."""
    trusted: bool
    """False: events may be missing; judge everything (a full pass)."""


class ChangeFeed:
    """One inotify instance over the screened directories (see the module docstring).

    Not thread-safe: the sweeper calls it under its own lock.
    """

    def __init__(self, root: Path, directories: Sequence[Path]) -> None:
        self.root = root
        self.directories = tuple(directories)
        self.arms = 0
        """How many times the instance was (re)armed (tests and diagnostics)."""
        self._inotify: Any = None
        self._screened: dict[int, Path] = {}
        self._ancestors: dict[int, tuple[Path, frozenset[str]]] = {}
        """Watch -> (directory, names in it that lead to a screened directory)."""
        self._warned = False

    @property
    def armed(self) -> bool:
        return self._inotify is not None

    def fileno(self) -> int | None:
        """The armed instance's descriptor (readable when events are queued), for an
        event loop's reader; it changes when the feed re-arms, so ask after each drain."""
        return None if self._inotify is None else int(self._inotify.fileno())

    def drain(self) -> Changes:
        """Everything the kernel queued since the last call, without blocking."""
        if self._inotify is None:
            self._arm()
            return Changes(frozenset(), trusted=False)
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            log.exception("intake change feed: reading inotify failed; re-arming")
            self._arm()
            return Changes(frozenset(), trusted=False)
        paths, trusted = self._interpret(events)
        if not trusted:
            self._arm()
            return Changes(paths, trusted=False)
        return Changes(paths, trusted=True)

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        self._screened.clear()
        self._ancestors.clear()

    def __enter__(self) -> ChangeFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ arming

    def _arm(self) -> None:
        """A fresh instance: ancestors first (top-down), then the screened directories,
        so a directory created while arming is seen by its parent's watch."""
        self.close()
        try:
            import inotify_simple
        except ImportError:  # pragma: no cover - a platform without inotify
            return
        try:
            inotify = inotify_simple.INotify(nonblocking=True)
        except OSError as exc:
            self._warn("unavailable", exc)
            return
        try:
            for directory, leads in _ancestors(self.root, self.directories):
                wd = _watch(inotify, directory, _ANCESTOR_MASK)
                if wd is not None:
                    self._ancestors[wd] = (directory, leads)
            for directory in self.directories:
                wd = _watch(inotify, directory, _SCREENED_MASK)
                if wd is not None:
                    self._screened[wd] = directory
        except OSError as exc:
            self._warn("cannot watch", exc)
            inotify.close()
            self._screened.clear()
            self._ancestors.clear()
            return
        self._inotify = inotify
        self.arms += 1

    def _warn(self, what: str, exc: OSError) -> None:
        if not self._warned:  # said once: every pass retries, and each would say it
            log.warning("intake change feed %s (%s); full sweeps until it can", what, exc)
            self._warned = True

    def _interpret(self, events: Iterable[Any]) -> tuple[frozenset[Path], bool]:
        paths: set[Path] = set()
        trusted = True
        for event in events:
            wd, mask, name = event.wd, event.mask, event.name
            if mask & (_Q_OVERFLOW | _IGNORED | _SELF):
                trusted = False
                continue
            directory = self._screened.get(wd)
            if directory is not None:
                if name:
                    paths.add(directory / name)
                continue
            ancestor = self._ancestors.get(wd)
            if ancestor is not None and name in ancestor[1]:
                trusted = False  # a screened directory (or its parent) came or went
        return frozenset(paths), trusted


def _ancestors(root: Path, directories: Sequence[Path]) -> list[tuple[Path, frozenset[str]]]:
    """Each directory from ``root`` down to the screened ones' parents, with the
    entry names in it that lead to a screened directory (top-down order)."""
    leads: dict[Path, set[str]] = {}
    for directory in directories:
        parts = directory.relative_to(root).parts
        for depth in range(len(parts)):
            leads.setdefault(root.joinpath(*parts[:depth]), set()).add(parts[depth])
    ordered = sorted(leads, key=lambda p: len(p.parts))
    return [(d, frozenset(leads[d])) for d in ordered]


def _watch(inotify: Any, directory: Path, mask: int) -> int | None:
    """A watch on ``directory``; None when it does not exist (its parent's watch
    reports its creation). Anything else (a link, a file, the watch limit) raises."""
    try:
        return int(inotify.add_watch(os.fspath(directory), mask))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def open_feed(root: Path, directories: Sequence[Path]) -> ChangeFeed | None:
    """A feed over ``directories`` (under ``root``), or None where inotify is missing."""
    try:
        import inotify_simple  # noqa: F401
    except ImportError:
        return None
    return ChangeFeed(root, directories)
