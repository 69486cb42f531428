"""The receipt protocol every O(1) move (T2–T5) shares, fcop 4.0.5's, written once.

Each move names its receipt by a UUID-5 operation id derived from what makes
the move unique (:func:`operation_id`), so "is there a receipt of this move to
finish or refuse?" is one ``lstat`` (:func:`receipt_path`, :func:`own_receipt`).
Then, under fcop's family lock (:func:`under_family_lock`), fcop's checks of
the source (:func:`checked_source`), then :func:`commit_move`: the event appended
to the TASK's transitions, the new envelope bytes (:func:`rewritten`), the PREPARED
receipt and the commit (:func:`finish`: PREPARED → target published →
TARGET_DURABLE → source removed → COMMITTED), each with fcop's own primitives. :func:`promote_published` is the
one crash window fcop cannot settle by itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeVar
from uuid import UUID, uuid5

import yaml
from fcop.errors import V4ProtocolError
from fcop.v4 import encoding
from fcop.v4.encoding import _parse_envelope_bytes, canonical, digest, read_json, strict_text
from fcop.v4.lifecycle import Lifecycle as CoreLifecycle
from fcop.v4.linearization import family_boundary
from fcop.v4.receipts import RECEIPT_CONTRACT, RECEIPT_STAGES, publish_prepared, validate_receipt

from baton.fcop_port.lifecycle._core import Vanished, Workspace
from baton.fcop_port.lifecycle._fcop import fail, validate
from baton.fcop_port.lifecycle.envelopes import frontmatter_roundtrips
from baton.fcop_port.records import FcopDict, FcopMapping

__all__ = [
    "NAMESPACE",
    "CheckedSource",
    "archived_root",
    "checked_source",
    "commit_move",
    "finish",
    "operation_id",
    "own_receipt",
    "promote_published",
    "receipt_path",
    "replay",
    "rewritten",
    "under_family_lock",
]

_R = TypeVar("_R")

NAMESPACE = UUID("6f1d3c52-5b0e-4d4a-9a43-8f0c2b7e9d11")
"""The UUID-5 namespace of baton's move operation ids (fixed forever: names depend on it)."""


def operation_id(workspace_id: str, *parts: str) -> str:
    """The operation id of the move that ``parts`` identify (a UUID URN, fcop's naming)."""
    return uuid5(NAMESPACE, "\x1f".join((workspace_id, *parts))).urn


def receipt_path(ws: Workspace, operation: str) -> Path:
    """Where the receipt of ``operation`` is, or will be (fcop's ``receipt_path`` name).

    ``fcop/operations`` itself is checked by every ``_check``; a symlink at the
    receipt's own name is refused with fcop's error.
    """
    path = ws.root / "fcop" / "operations" / f"transition-{UUID(operation).hex}.json"
    if path.is_symlink():
        raise fail("INVALID_ENVELOPE", "Symlink/junction in workspace path", subject=path.name)
    return path


