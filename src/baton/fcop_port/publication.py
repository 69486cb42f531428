"""Who owns a publication temporary: the writer that holds the workspace's publication lock.

fcop publishes a file by writing ``.fcop-create-<stem>-<random>.tmp`` beside it, fsyncing
it, hard-linking it to its name and only then unlinking it (``replace_durable`` renames
one over a receipt). A writer killed in between leaves the temporary behind, and fcop's
validator then reports "unexpected canonical bucket entry" until someone removes it. The
question recovery has to answer is *whose* temporary it is: a dead writer's (remove it) or
a live writer's between its link and its unlink (leave it: removing it makes that writer
fail with ``TARGET_ALREADY_EXISTS_DIFFERENT``).

Age cannot answer it: a writer stalled for seconds on a loaded machine is alive (the crash
harness once found a 2-second rule wrong under load). Ownership can. Every baton process
holds a *shared* ``flock`` on the workspace's publication lock (:func:`lock_path`) for the
whole of each fcop publication (:func:`install`, which wraps fcop's two writers, in every
fcop module that imported them, the way :mod:`baton.crashpoints` does), and the kernel
drops it the moment that process dies. A sweep that gets the lock *exclusively* without
waiting (:func:`no_live_writer`) therefore knows that no temporary in the workspace has a
live owner: every one is abandoned, whatever its age. When a writer is publishing right
now the sweep removes nothing and the next one does (recovery at start, the sweep at
shutdown). No clock is read.

The lock is ``<project>/.baton/fcop-publish.lock``: beside the project's store, outside
the tree fcop validates, kept as an inode (never unlinked, so two processes can never
lock two different files of one name).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

from baton.crashpoints import FCOP_WRITER_MODULES

__all__ = ["LOCK_NAME", "install", "lock_path", "no_live_writer", "publishing"]

F = TypeVar("F", bound=Callable[..., Any])

LOCK_NAME: Final = "fcop-publish.lock"
_WRITERS: Final = ("publish", "replace_durable")
"""fcop's writers that leave a temporary behind when interrupted."""
_INSTALL = threading.Lock()
_installed = False


def lock_path(project_root: Path) -> Path:
    """The publication lock of the FCoP workspace in ``project_root``."""
    return project_root / ".baton" / LOCK_NAME


def _project_of(target: Path) -> Path | None:
    """The project whose ``fcop/`` tree ``target`` is written into (None: not in one)."""
    for parent in target.parents:
        if parent.name == "fcop":
            return parent.parent
    return None


def _open_lock(project_root: Path) -> int:
    path = lock_path(project_root)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


@contextlib.contextmanager
def publishing(target: Path) -> Iterator[None]:
    """Hold the workspace's publication lock (shared) while one file is published."""
    project = _project_of(Path(target))
    if project is None:  # a new workspace's staging: nobody sweeps it
        yield
        return
    try:
        fd = _open_lock(project)
    except OSError:  # a read-only project: fcop's own write fails just after
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def no_live_writer(project_root: Path) -> Iterator[bool]:
    """Yields True while no process publishes into the workspace (the lock held
    exclusively, without waiting); False when a writer is publishing right now."""
    try:
        fd = _open_lock(project_root)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _locked(fn: F) -> F:
    if getattr(fn, "_baton_publication_locked", False):
        return fn

    @functools.wraps(fn)
    def wrapper(path: Path, *args: Any, **kwargs: Any) -> Any:
        with publishing(Path(path)):
            return fn(path, *args, **kwargs)

    wrapper._baton_publication_locked = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def install() -> None:
    """Wrap fcop's writers in this process so each publication holds the lock (idempotent).

    fcop's modules import the writers by name, so each module's binding is replaced
    where it is the encoding module's (a binding the crash harness wrapped is wrapped
    again, whichever was installed first)."""
    global _installed
    with _INSTALL:
        if _installed:
            return
        encoding = importlib.import_module("fcop.v4.encoding")
        for name in _WRITERS:
            current = getattr(encoding, name)
            wrapped = _locked(current)
            for module_name in FCOP_WRITER_MODULES:
                with contextlib.suppress(ImportError):
                    module = importlib.import_module(module_name)
                    if getattr(module, name, None) is current:
                        setattr(module, name, wrapped)
        _installed = True
