"""A TASK attempt's REPORTs, its head, and ``write_report``, constant in history.

fcop 4.0.5's ``report_head`` and ``write_report`` parse every REPORT of the
workspace to find the few about one (TASK, attempt). Here the
:class:`~.subjects.SubjectIndex` offers the candidates and each one is
validated by fcop (``read_validated``: fcop's parser and schema, memoized by
the bytes); the head rule is fcop's, written once in :func:`head_of`, and
``write_report`` runs fcop's checks in fcop's order under the same family lock
before fcop's own ``_append`` publishes the envelope.

Differences, documented: a REPORT about *another* TASK that fcop cannot parse
makes fcop's T3 and ``write_report`` fail for every TASK; here only the TASKs
it may be about see it (an unparseable file is offered to every look-up, so
it still fails those). A symlink among the candidates is refused (fcop would
follow it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from fcop.errors import V4ProtocolError
from fcop.v4.lifecycle import current_attempt
from fcop.v4.linearization import family_boundary

from baton.fcop_port.lifecycle._core import Vanished, Workspace
from baton.fcop_port.lifecycle._fcop import fail
from baton.fcop_port.records import FcopDict, FcopMapping

__all__ = ["head_of", "report_group", "report_head", "write_report"]

_E = TypeVar("_E")


def head_of(group: Sequence[tuple[_E, FcopMapping]], subject: str) -> tuple[_E, FcopMapping]:
    """fcop's head rule over one attempt's REPORTs: the one no valid replacement replaces.

    ``group`` pairs anything (a path, a record) with the REPORT's fields; raises
    fcop's ``REPORT_REQUIRED`` / ``REPORT_HEAD_AMBIGUOUS`` as fcop's ``report_head`` does.
    """
    if not group:
        raise fail("REPORT_REQUIRED", "Current attempt has no REPORT", subject=subject)
    by_id = {fields["report_id"]: (item, fields) for item, fields in group}
    referenced: set[str] = set()
    for _, fields in group:
        if fields["report_kind"] != "replacement":
            continue
        prior = [ref for ref in fields.get("references", []) if ref in by_id]
        if len(prior) != 1 or prior[0] == fields["report_id"]:
            raise fail(
                "REPORT_HEAD_AMBIGUOUS",
                "Replacement does not identify exactly one prior head",
                subject=subject,
            )
        referenced.add(prior[0])
    heads = [entry for report_id, entry in by_id.items() if report_id not in referenced]
    if not heads:
        raise fail("REPORT_REQUIRED", "Current attempt REPORT graph has no head", subject=subject)
    if len(heads) != 1:
        raise fail(
            "REPORT_HEAD_AMBIGUOUS", "Current attempt REPORT head is not unique", subject=subject
        )
    return heads[0]


def _validated(ws: Workspace, path: Path) -> FcopDict | None:
    """fcop's parse and validation of one candidate (None: it vanished since the listing)."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise fail(
                "INVALID_ENVELOPE",
                "Symlink/junction in workspace path",
                subject=os.path.relpath(path, ws.root),
            )
        _, fields = ws.read_validated(path)
    except (FileNotFoundError, Vanished):
        ws.subjects("REPORT").forget(path.name)
        return None
    return fields


def report_group(
    ws: Workspace, task_id: str, attempt_id: str | None
) -> list[tuple[Path, FcopDict]]:
    """Every valid REPORT about ``task_id`` (one attempt, or all when None), fcop's order."""
    found = []
    for path in ws.subjects("REPORT").lookup(task_id, attempt_id):
        fields = _validated(ws, path)
        if fields is None or fields.get("subject_ref") != task_id:
            continue
        if attempt_id is not None and fields.get("attempt_id") != attempt_id:
            continue
        found.append((path, fields))
    return found


def report_head(ws: Workspace, task_id: str, attempt_id: str) -> tuple[Path, FcopMapping]:
    """fcop's ``report_head(creation, task_id, attempt_id)`` over the index's candidates."""
    return head_of(report_group(ws, task_id, attempt_id), task_id)


def write_report(ws: Workspace, **kwargs: Any) -> FcopDict:  # fcop's keywords, checked here
    """fcop's ``_Creation.write_report``: the same checks, in order, then fcop's ``_append``."""
    ws._check(kwargs.get("workspace_id"))
    subject = kwargs.get("subject_ref")
    if not isinstance(subject, str) or not subject.startswith("TASK-"):
        raise fail("RELATION_INVALID", "REPORT subject must name a TASK")
    root_id = ws.family_root(subject)
    with family_boundary(ws.root, ws.manifest["workspace_id"], root_id):
        ws._check(kwargs.get("workspace_id"))
        if ws.family_root(subject) != root_id:
            raise fail("RECOVERY_REQUIRED", "Family identity changed across lock")
        if root_id != subject:
            root_path, _ = ws._resolve(root_id)
            if root_path.parent.name == "archive":
                raise fail("INVALID_TRANSITION", "An archived Root freezes Branch REPORT state")
        task_path, task_fields = ws._resolve(subject)
        request_attempt = kwargs.get("attempt_id")
        if not isinstance(request_attempt, str):
            raise fail("INVALID_ENVELOPE", "REPORT attempt must be a UUID URN")
        try:
            task_attempt: str | None = current_attempt(task_fields)
        except V4ProtocolError as exc:
            if exc.code != "ATTEMPT_MISMATCH" or task_path.parent.name != "inbox":
                raise
            task_attempt = None
        if task_attempt is not None and request_attempt != task_attempt:
            raise fail("ATTEMPT_MISMATCH", "REPORT attempt is not current")
        existing = report_group(ws, subject, request_attempt)
        kind = kwargs.get("report_kind")
        if kind == "final" and existing:
            raise fail("REPORT_HEAD_AMBIGUOUS", "Final REPORT already exists")
        if kind == "replacement":
            _, head = head_of(existing, subject)
            stems = {path.stem for path, _ in existing}
            same_attempt_refs = [ref for ref in kwargs.get("references", []) if ref in stems]
            if same_attempt_refs != [head["report_id"]]:
                raise fail(
                    "REPORT_HEAD_AMBIGUOUS", "Replacement must reference the unique current head"
                )
        result: FcopDict = ws._append("REPORT", kwargs)
        return result
