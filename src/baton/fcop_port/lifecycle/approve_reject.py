"""T4 and T5 (``approve_task`` review → done, ``reject_task`` review → active) in O(1).

fcop 4.0.5's authorized transitions scan three histories per call: every
receipt (``matching_receipts``), every TASK of every stage for an earlier
consumption of the authorization (``find_consumptions``), and every REPORT for
the head (``validate_gate`` → ``report_head``). Here, as for T2 and T3
(:mod:`.claim`, :mod:`.submit`):

* one review round ends once (approved, or rejected into a new attempt), so the
  receipt's operation id is derived from (workspace, TASK, source attempt,
  tool) and found by one ``lstat``;
* the authorization REVIEW names its subject (``validate_gate`` refuses any
  other), so an earlier consumption is looked for in that TASK's own copies;
* the REPORT head comes from :func:`.reports.report_head` over the index.

Every rule is fcop's, in fcop's order, with fcop's own helpers for the gate
(``_review``, ``_evidence_review``, ``_current_t3``, ``_time``,
``validate_profile_issuer``: the trusted evaluator decides, as in fcop); only
the three look-ups above differ. Differences, documented in
``docs/lifecycle.md``: a consumption forged into *another* TASK's file is not
seen (fcop would call the authorization reused), and the blind spot of T2/T3
(another client's move that crashed between its receipt and its target).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from fcop.errors import V4ProtocolError
from fcop.v4 import authorization as fcop_authorization
from fcop.v4.authorization import (
    _AUTHORIZATION_CARRIERS,
    AuthorizationGate,
    _current_t3,
    _evidence_review,
    _review,
    _time,
    usable_profiles,
    validate_profile_issuer,
)
from fcop.v4.encoding import STAGES, digest
from fcop.v4.lifecycle import Lifecycle as CoreLifecycle
from fcop.v4.lifecycle import current_attempt

from baton.fcop_port.lifecycle import moves
from baton.fcop_port.lifecycle._core import Vanished, Workspace
from baton.fcop_port.lifecycle._fcop import fail
from baton.fcop_port.lifecycle.reports import report_head
from baton.fcop_port.records import FcopDict, FcopMapping

__all__ = ["EDGES", "approve_or_reject", "approve_reject_operation_id"]

EDGES = {"approve_task": ("review", "done"), "reject_task": ("review", "active")}
"""The authorized edges this writer takes; T6/T7 stay fcop's."""

_ALLOWED = {"report_ref", "review_ref", "authorization_ref", "profile_ref", "family_digest"}


def approve_reject_operation_id(workspace_id: str, task_id: str, attempt_id: str, tool: str) -> str:
    """The operation id of baton's T4/T5 ending review round ``attempt_id`` (a UUID URN)."""
    return moves.operation_id(workspace_id, task_id, attempt_id, tool)


def approve_or_reject(
    ws: Workspace, task_id: str, *, tool: str, actor: str, **refs: str | None
) -> FcopDict:
    """T4 or T5 as ``actor`` with fcop's ``transition`` keyword references."""
    ws._check()
    if not isinstance(task_id, str) or not task_id.startswith("TASK-"):
        raise fail("INVALID_ENVELOPE", "Invalid TASK identity")
    if tool not in EDGES:
        raise fail("INVALID_TRANSITION", "Tool/actor does not match the edge")
    if set(refs) - _ALLOWED:
        raise fail("INVALID_ENVELOPE", "Unexpected transition fields")
    if refs.get("family_digest") is not None:
        raise fail("AUTHORIZATION_INVALID", "T4-T6 do not consume family_digest")
    refs = {name: value for name, value in refs.items() if name != "family_digest"}
    from_stage, to_stage = EDGES[tool]
    request = {
        "task_id": task_id,
        "from_stage": from_stage,
        "to_stage": to_stage,
        "tool": tool,
        "actor": actor,
        **refs,
    }
    return moves.under_family_lock(ws, task_id, actor, lambda root: _under_lock(ws, request, root))


