"""The doorbell: notice TASK files landing in ``fcop/_lifecycle/inbox/`` and route them.

FCoP is a mailbox without a doorbell (the seed essay: CodeFlow's ancestors
polled every few seconds, or OCR-clicked the IDE). Here the kernel rings:
``watchfiles.awatch`` (inotify/FSEvents/ReadDirectoryChangesW, no polling loop)
on the inbox only, non-recursive, with a short step so an arrival is seen in
milliseconds. Core publishes a TASK by fsyncing a ``.fcop-create-*.tmp`` and
hard-linking it to ``TASK-<id>.md``, so the final name appears complete; the
temporary and every non-``TASK-*.md`` name are ignored.

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

Start-up order matters: the watcher is armed first, then the inbox is drained
(a directory listing), so a TASK landing during the drain is seen by one or
the other; duplicates are dropped by id.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from baton.coordination.errors import (
    CoordinationError,
    FcopProtocolError,
    InvalidEnvelope,
    StateAmbiguous,
    TaskNotFound,
    WorkspaceError,
)
from baton.coordination.fcop_port import TASK_FILE_RE, FcopPort, InboxEntry

__all__ = [
    "Doorbell",
    "DoorbellEvent",
    "RefusalReason",
    "TaskArrived",
    "TaskRefused",
]

log = logging.getLogger("baton.coordination.doorbell")

RefusalReason = Literal[
    "symlink",
    "not_a_file",
    "bad_name",
    "too_large",
    "invalid_envelope",
    "invalid_relation",
    "unknown_recipient",
    "state_ambiguous",
    "unreadable",
    "doorbell_error",
]
_QUARANTINED: frozenset[str] = frozenset(
    {"symlink", "not_a_file", "bad_name", "too_large", "invalid_envelope"}
)
"""Entries that break Core's workspace scans; everything else stays where it is."""


@dataclass(frozen=True, slots=True)
class TaskArrived:
    """A valid inbox TASK for a configured role (or for the human)."""

    task_id: str
    recipient: str
    role: str
    """The role it routes to (the human's name when ``for_human``)."""
    for_human: bool
    sender: str
    subject: str
    parent: str | None
    priority: str
    source: Literal["drain", "watch", "rescan"]
    detected_at: float
    """``time.monotonic()`` when the doorbell learned of the file."""
    emitted_at: float
    published_ns: int = 0
    """Wall-clock ns when the file was linked into the inbox (its ``st_ctime``)."""


@dataclass(frozen=True, slots=True)
class TaskRefused:
    """An inbox entry baton will not dispatch, and what it did about it."""

    name: str
    reason: RefusalReason
    message: str
    task_id: str | None = None
    recipient: str | None = None
    issue_id: str | None = None
    quarantined_to: Path | None = None
    emitted_at: float = 0.0


DoorbellEvent = TaskArrived | TaskRefused


