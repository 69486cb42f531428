"""One TASK's crash state, found without scanning history, and its recovery.

A crash inside a create or a claim leaves one of a few states, each of which
fcop's own protocol already defines:

* a claim receipt short of COMMITTED (fcop's five-state classification:
  NOT_COMMITTED, RECOVERABLE_DUPLICATE, COMMITTED, DIVERGENT_DUPLICATE,
  INDETERMINATE); baton's receipt has a derived name (:mod:`.claim`), so it is
  found with one ``lstat``;
* a created TASK without its operation fact (:mod:`.create`);
* a temporary ``.fcop-create-<TASK id>-*.tmp`` that fcop's ``publish`` keeps
  "as recovery evidence" when it dies between writing and linking; fcop's
  ``validate_workspace`` reports it as an unexpected bucket entry.

:func:`inspect` reports them (reads only); :func:`recover` settles them, under
the TASK's family lock (fcop's ``recover_operation`` takes none, and a live
claim between its TARGET_DURABLE and COMMITTED steps must not be raced):
receipts go to fcop's ``recover_operation``, a missing fact is published as
:mod:`.create` would, and temporaries of a TASK whose move is settled are
removed. The rule is written down in ``docs/lifecycle.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

from fcop.errors import V4ProtocolError
from fcop.v4.encoding import operation_lock, read_json
from fcop.v4.linearization import family_boundary
from fcop.v4.receipts import RECEIPT_CONTRACT, classify, validate_receipt

from baton.fcop_port.lifecycle._core import Workspace
from baton.fcop_port.lifecycle._fcop import fail
from baton.fcop_port.lifecycle.claim import claim_receipt_path, read_claim_receipt
from baton.fcop_port.lifecycle.location import TaskLocation
from baton.fcop_port.lifecycle.moves import promote_published
from baton.fcop_port.records import FcopDict

__all__ = ["complete_fact", "inspect", "recover", "recover_receipt"]

_TEMP_STAGES = ("inbox", "active")
"""Where T1 (inbox) and T2 (active) publish a TASK, so where their temporaries can be."""


def _task_id(task_id: str) -> str:
    if not isinstance(task_id, str) or not task_id.startswith("TASK-"):
        raise fail("INVALID_ENVELOPE", "Expected TASK ID", subject=str(task_id))
    return task_id


def temporaries(ws: Workspace, task_id: str) -> list[Path]:
    """fcop ``publish`` temporaries of ``task_id`` in the stages T1 and T2 publish into.

    O(entries of ``inbox/`` and ``active/``): live work, not history.
    """
    return [path for stage in _TEMP_STAGES for path in ws.temporaries(stage, task_id)]


def _claim_state(ws: Workspace, receipt: FcopDict) -> str:
    # inspect_workspace's rule: a COMMITTED receipt stays COMMITTED after later moves.
    if receipt["stage"] == "COMMITTED":
        return "COMMITTED"
    return str(classify(ws.root, receipt))


def inspect(ws: Workspace, task_id: str) -> TaskLocation:
    """Stages holding ``task_id``, baton's claim of it, leftover temporaries (reads only)."""
    ws._check()
    task_id = _task_id(task_id)
    stages = tuple(path.parent.name for path in ws._paths(task_id))
    temps = tuple(p.relative_to(ws.root).as_posix() for p in temporaries(ws, task_id))
    path = claim_receipt_path(ws, task_id)
    receipt = read_claim_receipt(ws, path, task_id)
    if receipt is None:
        return TaskLocation(task_id=task_id, stages=stages, claim_receipt=None, temporaries=temps)
    return TaskLocation(
        task_id=task_id,
        stages=stages,
        claim_receipt=path.relative_to(ws.root).as_posix(),
        claim_stage=str(receipt["stage"]),
        claim_state=_claim_state(ws, receipt),
        temporaries=temps,
    )


def _foreign_receipts(ws: Workspace, task_id: str) -> list[tuple[Path, FcopDict]]:
    """Other clients' unfinished receipts of ``task_id``: a scan of ``fcop/operations``.

    The only O(history) step here, taken only when a TASK is in two stages and
    baton holds no receipt for it (a stock fcop client's move was interrupted).
    """
    found = []
    own = claim_receipt_path(ws, task_id)
    with os.scandir(ws.root / "fcop" / "operations") as entries:
        names = sorted(e.name for e in entries if e.name.startswith("transition-"))
    for name in names:
        path = ws.root / "fcop" / "operations" / name
        if path == own or not name.endswith(".json"):
            continue
        try:
            value = read_json(path)
            if value.get("contract") != RECEIPT_CONTRACT or value.get("task_id") != task_id:
                continue
            value = validate_receipt(ws.root, path, value)
        except V4ProtocolError:
            continue  # damaged receipts are fcop's to report (inspect_workspace), not ours
        if value["stage"] != "COMMITTED" and value["workspace_id"] == ws.manifest["workspace_id"]:
            found.append((path, dict(value)))
    return found