def _rounds(ws: Workspace, task_id: str, authorization_ref: Any) -> list[str]:
    """The review rounds a receipt of this request may carry (its ``source_attempt_id``).

    The ``review/`` copy's attempt (the round still open), and the attempt the
    authorization REVIEW is bound to (after a committed T4 the TASK is in ``done/``;
    after a T5 it is in ``active/`` with a new attempt; the gate bound the
    authorization to the round it ended). Unreadable sources add nothing: the checks
    that follow raise fcop's errors on them.
    """
    rounds: list[str] = []
    path = ws.task_path("review", task_id)
    try:
        if path.is_file():
            _, fields = ws.read_validated(path)
            rounds.append(current_attempt(fields))
    except (Vanished, V4ProtocolError):
        pass
    if isinstance(authorization_ref, str) and authorization_ref.startswith("REVIEW-"):
        try:
            _, authorization = ws._resolve(authorization_ref)
        except V4ProtocolError:
            authorization = {}
        bound = authorization.get("attempt_id")
        if (
            authorization.get("subject_ref") == task_id
            and isinstance(bound, str)
            and bound not in rounds
        ):
            rounds.append(bound)
    return rounds


def _consumed(ws: Workspace, task_id: str, authorization_ref: str) -> bool:
    """fcop's ``find_consumptions`` over the authorization's own TASK (every stage)."""
    for stage in STAGES:
        path = ws.task_path(stage, task_id)
        if not path.is_file():
            continue
        try:
            _, fields = ws.read_validated(path)
        except Vanished:
            continue
        for event in fields.get("transitions", []):
            if isinstance(event, Mapping) and event.get("authorization_ref") == authorization_ref:
                return True
    return False


def _gate(
    ws: Workspace, request: FcopMapping, source_fields: FcopMapping, attempt_id: str
) -> AuthorizationGate:
    """fcop's ``validate_gate`` for T4/T5 (evidence REVIEW required), head from the index."""
    available = usable_profiles(ws)
    if not available:
        raise fail(
            "AUTHORIZATION_PROFILE_UNAVAILABLE", "No adopted Profile has a trusted evaluator"
        )
    auth_ref = request.get("authorization_ref")
    if auth_ref is None:
        raise fail("AUTHORIZATION_REQUIRED", "Transition requires authorization")
    edge = (request["from_stage"], request["to_stage"])
    task_id = request["task_id"]
    report_path, report = report_head(ws, task_id, attempt_id)
    report_ref = report["report_id"]
    report_digest = digest(report_path.read_bytes())
    if request.get("report_ref") not in {None, report_ref}:
        raise fail("REPORT_HEAD_AMBIGUOUS", "Explicit REPORT is not current head")
    _current_t3(source_fields, report_ref, report_digest)
    evidence_ref = [report_ref]
    evidence_digest = [report_digest]
    _, review, review_digest = _evidence_review(
        ws,
        request,
        task_id=task_id,
        attempt_id=attempt_id,
        edge=edge,
        report_ref=report_ref,
        report_digest=report_digest,
    )
    evidence_ref.append(review["review_id"])
    evidence_digest.append(review_digest)
    _, authorization, authorization_digest = _review(ws, auth_ref)
    review_kind = authorization.get("review_kind")
    carrier = _AUTHORIZATION_CARRIERS.get(review_kind) if isinstance(review_kind, str) else None
    if carrier is None or edge not in carrier[0] or authorization.get("decision") != carrier[1]:
        raise fail(
            "AUTHORIZATION_INVALID", "REVIEW kind/decision cannot authorize this lifecycle edge"
        )
    if (
        authorization.get("subject_ref") != task_id
        or authorization.get("transition") != {"from": edge[0], "to": edge[1]}
        or authorization.get("attempt_id") != attempt_id
        or authorization.get("operation_kind") != "lifecycle_transition"
        or authorization.get("authorization_scope") != "single_use"
        or authorization.get("family_digest") != request.get("family_digest")
    ):
        raise fail("AUTHORIZATION_INVALID", "Authorization binding mismatch")
    issued = _time(authorization.get("issued_at"), field="issued_at")
    expires_value = authorization.get("expires_at")
    expires: datetime | None = None
    if expires_value is not None:
        expires = _time(expires_value, field="expires_at")
        if expires < fcop_authorization._utc_now():
            raise fail("AUTHORIZATION_EXPIRED", "Authorization has expired")
        if expires < issued:
            raise fail("AUTHORIZATION_INVALID", "Authorization time range is invalid")
    profile_ref = authorization.get("profile_ref")
    if request.get("profile_ref") not in {None, profile_ref}:
        raise fail("AUTHORIZATION_INVALID", "Requested Profile differs from REVIEW")
    profile_ref = validate_profile_issuer(ws, authorization)
    if expires is not None and expires < fcop_authorization._utc_now():
        raise fail(
            "AUTHORIZATION_EXPIRED", "Authorization expired before consumption linearization"
        )
    if authorization.get("evidence_digest") is not None:
        bound = authorization["evidence_digest"]
        if not isinstance(bound, list) or bound != evidence_digest[: len(bound)]:
            raise fail("EVIDENCE_DIGEST_MISMATCH", "Authorization binds changed evidence")
    return AuthorizationGate(
        evidence_ref=tuple(evidence_ref),
        evidence_digest=tuple(evidence_digest),
        authorization_ref=auth_ref,
        authorization_digest=authorization_digest,
        profile_ref=profile_ref,
    )


