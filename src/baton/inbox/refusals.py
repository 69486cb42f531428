"""How the doorbell refuses an entry: an FCoP ISSUE always, a quarantine when Core cannot read it.

A hostile entry (a symlink, a non-regular or oversize file, a bad name, bytes
that are not a valid 4.0 envelope) is moved out of ``fcop/`` into baton's
state directory with a ``.reason.json`` beside it: left in place it would break
Core for everyone. A valid TASK baton will not route is left where it is (it
harms nothing) with one ISSUE, said once. Every message is display-safe.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort, InboxEntry
from baton.inbox.doorbell_events import RefusalReason, TaskRefused
from baton.intake.quarantine import quarantine
from baton.intake.stability import FileFacts
from baton.intake.sweep import Finding
from baton.security.display import neutralize_terminal

__all__ = ["InboxRefusals"]

log = logging.getLogger("baton.inbox.doorbell")

_IN_PLACE: frozenset[str] = frozenset(
    {"invalid_relation", "unknown_recipient", "state_ambiguous", "unreadable", "doorbell_error"}
)
"""Refusals that leave the file where it is (it harms nothing, or may heal);
every other reason means Core cannot read the file safely: it is quarantined."""


class InboxRefusals:
    """The doorbell's refusals (see the module docstring); :class:`~baton.inbox.doorbell.Doorbell` is one."""

    port: FcopPort
    human: str
    issue_sender: str
    quarantine_dir: Path | None
    _refused: dict[str, str | None]

    def _hostile(
        self,
        entry: InboxEntry,
        reason: RefusalReason,
        message: str,
        *,
        facts: FileFacts | None = None,
    ) -> TaskRefused:
        message = neutralize_terminal(message)
        moved = self._quarantine(entry, reason, message, facts) if reason not in _IN_PLACE else None
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

    def refuse_file(self, finding: Finding) -> TaskRefused:
        """A file outside the inbox that Core must not read (from the :class:`Sweeper`).

        Quarantined (unless quarantine is off) and reported with a workspace ISSUE:
        the ISSUE cannot name the TASK, which may be the very file moved away.
        """
        verdict = finding.verdict
        message = neutralize_terminal(verdict.detail)
        moved = None
        if self.quarantine_dir is not None:
            try:
                moved = quarantine(
                    finding.path,
                    into=self.quarantine_dir,
                    reason=verdict.reason,
                    detail=message,
                    origin=finding.origin,
                    expected=finding.facts,
                )
            except OSError:
                log.exception("could not quarantine %s", finding.path)
        where = f"; moved to {moved}" if moved else "; left in place"
        body = (
            f"baton refused {finding.origin!r}: {verdict.reason}.\n\n{message}{where}\n\n"
            "Core (the fcop library) would have had to parse it; it was not read."
        )
        try:
            issue: str | None = self.port.write_issue(
                sender=self.issue_sender, recipient=self.human, severity="error", body=body
            )
        except CoordinationError:
            log.exception("could not file an ISSUE for %s", finding.origin)
            issue = None
        return TaskRefused(
            name=finding.origin,
            reason=verdict.reason,
            message=message + where,
            task_id=finding.path.stem if finding.path.name.startswith("TASK-") else None,
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
            f"baton's doorbell refused inbox entry {entry.name!r}: {reason}.\n\n"
            f"{neutralize_terminal(message)}\n\nIts content was not dispatched to any agent."
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

    def _quarantine(
        self, entry: InboxEntry, reason: str, message: str, facts: FileFacts | None
    ) -> Path | None:
        if self.quarantine_dir is None:
            return None
        try:
            now = entry.path.lstat()
        except FileNotFoundError:
            return None
        if now.st_size != entry.size or stat.S_ISLNK(now.st_mode) != entry.is_symlink:
            return None  # replaced since we looked: leave it for the next event
        try:
            return quarantine(
                entry.path,
                into=self.quarantine_dir,
                reason=reason,
                detail=message,
                origin=entry.path.relative_to(self.port.root).as_posix(),
                expected=facts,
            )
        except OSError:
            log.exception("could not quarantine %s", entry.path)
            return None
