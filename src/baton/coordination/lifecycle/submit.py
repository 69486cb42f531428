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

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

from fcop.errors import V4ProtocolError
from fcop.v4.encoding import digest, read_json
from fcop.v4.lifecycle import Lifecycle as CoreLifecycle
from fcop.v4.lifecycle import current_attempt
from fcop.v4.linearization import family_boundary
from fcop.v4.receipts import RECEIPT_CONTRACT, publish_prepared, validate_receipt

from baton.coordination.lifecycle._core import Vanished, Workspace
from baton.coordination.lifecycle._fcop import fail
from baton.coordination.lifecycle.claim import CLAIM_NAMESPACE, finish, promote_published, rewritten
from baton.coordination.lifecycle.reports import report_head

__all__ = ["own_receipt", "submit", "submit_operation_id", "submit_receipt_path"]

EDGE = ("active", "review")


def submit_operation_id(workspace_id: str, task_id: str, attempt_id: str) -> str:
    """The operation id of baton's T3 of ``attempt_id`` of ``task_id`` (a UUID URN)."""
    return uuid5(CLAIM_NAMESPACE, f"{workspace_id}\x1f{task_id}\x1f{attempt_id}\x1fsubmit_task").urn


def submit_receipt_path(ws: Workspace, task_id: str, attempt_id: str) -> Path:
    """Where baton's T3 receipt of this round is, or will be (fcop's ``receipt_path`` name)."""
    operation = UUID(submit_operation_id(ws.manifest["workspace_id"], task_id, attempt_id))
    path = ws.root / "fcop" / "operations" / f"transition-{operation.hex}.json"
    if path.is_symlink():
        raise fail("INVALID_ENVELOPE", "Symlink/junction in workspace path", subject=path.name)
    return path


def submit(
    ws: Workspace, task_id: str, *, actor: str, report_ref: str | None = None
) -> dict[str, Any]:
    """T3 as ``actor``; fcop's ``transition`` result (``existing`` on a replay)."""
    ws._check()
    if not isinstance(task_id, str) or not task_id.startswith("TASK-"):
        raise fail("INVALID_ENVELOPE", "Invalid TASK identity")
    if not isinstance(actor, str):
        raise fail("INVALID_TRANSITION", "Tool/actor does not match the edge")
    root_id = ws.family_root(task_id)
    with family_boundary(ws.root, ws.manifest["workspace_id"], root_id):
        ws._check()
        if ws.family_root(task_id) != root_id:
            raise fail("RECOVERY_REQUIRED", "Family identity changed across lock")
        return _under_lock(ws, task_id, actor, report_ref)


def _visible_attempt(ws: Workspace, task_id: str) -> str:
    """fcop's ``_visible_attempt``: one round across the ``active/`` and ``review/`` copies."""
    attempts: set[str] = set()
    for stage in EDGE:
        path = ws.root / "fcop" / "_lifecycle" / stage / f"{task_id}.md"
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


def own_receipt(
    ws: Workspace,
    path: Path,
    task_id: str,
    edge: tuple[str, str],
    attempt_field: str,
    attempt_id: str,
) -> dict[str, Any] | None:
    """baton's receipt at ``path`` (validated by fcop), None when there is none.

    A receipt whose contents contradict its derived name (another TASK, edge or
    round) is refused, as fcop refuses an unreadable receipt.
    """
    if not os.path.lexists(path):
        return None
    try:
        value = validate_receipt(ws.root, path, read_json(path))
    except V4ProtocolError as exc:
        raise fail(
            "RECOVERY_REQUIRED", "Unreadable or conflicting lifecycle receipt", subject=task_id
        ) from exc
    if (
        value["workspace_id"] != ws.manifest["workspace_id"]
        or value["task_id"] != task_id
        or (value["from_stage"], value["to_stage"]) != edge
        or value.get(attempt_field) != attempt_id
    ):
        raise fail("RECOVERY_REQUIRED", "Receipt identity conflicts with its name", subject=task_id)
    return dict(value)


def _under_lock(ws: Workspace, task_id: str, actor: str, report_ref: str | None) -> dict[str, Any]:
    lifecycle = CoreLifecycle(ws)
    request = {
        "task_id": task_id,
        "from_stage": "active",
        "to_stage": "review",
        "tool": "submit_task",
        "actor": actor,
        "report_ref": report_ref,
    }
    request_digest = lifecycle._request_digest(request)
    visible = _visible_attempt(ws, task_id)
    operation_id = submit_operation_id(ws.manifest["workspace_id"], task_id, visible)
    path = submit_receipt_path(ws, task_id, visible)
    existing = own_receipt(ws, path, task_id, EDGE, "attempt_id", visible)
    if existing is not None and existing["normalized_transition_digest"] == request_digest:
        if operation_id in ws._returned_unprotected_operations:
            raise fail(
                "INVALID_TRANSITION",
                "T2/T3 are not externally replayable operations",
                subject=task_id,
            )
        existing = promote_published(ws, path, existing)
        result: dict[str, Any] = lifecycle._recover(path, existing, existing=True)
        ws._returned_unprotected_operations.add(operation_id)
        return result

    lifecycle_dir = ws.root / "fcop" / "_lifecycle"
    source = lifecycle_dir / "active" / f"{task_id}.md"
    target = lifecycle_dir / "review" / f"{task_id}.md"
    if source.exists() and target.exists():
        if source.read_bytes() != target.read_bytes():
            raise fail(
                "TARGET_ALREADY_EXISTS_DIFFERENT",
                "Lifecycle target already contains different bytes",
                subject=task_id,
            )
        raise fail("STATE_AMBIGUOUS", "TASK has two authoritative paths")
    now_path, source_bytes, fields = ws.resolve_bytes(task_id)
    if now_path != source:
        raise fail("INVALID_TRANSITION", "Declared source does not match path NOW", subject=task_id)
    ws._relations(fields)
    attempt_id = current_attempt(fields)
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
    event: dict[str, Any] = {
        "at": datetime.now(UTC).isoformat(),
        "by": actor,
        "evidence_digest": evidence_digest,
        "evidence_ref": evidence_ref,
        "from": "active",
        "to": "review",
        "tool": "submit_task",
    }
    updated = dict(fields)
    updated["transitions"] = [*fields["transitions"], event]
    target_bytes, read_back = rewritten(source_bytes, updated, task_id)
    receipt: dict[str, Any] = {
        "contract": RECEIPT_CONTRACT,
        "version": 1,
        "operation_id": operation_id,
        "workspace_id": ws.manifest["workspace_id"],
        "task_id": task_id,
        "operation_kind": "lifecycle_transition",
        "from_stage": "active",
        "to_stage": "review",
        "tool": "submit_task",
        "actor": actor,
        "report_ref": report_ref,
        "source_path": source.relative_to(ws.root).as_posix(),
        "target_path": target.relative_to(ws.root).as_posix(),
        "source_digest": digest(source_bytes),
        "target_digest": digest(target_bytes),
        "normalized_transition_digest": request_digest,
        "evidence_ref": evidence_ref,
        "evidence_digest": evidence_digest,
        "attempt_id": attempt_id,
        "transition": event,
        "stage": "PREPARED",
    }
    published = Path(publish_prepared(ws.root, receipt))
    ws.boundary("transition", "PREPARED")
    result = finish(ws, published, receipt, source, target, source_bytes, target_bytes, read_back)
    ws._returned_unprotected_operations.add(operation_id)
    return result
