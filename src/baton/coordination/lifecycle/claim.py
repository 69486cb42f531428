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

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4, uuid5

import yaml
from fcop.errors import V4ProtocolError
from fcop.v4 import encoding
from fcop.v4.encoding import (
    _parse_envelope_bytes,
    canonical,
    digest,
    read_json,
    strict_text,
)
from fcop.v4.lifecycle import Lifecycle as CoreLifecycle
from fcop.v4.linearization import family_boundary
from fcop.v4.receipts import (
    RECEIPT_CONTRACT,
    RECEIPT_STAGES,
    publish_prepared,
    validate_receipt,
)

from baton.coordination.lifecycle._core import Vanished, Workspace
from baton.coordination.lifecycle._fcop import fail, validate
from baton.coordination.lifecycle.envelopes import frontmatter_roundtrips

__all__ = [
    "CLAIM_NAMESPACE",
    "claim",
    "claim_operation_id",
    "claim_receipt_path",
    "finish",
    "promote_published",
    "rewritten",
]

CLAIM_NAMESPACE = UUID("6f1d3c52-5b0e-4d4a-9a43-8f0c2b7e9d11")
"""The UUID-5 namespace of baton's claim operation ids (fixed forever: names depend on it)."""


def claim_operation_id(workspace_id: str, task_id: str) -> str:
    """The operation id of baton's T2 of ``task_id`` (a UUID URN, fcop's receipt naming)."""
    return uuid5(CLAIM_NAMESPACE, f"{workspace_id}\x1f{task_id}\x1fclaim_task").urn


def claim_receipt_path(ws: Workspace, task_id: str) -> Path:
    """Where baton's T2 receipt of ``task_id`` is, or will be (fcop's ``receipt_path`` name).

    ``fcop/operations`` itself is checked by every ``_check``; a symlink at the
    receipt's own name is refused with fcop's error.
    """
    operation = UUID(claim_operation_id(ws.manifest["workspace_id"], task_id))
    path = ws.root / "fcop" / "operations" / f"transition-{operation.hex}.json"
    if path.is_symlink():
        raise fail("INVALID_ENVELOPE", "Symlink/junction in workspace path", subject=path.name)
    return path


def claim(ws: Workspace, task_id: str, *, actor: str) -> dict[str, Any]:
    """T2 as ``actor``; fcop's ``transition`` result (``existing`` on a replay)."""
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
        return _under_lock(ws, task_id, actor, root_id)


def _own_receipt(ws: Workspace, path: Path, task_id: str) -> dict[str, Any] | None:
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
        or (value["from_stage"], value["to_stage"]) != ("inbox", "active")
    ):
        raise fail("RECOVERY_REQUIRED", "Receipt identity conflicts with its name", subject=task_id)
    return dict(value)


def promote_published(ws: Workspace, path: Path, receipt: dict[str, Any]) -> dict[str, Any]:
    """The one crash window fcop calls INDETERMINATE that its own evidence settles.

    A move that died after linking its target and before recording
    TARGET_DURABLE leaves a PREPARED receipt with *both* copies present. fcop's
    ``classify`` refuses it (the stage does not prove the link durable) and
    every reader then sees STATE_AMBIGUOUS forever. But both copies match the
    receipt's digests, and the target's digest covers the new transition event
    (a fresh attempt UUID and time), so the target is this operation's
    complete output (``publish`` fsyncs before linking). baton makes the link
    durable (directory fsync) and records TARGET_DURABLE with fcop's
    ``set_stage``; fcop's own RECOVERABLE_DUPLICATE recovery then finishes it.
    Anything else is returned unchanged.
    """
    from fcop.v4.encoding import sync_directory
    from fcop.v4.receipts import set_stage

    if receipt["stage"] != "PREPARED":
        return receipt
    source = ws.root / receipt["source_path"]
    target = ws.root / receipt["target_path"]
    try:
        both = (
            digest(source.read_bytes()) == receipt["source_digest"]
            and digest(target.read_bytes()) == receipt["target_digest"]
        )
    except OSError:
        return receipt
    if not both:
        return receipt
    sync_directory(target.parent)
    return dict(set_stage(ws.root, path, receipt, "TARGET_DURABLE"))


