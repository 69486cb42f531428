"""T2 (``claim_task``, inbox → active) in O(1), with fcop's receipt protocol.

fcop 4.0.5 begins every transition by reading and schema-validating *every*
``transition-*.json`` receipt in ``fcop/operations/`` (three per settled task)
to find the few about this TASK and edge: a replay of the same request to
finish, or a conflicting claim to refuse. Receipt names carry a random
operation id, so nothing cheaper can find them.

baton's claim finds them by name: its receipt's operation id is a UUID derived
from (workspace, TASK, ``claim_task``) — there is one T2 per TASK, the inbox
is entered once — so the receipt is ``fcop/operations/transition-<hex>.json``,
the name fcop itself would use for that UUID, and "is there a claim of this
TASK to finish or refuse?" is one ``lstat``. Everything else is fcop's, in
fcop's order: the family lock (the same lock file fcop takes, so fcop's own
claims and baton's exclude each other), the checks (two-stage window, the
declared source is the path NOW, strong relations, an archived Root), the
transition event, the receipt (validated by fcop's ``validate_receipt``), and
the commit: PREPARED receipt → target published → TARGET_DURABLE → source
removed → COMMITTED, each fsynced by fcop's primitives. A crash at any point
leaves what fcop's own claim leaves, so fcop's ``recover_operation`` and
fcop's replay of the same claim both finish it; baton's replay does too.

One difference, documented: a claim by *another* fcop client that crashed
after its PREPARED receipt and before publishing its target (nothing visible
but the receipt) is not seen. fcop would refuse every other claim of that
TASK until the same client retries; baton's claim supersedes it, and the
orphan receipt then classifies ``INDETERMINATE`` in ``inspect_workspace``
(a warning, never an error; it moved nothing). See ``docs/lifecycle.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from fcop.v4.lifecycle import Lifecycle as CoreLifecycle

from baton.fcop_port.lifecycle import moves
from baton.fcop_port.lifecycle._core import Workspace
from baton.fcop_port.lifecycle._fcop import fail
from baton.fcop_port.records import FcopDict

__all__ = ["EDGE", "claim", "claim_operation_id", "claim_receipt_path", "read_claim_receipt"]

EDGE = ("inbox", "active")


def claim_operation_id(workspace_id: str, task_id: str) -> str:
    """The operation id of baton's T2 of ``task_id`` (a UUID URN, fcop's receipt naming)."""
    return moves.operation_id(workspace_id, task_id, "claim_task")


def claim_receipt_path(ws: Workspace, task_id: str) -> Path:
    """Where baton's T2 receipt of ``task_id`` is, or will be."""
    return moves.receipt_path(ws, claim_operation_id(ws.manifest["workspace_id"], task_id))


def claim(ws: Workspace, task_id: str, *, actor: str) -> FcopDict:
    """T2 as ``actor``; fcop's ``transition`` result (``existing`` on a replay)."""
    return moves.under_family_lock(
        ws, task_id, actor, lambda root: _under_lock(ws, task_id, actor, root)
    )


def read_claim_receipt(ws: Workspace, path: Path, task_id: str) -> FcopDict | None:
    """baton's T2 receipt of ``task_id`` at ``path`` (validated), None when absent."""
    return moves.own_receipt(ws, path, task_id, EDGE)


def _under_lock(ws: Workspace, task_id: str, actor: str, root_id: str) -> FcopDict:
    request = {
        "task_id": task_id,
        "from_stage": "inbox",
        "to_stage": "active",
        "tool": "claim_task",
        "actor": actor,
    }
    request_digest = CoreLifecycle(ws)._request_digest(request)
    operation = claim_operation_id(ws.manifest["workspace_id"], task_id)
    path = claim_receipt_path(ws, task_id)
    existing = read_claim_receipt(ws, path, task_id)
    if existing is not None and existing["normalized_transition_digest"] == request_digest:
        result = moves.replay(ws, path, existing, operation)
        ws.sweep_temporaries("active", task_id)
        return result
    checked = moves.checked_source(ws, task_id, EDGE)
    moves.archived_root(ws, task_id, root_id)
    attempt_id = uuid4().urn
    event: FcopDict = {
        "at": datetime.now(UTC).isoformat(),
        "attempt_id": attempt_id,
        "by": actor,
        "from": "inbox",
        "to": "active",
        "tool": "claim_task",
    }
    if existing is not None:
        raise fail("RECOVERY_REQUIRED", "A conflicting receipt already claims T2", subject=task_id)
    result = moves.commit_move(
        ws,
        checked,
        operation=operation,
        request=request,
        request_digest=request_digest,
        event=event,
        evidence=([], []),
        attempt_id=attempt_id,
    )
    ws.sweep_temporaries("active", task_id)
    return result
