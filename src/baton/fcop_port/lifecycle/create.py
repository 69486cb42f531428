"""T1 (``create_task``) in O(1): fcop's planning, a commit that never scans history.

fcop 4.0.5 plans a create in constant time and then, under the operation's key
lock, reads every JSON fact in ``fcop/operations/`` and parses every TASK in
every stage, looking for a TASK that an interrupted create published without
its operation fact. That search is what makes T1 O(n).

baton keeps the plan (``_Creation._plan_create``: request rules, normalization,
relations, the request digest, the envelope bytes, the fact, each checked by
fcop's schemas) and the commit order (TASK first, then its fact, each with
fcop's fsynced no-overwrite ``publish``, under fcop's key lock), and makes the
search constant: the TASK id is *derived* from the operation key instead of
drawn at random, so "did an interrupted create of this operation publish its
TASK?" is five ``lstat`` calls. The id has fcop's shape (``TASK-`` + 32 hex).

Outcomes, as fcop's:

* the fact exists: the same request gets the TASK back (``existing``), a
  different one ``OPERATION_ID_CONFLICT``, damage ``RECOVERY_REQUIRED``;
* no fact, no TASK: publish both;
* no fact, the TASK at the derived id carrying this operation's id and
  request digest: the earlier create crashed between its two publications.
  fcop would refuse (``RECOVERY_REQUIRED``) forever; baton publishes the
  missing fact, exactly the one that create would have written (see
  :func:`missing_fact`), and answers as for a known operation. Any other TASK
  there is ``RECOVERY_REQUIRED``.

Not carried over: fcop's search for *copies* of a fact under non-canonical
names and for a leftover temporary of the fact (both scans of
``fcop/operations/``); neither can come from fcop's or baton's own writes.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path

from fcop.errors import V4ProtocolError
from fcop.v4 import encoding
from fcop.v4.encoding import canonical, digest, operation_lock, parse_json, read_json

from baton.fcop_port.lifecycle._core import Workspace
from baton.fcop_port.lifecycle._fcop import fail, validate
from baton.fcop_port.records import FcopDict
from baton.intake.create_fact import operation_key

__all__ = ["CreatingWorkspace", "derived_task_id"]


def derived_task_id(key: str) -> str:
    """The TASK id baton gives the create with operation key ``key``."""
    value = digest(canonical({"contract": "baton-derived-task-id-v1", "key": key}))
    return f"TASK-{value[:32]}"


def _no_symlink(path: Path) -> None:
    if path.is_symlink():
        raise fail(
            "INVALID_ENVELOPE",
            "Symlink/junction in workspace path",
            subject=path.as_posix(),
        )


def commit(ws: Workspace, plan: FcopDict) -> FcopDict:
    """The durable half of T1 under fcop's key lock (``_commit_create_operation``)."""
    planned = plan["fact"]
    key = planned["key"]
    task_id = planned["task_id"]
    if task_id != derived_task_id(key):
        raise fail("INVALID_ENVELOPE", "Create plan without a derived TASK identity")
    operations = ws.root / "fcop" / "operations"
    fact_path = operations / f"create-{key}.json"
    lock_path = operations / f"create-{key}.lock"
    _no_symlink(fact_path)
    _no_symlink(lock_path)
    with operation_lock(lock_path):
        ws._check(planned["workspace_id"])
        if os.path.lexists(fact_path):
            return _replay(ws, plan, fact_path)
        paths = ws._paths(task_id)
        if paths:
            return _complete(ws, plan, paths, fact_path)
        task_path = ws.root / planned["path"]
        encoding.publish(task_path, plan["data"])
        ws.remember(task_path, plan["data"])
        ws.boundary("create", "TASK_PUBLISHED")
        encoding.publish(fact_path, canonical(planned) + b"\n")
        ws.boundary("create", "COMMITTED")
        ws.sweep_temporaries("inbox", task_id)
        return _result(planned, task_path, plan, existing=False)


def _result(fact: FcopDict, path: Path, plan: FcopDict, *, existing: bool) -> FcopDict:
    return {
        "task_id": fact["task_id"],
        "path": str(path),
        "digest": plan["fact"]["digest"],
        "existing": existing,
        "warnings": plan["warnings"],
    }


