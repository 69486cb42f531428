"""An event loop that skips the time it would only spend waiting: tests of timeouts, instantly.

A turn timeout, a kill grace or a stall threshold is a timer; over the in-memory transport
nothing else can wake the loop while it waits for one, so waiting in real time proves
nothing the clock cannot. :func:`fast_forward_loop` builds a standard selector event loop
whose clock (``loop.time()``, which ``asyncio.sleep``, ``asyncio.timeout`` and baton's turn
driver all read) runs with real time and, when the loop is **provably idle**, jumps
straight to the next timer instead of sleeping (trio's ``MockClock(autojump_threshold=0)``,
for asyncio).

Provably idle means nothing outside the loop can still deliver work to it: no file
descriptor is registered but the loop's own wake-up pipe (no agent process, socket or
pipe), and every thread started since the loop was built is *parked*: blocked in a
``threading`` wait without a timeout (the store's writer with an empty queue) or an
executor worker waiting for a job while the loop has none outstanding. A thread doing
anything else (an ``asyncio.to_thread`` job, a commit, asyncio's child watcher in ``waitpid``) keeps the loop on real time, as does
any registered pipe or socket; so a test over a real process waits exactly as it would on
the standard loop. A parked thread can only be woken by the loop itself or by a thread
that is not parked, and a thread that finished its work has written the loop's wake-up
pipe before parking, which the non-blocking look at the selector sees first.
Code under test must read time from the loop (``asyncio.get_running_loop().time()``), not
``time.monotonic()``.

A FIFO the test vouches for with :meth:`FastForwardLoop.mark_private` (a store's doorbell
directory, :mod:`baton.store.wake`, when the test owns the store) does not keep the loop
on real time: only this process's threads, and the processes it started, can ring it. A
ringing thread is live until it parks, a watched child is live (its pipes or asyncio's
child watcher) until it exits, and a ring either left behind is in the FIFO, which the
non-blocking look at the selector reads before any jump, as with the wake-up pipe. A FIFO
anywhere else, or any other pipe or socket, still keeps real time: another process may
write it.

Use it with pytest-asyncio's ``pytest_asyncio_loop_factories`` hook, or directly:
``asyncio.run(main(), loop_factory=fast_forward_loop)`` (Python 3.12+) or
``asyncio.Runner(loop_factory=fast_forward_loop)``.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from concurrent.futures import thread as _futures_thread
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

__all__ = ["FastForwardLoop", "fast_forward_loop"]

_T = TypeVar("_T")

_LIVE_SLICE_SECONDS = 0.005
"""How long one real wait lasts while the loop is not idle, before it looks again."""


class _FastForwardSelector(selectors.BaseSelector):
    """The platform selector, except that an idle wait with a timeout returns at once."""

    def __init__(self, inner: selectors.BaseSelector, loop: FastForwardLoop) -> None:
        self._inner = inner
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout <= 0:
            return self._inner.select(timeout)
        # Wait in short real slices while something is live: a thread that finishes its
        # work need not write the wake-up pipe (nobody awaits a queued append), so the
        # loop looks again instead of sleeping through the rest of the timeout.
        deadline = time.monotonic() + timeout
        while True:
            if self._loop.idle():
                ready = self._inner.select(0)
                if not ready:
                    self._loop.skip(max(0.0, deadline - time.monotonic()))
                return ready
            remaining = deadline - time.monotonic()
            ready = self._inner.select(min(remaining, _LIVE_SLICE_SECONDS))
            if ready or remaining <= _LIVE_SLICE_SECONDS:
                return ready

    def close(self) -> None:
        self._inner.close()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()


class FastForwardLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose clock jumps over waits nothing but a timer can end."""

    def __init__(self) -> None:
        self._skipped = 0.0
        self._jobs = 0
        self._threads_before = frozenset(threading.enumerate())
        self._private_dirs: list[Path] = []
        super().__init__(_FastForwardSelector(selectors.DefaultSelector(), self))

    @property
    def skipped(self) -> float:
        """Seconds of waiting the loop has skipped so far."""
        return self._skipped

    def time(self) -> float:
        return time.monotonic() + self._skipped

    def skip(self, seconds: float) -> None:
        self._skipped += seconds

    def idle(self) -> bool:
        """True when only a timer can wake the loop (see the module docstring)."""
        if self._jobs:
            return False
        wakeup = self._ssock.fileno()  # type: ignore[attr-defined]
        for key in self._selector.get_map().values():  # type: ignore[attr-defined]
            if key.fd != wakeup and not self._is_private(key.fd):
                return False
        frames = sys._current_frames()
        return all(
            thread in self._threads_before
            or thread.ident is None
            or _parked(frames.get(thread.ident))
            for thread in threading.enumerate()
            if thread is not threading.current_thread()
        )

    def mark_private(self, directory: Path) -> None:
        """Vouch that only this process and its children write the FIFOs in ``directory``.

        A registered reader on such a FIFO no longer keeps the loop on real time (see the
        module docstring); one created there later counts too. Vouch only for a directory
        nothing outside the test knows (a store under ``tmp_path``).
        """
        self._private_dirs.append(Path(directory))

    def _is_private(self, fd: int) -> bool:
        """Whether ``fd`` is a FIFO in a private directory (same device and inode)."""
        if not self._private_dirs:
            return False
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        if not stat.S_ISFIFO(st.st_mode):
            return False
        for directory in self._private_dirs:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                try:
                    other = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                    return True
        return False

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., _T], *args: Any
    ) -> asyncio.Future[_T]:
        future = super().run_in_executor(executor, func, *args)
        self._jobs += 1
        future.add_done_callback(self._job_done)
        return future

    def _job_done(self, _future: asyncio.Future[Any]) -> None:
        self._jobs -= 1


def _parked(frame: FrameType | None) -> bool:
    """A thread blocked until someone acts: an untimed, un-notified wait, or an idle worker.

    A notified waiter is removed from its condition's waiters before the notifying call
    returns, so a thread woken but not yet running is never taken for parked. An
    executor worker counts as parked only because the loop has no job outstanding.
    """
    if frame is None:
        return True  # the thread has finished
    code = frame.f_code
    if code.co_filename == _futures_thread.__file__:
        return code.co_name == "_worker"
    if code.co_filename != threading.__file__ or code.co_name != "wait":
        return False
    scope = frame.f_locals
    condition, waiter = scope.get("self"), scope.get("waiter")
    return (
        scope.get("timeout", 0) is None
        and isinstance(condition, threading.Condition)
        and waiter is not None
        and waiter in condition._waiters  # type: ignore[attr-defined]
    )


def fast_forward_loop() -> FastForwardLoop:
    """A new :class:`FastForwardLoop` (a ``loop_factory``)."""
    return FastForwardLoop()