def own_receipt(
    ws: Workspace,
    path: Path,
    task_id: str,
    edge: tuple[str, str],
    round_field: str | None = None,
    round_id: str | None = None,
) -> FcopDict | None:
    """baton's receipt at ``path`` (validated by fcop), None when there is none.

    A receipt whose contents contradict its derived name (another TASK, edge or,
    with ``round_field``, round) is refused, as fcop refuses an unreadable receipt.
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
        or (round_field is not None and value.get(round_field) != round_id)
    ):
        raise fail("RECOVERY_REQUIRED", "Receipt identity conflicts with its name", subject=task_id)
    return dict(value)


def under_family_lock(ws: Workspace, task_id: str, actor: object, move: Callable[[str], _R]) -> _R:
    """fcop's ``transition`` prologue: identity checks (``actor`` as any caller sent it,
    checked as fcop checks it), then ``move(root_id)`` under the lock."""
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
        return move(root_id)


class CheckedSource(NamedTuple):
    """A move's source as fcop's checks found it, and where it goes."""

    source: Path
    target: Path
    source_bytes: bytes
    fields: FcopDict  # the TASK's validated front matter, as fcop parsed it


def checked_source(ws: Workspace, task_id: str, edge: tuple[str, str]) -> CheckedSource:
    """fcop's source checks: not in both stages, the declared source is the path NOW,
    strong relations."""
    source = ws.task_path(edge[0], task_id)
    target = ws.task_path(edge[1], task_id)
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
    return CheckedSource(source, target, source_bytes, fields)


def archived_root(ws: Workspace, task_id: str, root_id: str) -> None:
    """fcop: "an archived Root freezes its Branch family" (moves into ``active/``)."""
    if task_id != root_id:
        root_path, _ = ws._resolve(root_id)
        if root_path.parent.name == "archive":
            raise fail(
                "INVALID_TRANSITION", "An archived Root freezes its Branch family", subject=task_id
            )


def replay(ws: Workspace, path: Path, receipt: FcopDict, operation: str | None) -> FcopDict:
    """Finish the move ``receipt`` records, as fcop's replay of the exact request does.

    ``operation`` is set for T2/T3, which fcop lets a process replay only once
    ("not externally replayable"); T4/T5 pass None.
    """
    if operation is not None and operation in ws._returned_unprotected_operations:
        raise fail(
            "INVALID_TRANSITION",
            "T2/T3 are not externally replayable operations",
            subject=receipt["task_id"],
        )
    receipt = promote_published(ws, path, receipt)
    result: FcopDict = CoreLifecycle(ws)._recover(path, receipt, existing=True)
    if operation is not None:
        ws._returned_unprotected_operations.add(operation)
    return result


def commit_move(
    ws: Workspace,
    checked: CheckedSource,
    *,
    operation: str,
    request: FcopDict,
    request_digest: str,
    event: FcopDict,
    evidence: tuple[list[str], list[str]],
    attempt_id: str,
    authorized: FcopMapping | None = None,
) -> FcopDict:
    """Append ``event`` to the TASK's transitions and commit the move, fcop's way.

    The new envelope (:func:`rewritten`), the PREPARED receipt (with fcop's
    ``authorized`` fields for T4/T5), then :func:`finish`. A move without them (T2,
    T3) is one fcop lets a process return only once: its operation is remembered, so
    a later replay of it is refused as fcop refuses it (:func:`replay`).
    """
    source, target, source_bytes, fields = checked
    updated = dict(fields)
    updated["transitions"] = [*fields["transitions"], event]
    target_bytes, read_back = rewritten(source_bytes, updated, request["task_id"])
    receipt: FcopDict = {  # fcop's PREPARED receipt of the move
        "contract": RECEIPT_CONTRACT,
        "version": 1,
        "operation_id": operation,
        "workspace_id": ws.manifest["workspace_id"],
        "task_id": request["task_id"],
        "operation_kind": "lifecycle_transition",
        "from_stage": request["from_stage"],
        "to_stage": request["to_stage"],
        "tool": request["tool"],
        "actor": request["actor"],
        "report_ref": request.get("report_ref"),
        "source_path": source.relative_to(ws.root).as_posix(),
        "target_path": target.relative_to(ws.root).as_posix(),
        "source_digest": digest(source_bytes),
        "target_digest": digest(target_bytes),
        "normalized_transition_digest": request_digest,
        "evidence_ref": evidence[0],
        "evidence_digest": evidence[1],
        "attempt_id": attempt_id,
        "transition": event,
        "stage": "PREPARED",
    }
    if authorized is not None:
        receipt.update(authorized)
    published = Path(publish_prepared(ws.root, receipt))  # validated by fcop
    ws.boundary("transition", "PREPARED")
    result = finish(ws, published, receipt, source, target, source_bytes, target_bytes, read_back)
    if authorized is None:
        ws._returned_unprotected_operations.add(operation)
    return result


def promote_published(ws: Workspace, path: Path, receipt: FcopDict) -> FcopDict:
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


def finish(
    ws: Workspace,
    receipt_file: Path,
    receipt: FcopDict,
    source: Path,
    target: Path,
    source_bytes: bytes,
    target_bytes: bytes,
    read_back: FcopDict,
) -> FcopDict:
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


def _set_stage(path: Path, receipt: FcopDict, stage: str) -> FcopDict:
    """fcop's ``set_stage`` for a receipt this call validated and published.

    fcop re-runs ``validate_receipt`` on the whole dict; only ``stage`` changed
    since ``publish_prepared`` validated it, so only the stage is checked.
    """
    if stage not in RECEIPT_STAGES:
        raise fail("RECOVERY_REQUIRED", "Invalid receipt stage update")
    updated = {**receipt, "stage": stage}
    encoding.replace_durable(path, canonical(updated) + b"\n")
    return updated


def rewritten(source_bytes: bytes, fields: FcopDict, subject: str) -> tuple[bytes, FcopDict]:
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