def _recover_receipt(ws: Workspace, path: Path, receipt: FcopDict) -> FcopDict:
    receipt = promote_published(ws, path, receipt)
    result: FcopDict = ws.recover_operation(
        operation_id=receipt["operation_id"],
        source_path=receipt["source_path"],
        target_path=receipt["target_path"],
        receipt_path=path.relative_to(ws.root).as_posix(),
    )
    return result


def recover_receipt(ws: Workspace, path: Path) -> FcopDict:
    """Any lifecycle receipt (baton's or another client's) through fcop's recovery.

    fcop's ``validate_receipt`` first; then, under the TASK's family lock, the
    PREPARED-with-both-copies window is settled (:func:`.moves.promote_published`)
    and the receipt goes to fcop's ``recover_operation``. Its result dict.
    """
    from fcop.v4.encoding import safe_path

    given = Path(path)
    relative = given.relative_to(ws.root) if given.is_absolute() else given
    path = Path(safe_path(ws.root, relative.as_posix()))
    try:
        receipt = dict(validate_receipt(ws.root, path, read_json(path)))
    except V4ProtocolError as exc:
        raise fail("RECOVERY_REQUIRED", "Unreadable or damaged lifecycle receipt") from exc
    if receipt["workspace_id"] != ws.manifest["workspace_id"]:
        raise fail("WORKSPACE_ID_MISMATCH", "Receipt of another workspace")
    root_id = ws.family_root(receipt["task_id"])
    with family_boundary(ws.root, ws.manifest["workspace_id"], root_id):
        return _recover_receipt(ws, path, receipt)


def complete_fact(
    ws: Workspace,
    task_id: str,
    *,
    derived_only: bool = True,
    claim_receipt: Path | None = None,
) -> str | None:
    """Publish the operation fact a create of ``task_id`` died before writing.

    ``COMMITTED`` when the fact exists, ``COMPLETED`` when it was published now,
    None when the TASK is not provably that create's result (see
    :func:`.create.missing_fact`). ``derived_only=False`` also accepts a TASK id
    fcop drew at random: the caller must have established that it is the only
    TASK carrying its ``operation_id`` (a scan); ``claim_receipt`` is the T2
    receipt such a scan found for a TASK that has left the inbox.
    """
    from baton.fcop_port.lifecycle.create import missing_fact, operation_key_of, publish_fact

    key = operation_key_of(ws, task_id)
    if key is None:
        return None
    operations = ws.root / "fcop" / "operations"
    with operation_lock(operations / f"create-{key}.lock"):
        if os.path.lexists(operations / f"create-{key}.json"):
            return "COMMITTED"
        found = missing_fact(ws, task_id, derived_only=derived_only, claim_receipt=claim_receipt)
        if found is None:
            return None
        publish_fact(ws, *found)
    return "COMPLETED"


def recover(ws: Workspace, task_id: str) -> FcopDict:
    """Settle what an interrupted create or claim of ``task_id`` left (see the module doc).

    Returns ``{"task_id", "claim", "foreign", "create", "removed"}``: fcop's
    ``recover_operation`` result for baton's claim receipt (or None), the same
    for other clients' unfinished receipts (scanned only when the TASK is in two
    stages without a baton receipt), the create's fact (``COMMITTED``,
    ``COMPLETED`` or None) and the temporaries removed. Nothing that fcop
    classifies DIVERGENT_DUPLICATE or INDETERMINATE is changed.
    """
    ws._check()
    task_id = _task_id(task_id)
    root_id = ws.family_root(task_id)
    out: FcopDict = {
        "task_id": task_id,
        "claim": None,
        "foreign": [],
        "create": None,
        "removed": [],
    }
    with family_boundary(ws.root, ws.manifest["workspace_id"], root_id):
        ws._check()
        path = claim_receipt_path(ws, task_id)
        receipt = read_claim_receipt(ws, path, task_id)
        if receipt is not None:
            out["claim"] = (
                {"classification": "COMMITTED", "task_id": task_id}
                if receipt["stage"] == "COMMITTED"
                else _recover_receipt(ws, path, receipt)
            )
        elif len(ws._paths(task_id)) > 1:
            out["foreign"] = [_recover_receipt(ws, p, r) for p, r in _foreign_receipts(ws, task_id)]
        out["create"] = complete_fact(ws, task_id)
        settled = len(ws._paths(task_id)) == 1 and all(
            r.get("classification") in {"COMMITTED", "NOT_COMMITTED", "RECOVERABLE_DUPLICATE"}
            for r in [out["claim"] or {"classification": "COMMITTED"}, *out["foreign"]]
        )
        if settled:
            out["removed"] += ws.sweep_temporaries("active", task_id)
            out["removed"] += _sweep_inbox(ws, task_id)
    return out


def _sweep_inbox(ws: Workspace, task_id: str) -> list[str]:
    """Inbox temporaries, under the create key lock of the TASK's operation."""
    from baton.fcop_port.lifecycle.create import operation_key_of

    key = operation_key_of(ws, task_id)
    if key is None:
        return []
    with operation_lock(ws.root / "fcop" / "operations" / f"create-{key}.lock"):
        return ws.sweep_temporaries("inbox", task_id)
