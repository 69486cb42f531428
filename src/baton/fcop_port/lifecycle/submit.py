"""T3 (``submit_task``, active → review) in O(1), with fcop's receipt protocol.

Like the claim (:mod:`.claim`, whose docstring explains the receipt naming):
fcop 4.0.5's T3 validates every receipt in ``fcop/operations/`` and parses
every REPORT to find the few about this TASK. There is one T3 per attempt (a
rejection or a reopen starts a new attempt), so baton's receipt has an
operation id derived from (workspace, TASK, attempt, ``submit_task``) and is
found by one ``lstat``; the attempt's REPORT head comes from
:func:`.reports.report_head` over the REPORT index. Everything else is fcop's,
in fcop's order, under fcop's family lock: the visible round (one attempt
across the ``active/`` and ``review/`` copies), replay of the same request,
both copies present, the declared source is the path NOW, strong relations,
the explicit REPORT (a REPORT of the current attempt, and the head), the
transition event with the head's digest as evidence, the receipt (validated
by fcop's ``validate_receipt``) and the commit (PREPARED → target published
→ TARGET_DURABLE → source removed → COMMITTED). A crash anywhere leaves what
fcop's own T3 leaves: fcop's ``recover_operation`` and a replay finish it.

The difference documented for the claim holds here: a T3 by another fcop
client that crashed after its PREPARED receipt and before publishing its
target is not seen, and baton's T3 supersedes it (the orphan receipt then
classifies INDETERMINATE, a warning). See ``docs/lifecycle.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fcop.v4.encoding import digest
from fcop.v4.lifecycle import Lifecycle as CoreLifecycle
from fcop.v4.lifecycle import current_attempt

from baton.fcop_port.lifecycle import moves
from baton.fcop_port.lifecycle._core import Vanished, Workspace
from baton.fcop_port.lifecycle._fcop import fail
from baton.fcop_port.lifecycle.reports import report_head
from baton.fcop_port.records import FcopDict

__all__ = ["EDGE", "submit", "submit_operation_id", "submit_receipt_path"]

EDGE = ("active", "review")


def submit_operation_id(workspace_id: str, task_id: str, attempt_id: str) -> str:
    """The operation id of baton's T3 of ``attempt_id`` of ``task_id`` (a UUID URN)."""
    return moves.operation_id(workspace_id, task_id, attempt_id, "submit_task")


def submit_receipt_path(ws: Workspace, task_id: str, attempt_id: str) -> Path:
    """Where baton's T3 receipt of this round is, or will be."""
    return moves.receipt_path(
        ws, submit_operation_id(ws.manifest["workspace_id"], task_id, attempt_id)
    )


def submit(ws: Workspace, task_id: str, *, actor: str, report_ref: str | None = None) -> FcopDict:
    """T3 as ``actor``; fcop's ``transition`` result (``existing`` on a replay)."""
    return moves.under_family_lock(
        ws, task_id, actor, lambda _root: _under_lock(ws, task_id, actor, report_ref)
    )


def _visible_attempt(ws: Workspace, task_id: str) -> str:
    """fcop's ``_visible_attempt``: one round across the ``active/`` and ``review/`` copies."""
    attempts: set[str] = set()
    for stage in EDGE:
        path = ws.task_path(stage, task_id)
        if not path.is_file():
            continue
        try:
            _, fields = ws.read_validated(path)
        except Vanished as exc:
            raise fail("INVALID_ENVELOPE", "Unreadable envelope", subject=str(path)) from exc
        attempts.add(current_attempt(fields))
    if len(attempts) != 1:
        raise fail(
            "RECOVERY_REQUIRED", "Current lifecycle round is not uniquely provable", subject=task_id
        )
    return attempts.pop()


def _under_lock(ws: Workspace, task_id: str, actor: str, report_ref: str | None) -> FcopDict:
    request = {
        "task_id": task_id,
        "from_stage": "active",
        "to_stage": "review",
        "tool": "submit_task",
        "actor": actor,
        "report_ref": report_ref,
    }
    request_digest = CoreLifecycle(ws)._request_digest(request)
    visible = _visible_attempt(ws, task_id)
    operation = submit_operation_id(ws.manifest["workspace_id"], task_id, visible)
    path = submit_receipt_path(ws, task_id, visible)
    existing = moves.own_receipt(ws, path, task_id, EDGE, "attempt_id", visible)
    if existing is not None and existing["normalized_transition_digest"] == request_digest:
        return moves.replay(ws, path, existing, operation)
    checked = moves.checked_source(ws, task_id, EDGE)
    attempt_id = current_attempt(checked.fields)
    if existing is not None:
        raise fail(
            "RECOVERY_REQUIRED",
            "A conflicting receipt claims the current T3 round",
            subject=task_id,
        )
    if report_ref is not None:
        _, explicit = ws._resolve(report_ref)
        if explicit.get("type") != "REPORT":
            raise fail("REPORT_REQUIRED", "T3 evidence is not a REPORT")
        if explicit.get("attempt_id") != attempt_id:
            raise fail("ATTEMPT_MISMATCH", "REPORT is from an old attempt")
    report_path, report = report_head(ws, task_id, attempt_id)
    if report_ref not in {None, report["report_id"]}:
        raise fail("REPORT_HEAD_AMBIGUOUS", "Explicit REPORT is not current head")
    evidence_ref = [report["report_id"]]
    evidence_digest = [digest(report_path.read_bytes())]
    event: FcopDict = {
        "at": datetime.now(UTC).isoformat(),
        "by": actor,
        "evidence_digest": evidence_digest,
        "evidence_ref": evidence_ref,
        "from": "active",
        "to": "review",
        "tool": "submit_task",
    }
    return moves.commit_move(
        ws,
        checked,
        operation=operation,
        request=request,
        request_digest=request_digest,
        event=event,
        evidence=(evidence_ref, evidence_digest),
        attempt_id=attempt_id,
    )
