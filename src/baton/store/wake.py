"""The one cross-process wake-up: a directory of FIFOs beside the database.

Every process that shares a store (``baton up``, ``baton answer``, the web
dashboard, a role's MCP server) learns of another's committed writes here: the
team loop waits for the answer ``baton answer`` or the dashboard writes, and for
the outbox rows a role's MCP tool writes. SQLite has no
cross-process change notification, and polling a row in a loop either burns CPU
or adds latency. Watching the ``-wal`` file (``watchfiles``) works but batches
events (tens of milliseconds) and fires on every unrelated write, including our
own event appends. So the store rings a tiny doorbell instead, after COMMIT,
with the *topics* the transaction named (:meth:`baton.store.tx.Tx.wake`): a
request id, ``team``, ... (a PostgreSQL backend does the same with
``LISTEN``/``NOTIFY``, which is transactional there):

- each process that waits *listens*: it creates a FIFO in ``<db>-wake/`` named
  ``<pid>-<random>.fifo`` (mode 0600), opens it for reading (and keeps one write
  end itself, so the FIFO never reports end-of-file), and registers the read end
  with the asyncio loop (``add_reader``: no thread, no polling);
- any process whose write named topics *rings* after its transaction commits: it
  writes ``<topic>\\n`` to every FIFO in the directory with
  ``O_NONBLOCK``. A FIFO without a reader answers ``ENXIO``: its process died,
  so the ringer removes it. A full FIFO (``EAGAIN``) is skipped: its reader is
  already awake;
- the FIFO only says "look again": a woken waiter re-reads its rows, so the
  database stays the single source of truth, and a lost ring (a ringer killed
  between commit and ring) only costs the waiter's slow safety re-check
  (``recheck_interval``, seconds apart, not a busy loop).

The listener creates its FIFO under a temporary name, opens it, then renames
it into place, so a ringer can never mistake a FIFO that is about to be opened
for a dead one. Lines are shorter than ``PIPE_BUF``, so writes never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

__all__ = ["WAKE_ALL", "WakeChannel", "WakeListener", "WakeRouter", "wake_dir_for"]

WAKE_ALL = "*"
"""A ring that wakes every waiter of a listener (bulk cancellations, expiry, close)."""

_SUFFIX = ".fifo"
_MAX_LINE = 200


def wake_dir_for(db_path: Path) -> Path:
    """Where the doorbells of a database live (next to it, like ``-wal``/``-shm``)."""
    return db_path.with_name(db_path.name + "-wake")


@dataclass(frozen=True, slots=True, kw_only=True)
class WakeChannel:
    """Rings every listener of one database; :meth:`listen` makes this process one."""

    directory: Path

    def _ensure_dir(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def ring(self, topics: Iterable[str], *, skip: Path | None = None) -> int:
        """Tell every listener that these topics changed; returns listeners reached.

        Never raises for a listener's sake: a dead one is removed, a busy one skipped.
        """
        ids = [r for r in topics if r and "\n" not in r and len(r) < _MAX_LINE]
        if not ids:
            return 0
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return 0
        reached = 0
        for entry in entries:
            if not entry.name.endswith(_SUFFIX) or (skip is not None and entry.path == str(skip)):
                continue
            try:
                fd = os.open(entry.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nobody reads it: its process is gone
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                continue
            try:
                if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                    continue
                reached += 1
                for chunk in _chunks(ids):
                    try:
                        os.write(fd, chunk)
                    except BlockingIOError:
                        break  # its reader has unread rings, so it is awake already
            finally:
                os.close(fd)
        return reached

    async def listen(self) -> WakeListener:
        """Start listening on the running loop (one listener per process is enough)."""
        self._ensure_dir()
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        tmp = self.directory / f".{name}.tmp"
        final = self.directory / f"{name}{_SUFFIX}"
        os.mkfifo(tmp, 0o600)
        read_fd = os.open(tmp, os.O_RDONLY | os.O_NONBLOCK)
        keep_fd = os.open(tmp, os.O_WRONLY | os.O_NONBLOCK)
        os.rename(tmp, final)
        listener = WakeListener(final, read_fd, keep_fd, asyncio.get_running_loop())
        return listener


def _chunks(ids: list[str]) -> Iterable[bytes]:
    chunk = b""
    for topic in ids:
        line = topic.encode("utf-8") + b"\n"
        if len(chunk) + len(line) > 512:  # well under PIPE_BUF: atomic writes
            yield chunk
            chunk = b""
        chunk += line
    if chunk:
        yield chunk


class WakeRouter:
    """Routes rung topics to the asyncio events of this process's waiters.

    The part every backend's listener shares (FIFOs here, ``LISTEN`` in
    :mod:`baton.store.pg`): waiters only ever :meth:`subscribe`/:meth:`unsubscribe`;
    the store only :meth:`close`-s it.
    """

    path: Path | None = None
    """This listener's own FIFO, if it has one (a ringer skips it: it is woken directly)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiters: dict[str, set[asyncio.Event]] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def subscribe(self, topic: str) -> asyncio.Event:
        """An event set whenever ``topic`` (or everything) is rung."""
        event = asyncio.Event()
        self._waiters.setdefault(topic, set()).add(event)
        return event

    def unsubscribe(self, topic: str, event: asyncio.Event) -> None:
        events = self._waiters.get(topic)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiters[topic]

    async def on_each_ring(self, topic: str, act: Callable[[], Awaitable[object]]) -> NoReturn:
        """Run ``act`` after every ring of ``topic`` until cancelled (a store doorbell).

        Rings that land while ``act`` runs make one more run, so none is lost.
        """
        event = self.subscribe(topic)
        try:
            while True:
                await event.wait()
                event.clear()
                await act()
        finally:
            self.unsubscribe(topic, event)

    def wake(self, topics: Iterable[str]) -> None:
        """Wake local waiters directly (used for changes made by this process)."""
        for topic in topics:
            targets = (
                [e for events in self._waiters.values() for e in events]
                if topic == WAKE_ALL
                else self._waiters.get(topic, ())
            )
            for event in targets:
                event.set()

    def wake_threadsafe(self, topics: Iterable[str]) -> None:
        """:meth:`wake` from another thread (the store's writer, after a commit)."""
        ids = list(topics)
        try:
            self._loop.call_soon_threadsafe(self.wake, ids)
        except RuntimeError:
            return  # the loop is closed: nobody is left to wake

    def close(self) -> None:
        """Stop listening (a backend's listener releases what it holds); idempotent."""
        self.wake([WAKE_ALL])

    def close_threadsafe(self) -> None:
        """:meth:`close` from any thread (the store closing)."""
        self.wake_threadsafe([WAKE_ALL])


class WakeListener(WakeRouter):
    """One process's doorbell: routes rings to the asyncio events of its waiters."""

    def __init__(
        self, path: Path, read_fd: int, keep_fd: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(loop)
        self.path = self._fifo = path
        self._read_fd = read_fd
        self._keep_fd = keep_fd
        self._partial = b""
        self._closed = False
        loop.add_reader(read_fd, self._on_readable)

    def _on_readable(self) -> None:
        data = b""
        while True:
            try:
                chunk = os.read(self._read_fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        self.wake(line.decode("utf-8", "replace") for line in lines if line)

    def close_threadsafe(self) -> None:
        """:meth:`close` from any thread: on the loop's own thread when it is running."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop or not self._loop.is_running():
            self.close()
            return
        try:
            self._loop.call_soon_threadsafe(self.close)
        except RuntimeError:
            self.close()

    def close(self) -> None:
        """Stop listening and remove the FIFO; idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._loop.is_closed():
            self._loop.remove_reader(self._read_fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._fifo)
        os.close(self._read_fd)
        os.close(self._keep_fd)
        self.wake([WAKE_ALL])