def _replay(ws: Workspace, plan: FcopDict, fact_path: Path) -> FcopDict:
    """fcop's answer to a known operation: the TASK back, a conflict, or damage."""
    planned = plan["fact"]
    opid = planned["operation_id"]
    try:
        fact = read_json(fact_path)
    except V4ProtocolError as exc:
        raise fail("RECOVERY_REQUIRED", "Unreadable operation fact", operation=opid) from exc
    validate("create-operation", fact, code="RECOVERY_REQUIRED")
    if (
        fact.get("key") != planned["key"]
        or fact.get("operation_id") != opid
        or fact.get("workspace_id") != planned["workspace_id"]
        or fact.get("operation_kind") != "create_task"
    ):
        raise fail("RECOVERY_REQUIRED", "Operation identity damaged", operation=opid)
    if fact.get("digest") != planned["digest"]:
        raise fail(
            "OPERATION_ID_CONFLICT",
            "Operation key already has a different digest",
            operation=opid,
        )
    try:
        relative = fact["path"]
        if (
            not isinstance(relative, str)
            or "\\" in relative
            or any(part in {"", ".", ".."} for part in relative.split("/"))
            or relative != f"fcop/_lifecycle/inbox/{fact['task_id']}.md"
        ):
            raise fail("RECOVERY_REQUIRED", "Noncanonical operation path")
        initial_path = ws.root / relative
        path, data, fields = ws.resolve_bytes(fact["task_id"])
        valid = (
            path == initial_path
            and digest(data) == fact["content_digest"]
            and fields.get("operation_id") == opid
            and fields.get("normalized_request_digest") == planned["digest"]
            and fields.get("operation_kind") == "create_task"
        )
    except (KeyError, V4ProtocolError) as exc:
        raise fail("RECOVERY_REQUIRED", "Operation result is unprovable", operation=opid) from exc
    if not valid:
        raise fail(
            "RECOVERY_REQUIRED", "Operation result differs from durable fact", operation=opid
        )
    ws.sweep_temporaries("inbox", fact["task_id"])
    return _result(fact, path, plan, existing=True)


def operation_key_of(ws: Workspace, task_id: str) -> str | None:
    """The create key of the operation that made ``task_id`` (None if it names none)."""
    try:
        _, _, fields = ws.resolve_bytes(task_id)
    except V4ProtocolError:
        return None
    opid = fields.get("operation_id")
    if not isinstance(opid, str) or fields.get("operation_kind") != "create_task":
        return None
    return operation_key(ws.manifest["workspace_id"], opid)


def missing_fact(
    ws: Workspace,
    task_id: str,
    *,
    derived_only: bool = True,
    claim_receipt: Path | None = None,
) -> tuple[Path, FcopDict] | None:
    """The fact an interrupted create of ``task_id`` did not publish, or None.

    A pure function of the TASK: valid with its relations, carrying its
    ``operation_id`` and request digest, at the id derived from its own
    operation key (``derived_only=False`` drops that condition, for a caller
    whose scan showed it is the only TASK with that ``operation_id``). The
    fact's ``content_digest`` binds the TASK's bytes *as created*: its bytes
    now while it is still in the inbox, otherwise the ``source_digest`` of its
    one T2 receipt (baton's derived one, or ``claim_receipt`` found by a scan),
    whose claim event must be the TASK's second transition. The caller holds
    the operation's key lock.
    """
    inbox = ws.task_path("inbox", task_id)
    if len(ws._paths(task_id)) != 1:
        return None
    path, data, fields = ws.resolve_bytes(task_id)
    opid, request_digest = fields.get("operation_id"), fields.get("normalized_request_digest")
    if (
        not isinstance(opid, str)
        or not isinstance(request_digest, str)
        or fields.get("operation_kind") != "create_task"
    ):
        return None
    key = operation_key(ws.manifest["workspace_id"], opid)
    if derived_only and derived_task_id(key) != task_id:
        return None  # not a baton create: fcop's rule (RECOVERY_REQUIRED) stands
    content = digest(data) if path == inbox else _created_digest(ws, task_id, fields, claim_receipt)
    if content is None:
        return None
    fact = {
        "contract": "fcop-create-task-v1",
        "key": key,
        "workspace_id": ws.manifest["workspace_id"],
        "operation_kind": "create_task",
        "operation_id": opid,
        "task_id": task_id,
        "path": inbox.relative_to(ws.root).as_posix(),
        "digest": request_digest,
        "content_digest": content,
    }
    validate("create-operation", parse_json(canonical(fact)))
    return ws.root / "fcop" / "operations" / f"create-{key}.json", fact