def _under_lock(ws: Workspace, task_id: str, actor: str, root_id: str) -> dict[str, Any]:
    lifecycle = CoreLifecycle(ws)
    request = {
        "task_id": task_id,
        "from_stage": "inbox",
        "to_stage": "active",
        "tool": "claim_task",
        "actor": actor,
    }
    request_digest = lifecycle._request_digest(request)
    operation_id = claim_operation_id(ws.manifest["workspace_id"], task_id)
    path = claim_receipt_path(ws, task_id)
    existing = _own_receipt(ws, path, task_id)
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
        ws.sweep_temporaries("active", task_id)
        return result

    lifecycle_dir = ws.root / "fcop" / "_lifecycle"
    source = lifecycle_dir / "inbox" / f"{task_id}.md"
    target = lifecycle_dir / "active" / f"{task_id}.md"
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
    if task_id != root_id:
        root_path, _ = ws._resolve(root_id)
        if root_path.parent.name == "archive":
            raise fail(
                "INVALID_TRANSITION", "An archived Root freezes its Branch family", subject=task_id
            )
    attempt_id = uuid4().urn
    event: dict[str, Any] = {
        "at": datetime.now(UTC).isoformat(),
        "attempt_id": attempt_id,
        "by": actor,
        "from": "inbox",
        "to": "active",
        "tool": "claim_task",
    }
    if existing is not None:
        raise fail("RECOVERY_REQUIRED", "A conflicting receipt already claims T2", subject=task_id)
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
        "from_stage": "inbox",
        "to_stage": "active",
        "tool": "claim_task",
        "actor": actor,
        "report_ref": None,
        "source_path": source.relative_to(ws.root).as_posix(),
        "target_path": target.relative_to(ws.root).as_posix(),
        "source_digest": digest(source_bytes),
        "target_digest": digest(target_bytes),
        "normalized_transition_digest": request_digest,
        "evidence_ref": [],
        "evidence_digest": [],
        "attempt_id": attempt_id,
        "transition": event,
        "stage": "PREPARED",
    }
    published = Path(publish_prepared(ws.root, receipt))
    ws.boundary("transition", "PREPARED")
    result = finish(ws, published, receipt, source, target, source_bytes, target_bytes, read_back)
    ws._returned_unprotected_operations.add(operation_id)
    ws.sweep_temporaries("active", task_id)
    return result


def finish(
    ws: Workspace,
    receipt_file: Path,
    receipt: dict[str, Any],
    source: Path,
    target: Path,
    source_bytes: bytes,
    target_bytes: bytes,
    read_back: dict[str, Any],
) -> dict[str, Any]:
    """fcop's ``Lifecycle._finish``: the source and the evidence re-checked, then the three
    durable steps (T2 and T3 share it)."""
    try:
        data, _ = ws.read_validated(source)
    except Vanished:
        data = b""  # removed under the family lock: by a writer that does not take it
    if data != source_bytes:
        raise fail("RECOVERY_REQUIRED", "Source differs from receipt", subject=receipt["task_id"])
    CoreLifecycle(ws)._verify_evidence(receipt, {})  # T3: the head's bytes still match
    encoding.publish(target, target_bytes)
    ws.memo.seed(target_bytes, read_back, target.stem)
    receipt = _set_stage(receipt_file, receipt, "TARGET_DURABLE")
    ws.boundary("transition", "TARGET_DURABLE")
    encoding.remove_authoritative(source)
    receipt = _set_stage(receipt_file, receipt, "COMMITTED")
    ws.boundary("transition", "COMMITTED")
    result = {
        "task_id": receipt["task_id"],
        "from_stage": receipt["from_stage"],
        "to_stage": receipt["to_stage"],
        "path": str(target),
        "status": "COMMITTED",
        "attempt_id": receipt["attempt_id"],
        "receipt_ref": receipt_file.relative_to(ws.root).as_posix(),
        "existing": False,
    }
    ws.boundary("transition", "RESPONSE_LOST")
    return result


def _set_stage(path: Path, receipt: dict[str, Any], stage: str) -> dict[str, Any]:
    """fcop's ``set_stage`` for a receipt this call validated and published.

    fcop re-runs ``validate_receipt`` on the whole dict; only ``stage`` changed
    since ``publish_prepared`` validated it, so only the stage is checked.
    """
    if stage not in RECEIPT_STAGES:
        raise fail("RECOVERY_REQUIRED", "Invalid receipt stage update")
    updated = {**receipt, "stage": stage}
    encoding.replace_durable(path, canonical(updated) + b"\n")
    return updated


def rewritten(source_bytes: bytes, fields: dict[str, Any], subject: str) -> tuple[bytes, Any]:
    """fcop's ``rewritten_envelope_bytes``, plus the fields fcop's parser reads back from it.

    New frontmatter from fcop's own ``yaml.safe_dump`` (PyYAML's emitter;
    libyaml's folds long strings differently, so it is not used), the Markdown
    bytes kept. fcop's output check is its parser and the schema; here the
    parse is libyaml's when it reproduces ``fields`` (on emitter output the two
    parsers agree, a property test holds them to it) and fcop's otherwise
    (PyYAML's emitter does not round-trip every string, e.g. a lone U+0085).
    """
    text = strict_text(source_bytes)
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        raise fail("INVALID_ENVELOPE", "Invalid envelope", subject=subject)
    suffix = text.split("---\n", 2)[2]
    header = str(yaml.safe_dump(fields, allow_unicode=True, sort_keys=False))
    data = ("---\n" + header + "---\n" + suffix).encode("utf-8")
    read_back = fields if frontmatter_roundtrips(data, fields) else _parse_envelope_bytes(data)
    validate(fields["type"].lower(), read_back)
    return data, read_back
