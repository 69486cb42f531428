"""One TASK's location and baton's claim of it, in O(1); recovery through fcop's own API.

A crash inside a claim leaves one of fcop's five receipt states. Because
baton's claim receipt has a derived name (:mod:`.claim`), the state of a
TASK's claim is found without scanning ``fcop/operations/``: :func:`inspect`
reports it, :func:`recover` hands that receipt to fcop's
``recover_operation`` under the family lock (fcop's recovery takes none, and a
live claim between its TARGET_DURABLE and COMMITTED steps must not be raced).
"""

from __future__ import annotations

import os
from typing import Any

from fcop.v4.linearization import family_boundary
from fcop.v4.receipts import classify

from baton.coordination.lifecycle import TaskState
from baton.coordination.lifecycle._core import Workspace
from baton.coordination.lifecycle._fcop import fail
from baton.coordination.lifecycle.claim import _own_receipt, claim_receipt_path

__all__ = ["inspect", "recover"]


def inspect(ws: Workspace, task_id: str) -> TaskState:
    """Stages holding ``task_id`` and, if baton claimed it, that receipt's classification."""
    ws._check()
    if not isinstance(task_id, str) or not task_id.startswith("TASK-"):
        raise fail("INVALID_ENVELOPE", "Expected TASK ID", subject=str(task_id))
    stages = tuple(path.parent.name for path in ws._paths(task_id))
    path = claim_receipt_path(ws, task_id)
    receipt = _own_receipt(ws, path, task_id)
    if receipt is None:
        return TaskState(task_id=task_id, stages=stages, claim_receipt=None)
    # inspect_workspace's rule: a COMMITTED receipt stays COMMITTED after later moves.
    state = "COMMITTED" if receipt["stage"] == "COMMITTED" else classify(ws.root, receipt)
    return TaskState(
        task_id=task_id,
        stages=stages,
        claim_receipt=path.relative_to(ws.root).as_posix(),
        claim_stage=str(receipt["stage"]),
        claim_state=str(state),
    )


def recover(ws: Workspace, task_id: str) -> dict[str, Any]:
    """fcop's ``recover_operation`` for baton's claim of ``task_id`` (its result dict).

    RECOVERABLE_DUPLICATE (both copies, TARGET_DURABLE) removes the inbox copy;
    COMMITTED completes the receipt; NOT_COMMITTED (PREPARED, only the inbox
    copy) changes nothing: the TASK is still claimable and the next claim by
    the same actor finishes that receipt. DIVERGENT_DUPLICATE and INDETERMINATE
    carry ``error_code`` RECOVERY_REQUIRED and change nothing.
    """
    ws._check()
    path = claim_receipt_path(ws, task_id)
    if not os.path.lexists(path):
        raise fail("RECOVERY_REQUIRED", "No baton claim receipt for this TASK", subject=task_id)
    root_id = ws.family_root(task_id)
    with family_boundary(ws.root, ws.manifest["workspace_id"], root_id):
        receipt = _own_receipt(ws, path, task_id)
        assert receipt is not None
        result: dict[str, Any] = ws.recover_operation(
            operation_id=receipt["operation_id"],
            source_path=receipt["source_path"],
            target_path=receipt["target_path"],
            receipt_path=path.relative_to(ws.root).as_posix(),
        )
    return result
