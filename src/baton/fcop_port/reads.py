"""Reading TASKs: one by id, one stage, the inbox by ``lstat``, a parent's children.

Reads tolerate the two-stage window: a move publishes the target, then unlinks
the source, so a reader can briefly see the TASK twice (``STATE_AMBIGUOUS``) or,
for moves towards an earlier-listed stage, not at all; :meth:`TaskReads.read_task`
retries both with a short bounded backoff. Listings are one ``os.scandir`` of a
stage directory with ``lstat`` facts, and each name is then read through Core,
which validates schema, identity, path containment and relations: the cost is
O(stage), not O(workspace).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from baton.fcop_errors import (
    InvalidEnvelope,
    StateAmbiguous,
    TaskNotFound,
    WorkspaceNotInitialized,
)
from baton.fcop_port.base import PortBase
from baton.fcop_port.envelope_text import frontmatter_has, split_body
from baton.fcop_port.records import (
    STAGES,
    TASK_ID_RE,
    InboxEntry,
    Stage,
    TaskInfo,
    inbox_entry,
    task_info,
)
from baton.intake.limits import DEFAULT_LIMITS

__all__ = ["TaskReads"]

_T = TypeVar("_T")


class TaskReads(PortBase):
    """The port's TASK reads (see the module docstring)."""

    def _retrying(self, what: Callable[[], _T], task_id: str) -> _T:
        delay = self._read_backoff
        for attempt in range(self._read_attempts):
            try:
                return what()
            except StateAmbiguous:
                if attempt + 1 == self._read_attempts:
                    raise
            except InvalidEnvelope as exc:
                # RELATION_INVALID is transient in two cases: zero paths (a move
                # towards an earlier-listed stage is in flight) and a parent that
                # is itself mid-move (Core wraps its STATE_AMBIGUOUS). Retry both;
                # then "gone" is TaskNotFound and anything else is re-raised.
                if exc.code != "RELATION_INVALID":
                    raise
                if attempt + 1 == self._read_attempts:
                    if self._exists_anywhere(task_id):
                        raise
                    raise TaskNotFound(task_id) from exc
            self._sleep(delay)
            delay = min(delay * 2, 0.05)
        raise AssertionError("unreachable")  # pragma: no cover

    def _exists_anywhere(self, task_id: str) -> bool:
        return any(os.path.lexists(self.stage_dir(s) / f"{task_id}.md") for s in STAGES)

    def read_task(self, task_id: str) -> TaskInfo:
        """Read one TASK through Core, retrying the two-stage window (bounded)."""
        if not TASK_ID_RE.fullmatch(task_id):
            raise InvalidEnvelope(f"not a TASK id: {task_id!r}", code="INVALID_ENVELOPE")

        def once() -> TaskInfo:
            fields = self._fast("read_task", lambda lc: lc.read_task(task_id), task_id=task_id)
            path = Path(fields["path"])
            try:
                body = split_body(path.read_bytes())
            except FileNotFoundError as exc:
                # Moved between Core's validation and our body read: read again.
                raise StateAmbiguous("TASK moved while reading", code="STATE_AMBIGUOUS") from exc
            return task_info(fields, path, body)

        return self._retrying(once, task_id)

    def scan_inbox(self) -> list[InboxEntry]:
        """Every ``TASK-*.md`` (and lookalike) entry in the inbox, by ``lstat`` only.

        Core's temporaries (``.fcop-*.tmp``) and non-``TASK-`` names are left out:
        they are not envelopes. Nothing is opened here, so a huge file or a
        symlink costs one ``lstat``.
        """
        return self._scan_stage("inbox")

    def _scan_stage(self, stage: str) -> list[InboxEntry]:
        out: list[InboxEntry] = []
        try:
            with os.scandir(self.stage_dir(stage)) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.startswith("TASK-") or not name.endswith(".md"):
                        continue
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # moved on between listing and lstat
                    out.append(inbox_entry(Path(entry.path), info))
        except FileNotFoundError as exc:
            raise WorkspaceNotInitialized(f"{self.stage_dir(stage)} is missing") from exc
        out.sort(key=lambda e: e.name)
        return out

    def _candidate_children(self, parent_id: str, stage: str) -> list[InboxEntry]:
        """The stage's TASKs that may name ``parent_id``: the lifecycle's index, or all."""
        if self._lifecycle is None:
            return self._scan_stage(stage)
        out = []
        for path in self._lifecycle.children(parent_id, stage):
            try:
                out.append(inbox_entry(path, path.lstat()))
            except FileNotFoundError:
                continue  # moved on since the listing
        return out

    def list_stage(self, stage: Stage) -> list[TaskInfo]:
        """Every valid TASK in one stage, read through Core (O(stage), not O(workspace)).

        Invalid entries are skipped here; the doorbell and intake's sweep report them.
        A file over intake's size cap is skipped by ``lstat`` before Core reads it whole.
        """
        tasks = []
        for entry in self._scan_stage(stage):
            if entry.task_id is None or entry.is_symlink or not entry.is_regular:
                continue
            if entry.size > DEFAULT_LIMITS.max_file_bytes:
                continue
            try:
                task = self.read_task(entry.task_id)
            except (TaskNotFound, InvalidEnvelope, StateAmbiguous):
                continue
            if task.stage == stage:
                tasks.append(task)
        return tasks

    def stage_counts(self) -> dict[str, int]:
        """``TASK-*.md`` names per stage (a directory listing each; nothing is parsed)."""
        counts: dict[str, int] = {}
        for stage in STAGES:
            try:
                with os.scandir(self.stage_dir(stage)) as entries:
                    counts[stage] = sum(
                        1 for e in entries if e.name.startswith("TASK-") and e.name.endswith(".md")
                    )
            except FileNotFoundError:
                counts[stage] = 0
        return counts

    def children(self, parent_id: str, stages: Sequence[Stage] = STAGES) -> list[TaskInfo]:
        """TASKs whose ``parent`` is ``parent_id``, in the given stages."""
        needle = f"\nparent: {parent_id}\n".encode()
        found: list[TaskInfo] = []
        for stage in stages:
            for entry in self._candidate_children(parent_id, stage):
                if entry.task_id is None or entry.is_symlink or not entry.is_regular:
                    continue
                if entry.size > DEFAULT_LIMITS.max_file_bytes:
                    continue  # over intake's cap: never read whole (the sweep refuses it)
                if not frontmatter_has(entry.path, needle):
                    continue
                try:
                    task = self.read_task(entry.task_id)
                except (TaskNotFound, InvalidEnvelope):
                    continue
                if task.parent == parent_id and all(t.task_id != task.task_id for t in found):
                    found.append(task)
        found.sort(key=lambda t: (t.created_at, t.task_id))
        return found
