"""The doorbell: notice TASK files landing in ``fcop/_lifecycle/inbox/`` and route them.

FCoP is a mailbox without a doorbell (the seed essay: CodeFlow's ancestors
polled every few seconds, or OCR-clicked the IDE). Here the kernel rings: an
inotify watch on the inbox only (:mod:`~baton.intake.feed`, read on
the event loop the moment an event is queued: no debounce, no thread; an overflow
or a replaced inbox makes the next look a full listing), or ``watchfiles.awatch``
(FSEvents, ReadDirectoryChangesW) where inotify is unavailable. Core publishes a
TASK by fsyncing a ``.fcop-create-*.tmp`` and hard-linking it to
``TASK-<id>.md``, so the final name appears complete; the temporary and every
non-``TASK-*.md`` name are ignored.

Each arrival is read *through Core* (:meth:`FcopPort.read_task`: schema,
workspace identity, id/filename agreement, symlink containment, relations)
with a bounded retry over the two-stage window, then routed by the TASK's
``recipient`` frontmatter, never by its filename. Outcomes are events on a
queue: :class:`TaskArrived` for work, :class:`TaskRefused` for everything
baton will not dispatch, each refusal visible (log + event) and filed as an
FCoP ISSUE.

Hostile inbox entries (a symlink, a non-regular file, an oversize file, a name
that is not a TASK id, bytes that are not a valid 4.0 envelope, another
workspace's TASK) are not only refused but, by default, *quarantined*: moved
out of ``fcop/`` into baton's state directory. This is not editing FCoP state
by hand: such a file is not an FCoP envelope, and left in place it breaks Core
for everyone (``create_task`` parses every TASK in every stage before each new
commit, so one bad file makes every T1 fail with ``INVALID_ENVELOPE``;
``find_consumptions`` validates every TASK, so T4–T7 fail too). A valid TASK
for an unknown recipient is left where it is (it harms nothing) with one ISSUE.

Before Core parses anything, the file goes through intake
(:mod:`baton.intake`): it is read only once *stable* (proven complete
by Core's create fact, or unchanged for the settle window), and screened in a
killable subprocess (size, UTF-8, complete front matter, YAML depth/anchor/alias
and expansion limits, display-safe subject and routing fields). A file that is
invalid while it may still be changing (a two-chunk write) is looked at again
later, not quarantined; one that never stops changing is refused as ``unstable``.
Every refusal is a :class:`TaskRefused` (the team loop stores it as a
``security.payload_rejected`` event, see :func:`refusal_payload`), an FCoP ISSUE,
and, for files Core cannot read, a quarantine with a ``.reason.json`` beside it.

Start-up order matters: the watcher is armed first, then the inbox is drained
(a directory listing), so a TASK landing during the drain is seen by one or
the other; duplicates are dropped by id.

The parts: :mod:`~baton.inbox.doorbell_events` (what it emits),
:mod:`~baton.inbox.inspection` (one entry: facts, stability,
screen, Core, routing) and :mod:`~baton.inbox.refusals` (ISSUEs and
quarantine); this module watches, drains, settles and emits.

Length: one class; its two watchers (the kernel feed and the ``watchfiles`` fallback)
share the drain, settling and emit rules below, which are this module's only copies.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from baton.fcop_port.port import TASK_FILE_RE, FcopPort, InboxEntry
from baton.fcop_port.records import inbox_entry
from baton.inbox.doorbell_events import (
    DoorbellEvent,
    RefusalReason,
    TaskArrived,
    TaskRefused,
    refusal_payload,
)
from baton.inbox.inspection import InboxInspection, RecheckLater, SettleState
from baton.intake.feed import ChangeFeed, open_feed
from baton.intake.limits import IntakeLimits
from baton.intake.stability import FileFacts
from baton.intake.worker import ParseWorker

__all__ = [
    "Doorbell",
    "DoorbellEvent",
    "RefusalReason",
    "TaskArrived",
    "TaskRefused",
    "refusal_payload",
]

log = logging.getLogger("baton.inbox.doorbell")

_REARM_S = 0.5
"""How long to wait before trying again when the kernel watch cannot be re-armed."""


class Doorbell(InboxInspection):
    """Watch the inbox, read arrivals through Core, route them, emit events."""

    def __init__(
        self,
        port: FcopPort,
        route: Callable[[str], str | None],
        queue: asyncio.Queue[DoorbellEvent],
        *,
        human: str = "ADMIN",
        issue_sender: str = "BATON",
        max_task_bytes: int = 1024 * 1024,
        quarantine_dir: Path | None = None,
        refused: Mapping[str, str | None] | None = None,
        step_ms: int = 5,
        debounce_ms: int = 10,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        limits: IntakeLimits | None = None,
        worker: ParseWorker | None = None,
    ) -> None:
        self.port = port
        self.route = route
        self.queue = queue
        self.human = human
        self.issue_sender = issue_sender
        self.limits = limits or IntakeLimits(max_file_bytes=max_task_bytes)
        self.max_task_bytes = self.limits.max_file_bytes
        self.quarantine_dir = quarantine_dir
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.clock = clock
        self.wall_clock = wall_clock
        self.worker = worker or ParseWorker(self.limits)
        self._own_worker = worker is None
        self.ready = asyncio.Event()
        """Set once the watcher is armed and the initial drain is done."""
        self.settled = asyncio.Event()
        """Set while no inbox file is waiting to become stable."""
        self.settled.set()
        self._settling: dict[str, SettleState] = {}
        self._rechecks: set[asyncio.Task[None]] = set()
        self._emitted: set[str] = set()
        self._refused: dict[str, str | None] = dict(refused or {})
        """Entry names refused in place (said once); the team loop persists the unknown
        recipients (store rows) and passes them back here on the next start."""
        self._lock = asyncio.Lock()

    def remember_refused(self, refused: Mapping[str, str | None]) -> None:
        """Entries refused in place before (the team loop's store): not reported again."""
        self._refused.update(refused)

    # ------------------------------------------------------------------ run

    async def run(self, stop_event: asyncio.Event | None = None) -> None:
        """Arm the watcher, drain the inbox, then ring on every arrival until stopped."""

        inbox = self.port.stage_dir("inbox")
        stop = stop_event or asyncio.Event()
        try:
            await asyncio.to_thread(self.worker.start)
        except OSError:
            log.exception("the intake parse worker did not start; each read will retry")
        try:
            await self._watch(inbox, stop)
        finally:
            self._cancel_rechecks()
            if self._own_worker:
                await asyncio.to_thread(self.worker.close)

    async def _watch(self, inbox: Path, stop: asyncio.Event) -> None:
        feed = open_feed(self.port.root, [inbox, self.port.fcop_dir / "operations"])
        if feed is not None:
            feed.drain()  # arms the kernel watch (or finds it cannot)
            if feed.armed:
                try:
                    await self._watch_kernel(feed, stop)
                finally:
                    feed.close()
                return
            feed.close()
        await self._watch_notify(inbox, stop)

    async def _watch_kernel(self, feed: ChangeFeed, stop: asyncio.Event) -> None:
        """inotify read on the event loop: an arrival is handled the moment the kernel
        queues it (no debounce, no thread). Intake's stability rules, not a debounce,
        decide when a file that is still being written is read. An overflow, a lost watch
        or a replaced inbox makes the next look a full listing (``scan``), never a miss.

        The feed also watches ``fcop/operations/``: Core links a TASK before it publishes
        the create fact that proves it complete, so the first look usually comes too early,
        and the fact's arrival is what re-checks it (:meth:`_on_facts`); the re-check timer
        stays as the fallback."""
        loop = asyncio.get_running_loop()
        inbox = self.port.stage_dir("inbox")
        ring = asyncio.Event()
        reading: int | None = None

        def rung() -> None:
            # One-shot: the descriptor stays readable until drained, and a level-triggered
            # reader left on would spin the loop while a batch is being handled.
            nonlocal reading
            if reading is not None:
                loop.remove_reader(reading)
                reading = None
            ring.set()

        def listen() -> None:
            nonlocal reading
            if reading is not None:
                loop.remove_reader(reading)
            reading = feed.fileno()  # a re-armed feed has a new descriptor
            if reading is not None:
                loop.add_reader(reading, rung)

        stopped = asyncio.ensure_future(stop.wait())
        stopped.add_done_callback(lambda _: ring.set())
        try:
            listen()
            await self.scan("drain")  # armed before the listing: nothing falls between
            self.ready.set()
            while not stop.is_set():
                await ring.wait()
                ring.clear()
                if stop.is_set():
                    break
                changes = feed.drain()
                listen()
                if changes.trusted:
                    await self._on_paths(p for p in changes.paths if p.parent == inbox)
                    self._on_facts({p.name for p in changes.paths if p.parent != inbox})
                else:
                    await self.scan("rescan")
                if not feed.armed:  # it could not re-arm: list again until it can
                    await asyncio.sleep(_REARM_S)
                    ring.set()
        finally:
            stopped.cancel()
            if reading is not None:
                loop.remove_reader(reading)

    async def _watch_notify(self, inbox: Path, stop: asyncio.Event) -> None:
        """Where inotify is unavailable: ``watchfiles`` (FSEvents, ReadDirectoryChangesW)."""
        import watchfiles

        failures = 0
        while not stop.is_set():
            changes_iter = watchfiles.awatch(
                inbox,
                watch_filter=_is_task_name,
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=stop,
                recursive=False,
                # The kernel watch wakes us; this only bounds how long a cancelled
                # watcher thread lingers when nobody set ``stop_event``.
                rust_timeout=500,
            )
            first = asyncio.ensure_future(anext(changes_iter, None))
            try:
                # One loop turn lets awatch build its RustNotify (the kernel
                # watch) before the drain lists the directory: no gap.
                await asyncio.sleep(0)
                await self.scan("drain")
                self.ready.set()
                batch = await first
                while batch is not None:
                    failures = 0
                    await self._on_paths({Path(raw) for _, raw in batch})
                    batch = await anext(changes_iter, None)
            except asyncio.CancelledError:
                first.cancel()
                raise
            except Exception:  # the watcher re-arms after any failure (bounded, logged)
                failures += 1
                log.exception("doorbell watcher failed (%d); re-arming", failures)
                if failures >= 5:
                    raise
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
            finally:
                await changes_iter.aclose()

    async def scan(self, source: Literal["drain", "rescan"] = "rescan") -> int:
        """List the inbox and emit every entry not yet handled; returns how many events."""
        entries = await asyncio.to_thread(self.port.scan_inbox)
        present = {e.task_id for e in entries if e.task_id}
        self._emitted &= present  # forget TASKs that left the inbox
        names = {e.name for e in entries}
        for name in [n for n in self._settling if n not in names]:
            self._forget_settling(name)
        gone = [name for name in self._refused if name not in names]
        for name in gone:
            del self._refused[name]
        count = 0
        detected = self.clock()
        for entry in entries:
            count += await self._handle(entry, source, detected)
        return count

    # ------------------------------------------------------------- handling

    async def _on_paths(self, paths: Iterable[Path]) -> None:
        """Judge each named inbox entry again: present → handle it; gone → forget it (a
        TASK that leaves the inbox and comes back is a new arrival)."""
        detected = self.clock()
        for path in sorted(paths):
            if not _is_task_name(None, str(path)):
                continue
            entry = _lstat_entry(path)
            if entry is not None:
                await self._handle(entry, "watch", detected)
                continue
            match = TASK_FILE_RE.fullmatch(path.name)
            if match:
                self._emitted.discard(match.group(1))
            self._forget_settling(path.name)

    async def _handle(
        self, entry: InboxEntry, source: Literal["drain", "watch", "rescan"], detected: float
    ) -> int:
        if self._seen(entry):
            return 0
        pending = self._settling.get(entry.name)
        if pending is not None and pending.timer is not None and source != "watch":
            return 0  # a re-check is scheduled; a listing adds nothing new
        async with self._lock:
            if self._seen(entry):
                return 0
            facts = FileFacts(entry.size, entry.mtime_ns, entry.ctime_ns, entry.ino, entry.dev)
            # Only this loop touches _settling; the thread reads its own entry.
            state = self._settling.setdefault(
                entry.name,
                SettleState(first=(facts, self.clock()), source=source, detected=detected),
            )
            # ``settled`` is set exactly while nothing is settling: a waiter must not see
            # "settled" while this file is being read (it would spin on ``settling``).
            self.settled.clear()
            if state.attempts:  # a re-check: the event says when and how it was first seen
                source, detected = state.source, state.detected
            try:
                event = await asyncio.to_thread(self._inspect, entry, state, source, detected)
            except Exception as exc:  # the watcher must outlive any single file
                log.exception("doorbell could not handle %s", entry.name)
                event = TaskRefused(
                    name=entry.name,
                    reason="doorbell_error",
                    message=f"{type(exc).__name__}: {exc}",
                    task_id=entry.task_id,
                )
            if isinstance(event, RecheckLater):
                self._later(entry, event.after)
                return 0
            self._forget_settling(entry.name)
            if event is None:
                return 0
            if isinstance(event, TaskArrived):
                self._emitted.add(event.task_id)
            else:
                if event.quarantined_to is None:
                    # Left in place: say it once, not on every rescan.
                    self._refused.setdefault(entry.name, event.issue_id)
                log.warning("inbox entry %s refused: %s", event.name, event.message)
            await self.queue.put(_stamped(event, self.clock()))
            return 1

    # --------------------------------------------------------------- settling

    @property
    def settling(self) -> int:
        """Inbox files seen but not yet stable enough to read."""
        return len(self._settling)

    def _later(self, entry: InboxEntry, after: float) -> None:
        state = self._settling[entry.name]
        if state.timer is not None:
            state.timer.cancel()
        loop = asyncio.get_running_loop()
        state.timer = loop.call_later(after, self._recheck, entry.name, entry.path)

    def _recheck(self, name: str, path: Path) -> None:
        state = self._settling.get(name)
        if state is None:
            return
        state.timer = None

        async def again() -> None:
            entry = await asyncio.to_thread(_lstat_entry, path)
            if entry is None:
                self._forget_settling(name)
                return
            await self._handle(entry, "rescan", self.clock())

        task = asyncio.get_running_loop().create_task(again(), name=f"recheck-{name}")
        self._rechecks.add(task)
        task.add_done_callback(self._rechecks.discard)

    def _on_facts(self, names: Collection[str]) -> None:
        """Core's facts landed: re-check now each TASK waiting for one of them (one whose
        check is running, with no timer set, looks again on its own)."""
        if not names:
            return
        inbox = self.port.stage_dir("inbox")
        for name, state in list(self._settling.items()):
            if state.awaiting in names and state.timer is not None:
                state.timer.cancel()
                self._recheck(name, inbox / name)

    def _forget_settling(self, name: str) -> None:
        state = self._settling.pop(name, None)
        if state is not None and state.timer is not None:
            state.timer.cancel()
        if not self._settling:
            self.settled.set()

    def _cancel_rechecks(self) -> None:
        for name in list(self._settling):
            self._forget_settling(name)
        for task in list(self._rechecks):
            task.cancel()

    async def wait_settled(self) -> None:
        """Return once no inbox file is waiting to become stable."""
        await self.settled.wait()

    # ------------------------------------------------------------- refusals

    def _seen(self, entry: InboxEntry) -> bool:
        return entry.name in self._refused or (
            entry.task_id is not None and entry.task_id in self._emitted
        )


def _is_task_name(change: Any, path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("TASK-") and name.endswith(".md")


def _lstat_entry(path: Path) -> InboxEntry | None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    return inbox_entry(path, info)


def _stamped(event: DoorbellEvent, at: float) -> DoorbellEvent:
    from dataclasses import replace

    return replace(event, emitted_at=at)