class Doorbell:
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
    ) -> None:
        self.port = port
        self.route = route
        self.queue = queue
        self.human = human
        self.issue_sender = issue_sender
        self.max_task_bytes = max_task_bytes
        self.quarantine_dir = quarantine_dir
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.clock = clock
        self.ready = asyncio.Event()
        """Set once the watcher is armed and the initial drain is done."""
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
        import watchfiles

        inbox = self.port.stage_dir("inbox")
        stop = stop_event or asyncio.Event()
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
                    await self._on_changes(batch)
                    batch = await anext(changes_iter, None)
            except asyncio.CancelledError:
                first.cancel()
                raise
            except Exception:
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
        gone = [name for name in self._refused if name not in names]
        for name in gone:
            del self._refused[name]
        count = 0
        detected = self.clock()
        for entry in entries:
            count += await self._handle(entry, source, detected)
        return count

    # ------------------------------------------------------------- handling

    async def _on_changes(self, batch: set[tuple[Any, str]]) -> None:
        import watchfiles

        detected = self.clock()
        for change, raw_path in sorted(batch, key=lambda c: c[1]):
            path = Path(raw_path)
            match = TASK_FILE_RE.fullmatch(path.name)
            if change == watchfiles.Change.deleted:
                if match:
                    self._emitted.discard(match.group(1))
                continue
            entry = _lstat_entry(path)
            if entry is not None:
                await self._handle(entry, "watch", detected)

    async def _handle(
        self, entry: InboxEntry, source: Literal["drain", "watch", "rescan"], detected: float
    ) -> int:
        if self._seen(entry):
            return 0
        async with self._lock:
            if self._seen(entry):
                return 0
            try:
                event = await asyncio.to_thread(self._inspect, entry, source, detected)
            except Exception as exc:  # the watcher must outlive any single file
                log.exception("doorbell could not handle %s", entry.name)
                event = TaskRefused(
                    name=entry.name,
                    reason="doorbell_error",
                    message=f"{type(exc).__name__}: {exc}",
                    task_id=entry.task_id,
                )
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

    def _inspect(
        self, entry: InboxEntry, source: Literal["drain", "watch", "rescan"], detected: float
    ) -> DoorbellEvent | None:
        """Classify one entry (runs in a worker thread; all I/O is here)."""
        if entry.is_symlink:
            return self._hostile(entry, "symlink", "a symlink in the inbox (FCoP forbids links)")
        if not entry.is_regular:
            return self._hostile(entry, "not_a_file", "not a regular file")
        if entry.task_id is None:
            return self._hostile(entry, "bad_name", "the name is not TASK-<id>.md")
        if entry.size > self.max_task_bytes:
            return self._hostile(
                entry,
                "too_large",
                f"{entry.size} bytes, over the {self.max_task_bytes}-byte limit; not read",
            )
        try:
            task = self.port.read_task(entry.task_id)
        except TaskNotFound:
            return None  # claimed or moved on before we looked
        except StateAmbiguous as exc:
            return self._refuse_in_place(entry, "state_ambiguous", str(exc))
        except InvalidEnvelope as exc:
            if not os.path.lexists(entry.path):
                return None
            if exc.code == "RELATION_INVALID":
                return self._refuse_in_place(entry, "invalid_relation", str(exc))
            return self._hostile(entry, "invalid_envelope", str(exc))
        except WorkspaceError as exc:
            if exc.code == "WORKSPACE_ID_MISMATCH" and os.path.lexists(entry.path):
                return self._hostile(entry, "invalid_envelope", str(exc))
            return self._refuse_in_place(entry, "unreadable", str(exc))
        except (FcopProtocolError, OSError) as exc:
            return self._refuse_in_place(entry, "unreadable", str(exc))
        if task.stage != "inbox":
            return None
        if task.recipient == self.human:
            role, for_human = self.human, True
        else:
            routed = self.route(task.recipient)
            if routed is None:
                return self._refuse_in_place(
                    entry,
                    "unknown_recipient",
                    f"recipient {task.recipient!r} is not a role of this team; "
                    "baton does not guess (fix the team or re-issue the task)",
                    recipient=task.recipient,
                    remember=True,
                )
            role, for_human = routed, False
        return TaskArrived(
            task_id=task.task_id,
            recipient=task.recipient,
            role=role,
            for_human=for_human,
            sender=task.sender,
            subject=task.subject,
            parent=task.parent,
            priority=task.priority,
            source=source,
            detected_at=detected,
            emitted_at=0.0,
            published_ns=entry.ctime_ns,
        )

    # ------------------------------------------------------------- refusals

    def _seen(self, entry: InboxEntry) -> bool:
        return entry.name in self._refused or (
            entry.task_id is not None and entry.task_id in self._emitted
        )

    def _hostile(self, entry: InboxEntry, reason: RefusalReason, message: str) -> TaskRefused:
        moved = self._quarantine(entry) if reason in _QUARANTINED else None
        where = f"; moved to {moved}" if moved else "; left in place"
        issue = self._issue(entry, reason, message + where, subject_ref=None)
        return TaskRefused(
            name=entry.name,
            reason=reason,
            message=message + where,
            task_id=entry.task_id,
            issue_id=issue,
            quarantined_to=moved,
        )

    def _refuse_in_place(
        self,
        entry: InboxEntry,
        reason: RefusalReason,
        message: str,
        *,
        recipient: str | None = None,
        remember: bool = False,
    ) -> TaskRefused:
        subject = entry.task_id if reason == "unknown_recipient" else None
        issue = self._issue(entry, reason, message, subject_ref=subject)
        if remember:
            self._refused[entry.name] = issue
        return TaskRefused(
            name=entry.name,
            reason=reason,
            message=message,
            task_id=entry.task_id,
            recipient=recipient,
            issue_id=issue,
        )

    def _issue(
        self, entry: InboxEntry, reason: str, message: str, *, subject_ref: str | None
    ) -> str | None:
        body = (
            f"baton's doorbell refused inbox entry {entry.name!r}: {reason}.\n\n{message}\n\n"
            "Its content was not dispatched to any agent."
        )
        try:
            return self.port.write_issue(
                sender=self.issue_sender,
                recipient=self.human,
                severity="error",
                body=body,
                subject_ref=subject_ref,
            )
        except CoordinationError:
            log.exception("could not file an ISSUE for %s", entry.name)
            return None

    def _quarantine(self, entry: InboxEntry) -> Path | None:
        if self.quarantine_dir is None:
            return None
        try:
            now = entry.path.lstat()
        except FileNotFoundError:
            return None
        if now.st_size != entry.size or stat.S_ISLNK(now.st_mode) != entry.is_symlink:
            return None  # replaced since we looked: leave it for the next event
        self.quarantine_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = self.quarantine_dir / f"{stamp}-{entry.name}"
        try:
            os.rename(entry.path, target)
        except OSError:
            log.exception("could not quarantine %s", entry.path)
            return None
        return target


def _is_task_name(change: Any, path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("TASK-") and name.endswith(".md")


def _lstat_entry(path: Path) -> InboxEntry | None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    match = TASK_FILE_RE.fullmatch(path.name)
    return InboxEntry(
        name=path.name,
        path=path,
        task_id=match.group(1) if match else None,
        is_symlink=stat.S_ISLNK(info.st_mode),
        is_regular=stat.S_ISREG(info.st_mode),
        size=info.st_size,
        ctime_ns=info.st_ctime_ns,
    )


def _stamped(event: DoorbellEvent, at: float) -> DoorbellEvent:
    from dataclasses import replace

    return replace(event, emitted_at=at)