def _created_digest(
    ws: Workspace, task_id: str, fields: FcopDict, receipt_path: Path | None
) -> str | None:
    """The digest of a moved TASK's bytes as created: its T2 receipt's ``source_digest``."""
    from fcop.v4.receipts import validate_receipt

    from baton.fcop_port.lifecycle.claim import claim_receipt_path

    path = receipt_path or claim_receipt_path(ws, task_id)
    transitions = fields.get("transitions")
    try:
        receipt = validate_receipt(ws.root, path, read_json(path))
    except (V4ProtocolError, OSError):
        return None
    if (
        receipt["task_id"] != task_id
        or receipt["workspace_id"] != ws.manifest["workspace_id"]
        or receipt["source_path"] != f"fcop/_lifecycle/inbox/{task_id}.md"
        or not isinstance(transitions, list)
        or len(transitions) < 2
        or transitions[1] != receipt["transition"]
    ):
        return None
    return str(receipt["source_digest"])


def publish_fact(ws: Workspace, path: Path, fact: FcopDict) -> None:
    """Publish a completed fact (fcop's ``publish``) and sweep the TASK's temporaries."""
    encoding.publish(path, canonical(fact) + b"\n")
    ws.sweep_temporaries("inbox", fact["task_id"])


def _complete(ws: Workspace, plan: FcopDict, paths: list[Path], fact_path: Path) -> FcopDict:
    """A TASK at the derived id without its fact: finish that create, or refuse."""
    planned = plan["fact"]
    opid = planned["operation_id"]
    try:
        found = missing_fact(ws, planned["task_id"])
    except V4ProtocolError:
        found = None
    if (
        found is None
        or found[0] != fact_path
        or found[1]["operation_id"] != opid
        or found[1]["digest"] != planned["digest"]
    ):
        raise fail(
            "RECOVERY_REQUIRED",
            "TASK exists without its durable operation fact",
            operation=opid,
        )
    publish_fact(ws, fact_path, found[1])
    return _replay(ws, plan, fact_path)  # the TASK back, or fcop's answer if it moved on


_DERIVED_TASK_ID: ContextVar[str | None] = ContextVar("baton_derived_task_id", default=None)


class CreatingWorkspace(Workspace):
    """The workspace baton writes through: fcop's ``create_task`` with a TASK id derived
    from the operation (no history scan) and baton's :func:`commit`. A subclass here, not
    methods of :class:`~._core.Workspace`, so the core never imports its writers."""

    def create_task(self, **kwargs: object) -> FcopDict:
        """fcop's ``create_task`` (plan, branch lock, commit) with a derived TASK id."""
        workspace_id, operation_id = kwargs.get("workspace_id"), kwargs.get("operation_id")
        if not isinstance(workspace_id, str) or not isinstance(operation_id, str):
            return dict(super().create_task(**kwargs))  # fcop refuses the request
        token = _DERIVED_TASK_ID.set(derived_task_id(operation_key(workspace_id, operation_id)))
        try:
            return dict(super().create_task(**kwargs))
        finally:
            _DERIVED_TASK_ID.reset(token)

    def _common(self, kind: str, sender: str, recipient: str) -> FcopDict:
        fields: FcopDict = super()._common(kind, sender, recipient)
        derived = _DERIVED_TASK_ID.get()
        if kind == "TASK" and derived is not None:
            fields["task_id"] = derived  # same key order, fcop's value shape
        return fields

    def _commit_create_operation(self, plan: FcopDict) -> FcopDict:
        return commit(self, plan)