def _under_lock(ws: Workspace, request: FcopDict, root_id: str) -> FcopDict:
    task_id, tool = request["task_id"], request["tool"]
    edge = (request["from_stage"], request["to_stage"])
    request_digest = CoreLifecycle(ws)._request_digest(request)
    # fcop: every receipt of this edge; here baton's receipts of the request's rounds.
    receipts: dict[str, tuple[Path, FcopDict]] = {}
    for attempt in _rounds(ws, task_id, request.get("authorization_ref")):
        path = moves.receipt_path(
            ws, approve_reject_operation_id(ws.manifest["workspace_id"], task_id, attempt, tool)
        )
        found = moves.own_receipt(ws, path, task_id, edge, "source_attempt_id", attempt)
        if found is not None:
            receipts[attempt] = (path, found)
    for path, found in receipts.values():
        if found["normalized_transition_digest"] == request_digest:
            return moves.replay(ws, path, found, None)  # authorized moves are replayable
    auth_ref = request.get("authorization_ref")
    if isinstance(auth_ref, str) and _consumed(ws, task_id, auth_ref):
        raise fail(
            "AUTHORIZATION_REUSED",
            "Authorization was consumed by a different transition",
            subject=task_id,
        )
    checked = moves.checked_source(ws, task_id, edge)
    if edge[1] == "active":
        moves.archived_root(ws, task_id, root_id)
    source_attempt_id = current_attempt(checked.fields)
    if source_attempt_id in receipts:
        raise fail(
            "RECOVERY_REQUIRED",
            "A conflicting receipt claims the current authorized round",
            subject=task_id,
        )
    gate = _gate(ws, request, checked.fields, source_attempt_id)
    target_attempt_id = uuid4().urn if edge[1] == "active" else source_attempt_id
    event: FcopDict = {"at": datetime.now(UTC).isoformat()}
    if edge[1] == "active":
        event["attempt_id"] = target_attempt_id
    event.update(
        {
            "authorization_digest": gate.authorization_digest,
            "authorization_ref": gate.authorization_ref,
            "by": request["actor"],
            "evidence_digest": list(gate.evidence_digest),
            "evidence_ref": list(gate.evidence_ref),
            "from": edge[0],
            "to": edge[1],
            "tool": tool,
        }
    )
    return moves.commit_move(
        ws,
        checked,
        operation=approve_reject_operation_id(
            ws.manifest["workspace_id"], task_id, source_attempt_id, tool
        ),
        request=request,
        request_digest=request_digest,
        event=event,
        evidence=(list(gate.evidence_ref), list(gate.evidence_digest)),
        attempt_id=target_attempt_id,
        authorized={  # fcop's authorized fields
            "review_ref": request.get("review_ref"),
            "authorization_ref": gate.authorization_ref,
            "authorization_digest": gate.authorization_digest,
            "profile_ref": gate.profile_ref,
            "request_profile_ref": request.get("profile_ref"),
            "source_attempt_id": source_attempt_id,
            "target_attempt_id": target_attempt_id,
            "family_digest": request.get("family_digest"),
        },
    )
