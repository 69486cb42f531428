"""T1: creating a TASK, idempotently by ``operation_id``, through the O(1) writer or Core.

A redelivered request (a retried tool call, a re-run script) derives the same
``operation_id`` (:func:`operation_id_for`) and finds the TASK it already
created, even after that TASK moved on. Two crash windows are repaired here by
rule: a TASK published without its create fact (R3,
:func:`~baton.fcop_port.recovery.complete_create_fact`), and Core's
replay reading a TASK just as it was claimed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baton.fcop_errors import CoordinationError, FcopProtocolError, InvalidEnvelope
from baton.fcop_port.lifecycle import create_request
from baton.fcop_port.reads import TaskReads
from baton.fcop_port.records import CreatedTask
from baton.fcop_port.recovery import complete_create_fact
from baton.intake.limits import DEFAULT_LIMITS
from baton.intake.sweep import culprits, oversize
from baton.intake.worker import shared_worker

__all__ = ["TaskCreation", "operation_id_for"]


def operation_id_for(*parts: str) -> str:
    """A deterministic Core ``operation_id`` (``[A-Za-z0-9][A-Za-z0-9._:-]{0,127}``).

    The same request parts always give the same id, so a redelivered request
    (a retried tool call, a re-run script) finds the TASK it already created.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"baton:{digest[:48]}"


class TaskCreation(TaskReads):
    """The port's T1 (see the module docstring)."""

    def create_task(
        self,
        *,
        sender: str,
        recipient: str,
        subject: str,
        body: str,
        parent: str | None = None,
        priority: str = "P2",
        references: Sequence[str] = (),
        operation_id: str | None = None,
    ) -> CreatedTask:
        """T1 as ``sender``. Without ``operation_id`` one is derived from the request."""
        opid = operation_id or operation_id_for(
            "create_task", sender, recipient, subject, body, parent or "", priority
        )
        kwargs = create_request(
            workspace_id=self.workspace_id,
            operation_id=opid,
            sender=sender,
            recipient=recipient,
            subject=subject,
            body=body,
            priority=priority,
            parent=parent,
            references=references,
        )
        for attempt in range(3):
            try:
                result = self._create_once(kwargs)
                break
            except InvalidEnvelope as exc:
                raise self._named_culprits(exc) from exc
            except FileNotFoundError:
                # Core's replay read the TASK just as it moved on (a claim): read again.
                if attempt == 2:
                    raise
                continue
            except FcopProtocolError as exc:
                if exc.code != "RECOVERY_REQUIRED":
                    raise
                if "without its durable operation fact" in str(exc) and attempt == 0:
                    # A crash between publishing the TASK and its create fact (rule R3);
                    # baton's writer completes its own, this is for a TASK fcop.Project made.
                    complete_create_fact(self, opid)
                    continue
                if "differs from durable fact" in str(exc):
                    # Core replays a create only while its TASK is untouched in the inbox; a
                    # redelivered request for a TASK that has moved on finds it by its fact.
                    moved = self._created_by(opid)
                    if moved is not None:
                        return moved
                raise
        return CreatedTask(
            task_id=result["task_id"],
            existing=bool(result.get("existing")),
            operation_id=opid,
            path=Path(result["path"]),
        )

    def _named_culprits(self, exc: InvalidEnvelope) -> InvalidEnvelope:
        """Core's create scan hit a bad file somewhere: name it (screened in the worker)."""
        found = culprits(self.root, worker=shared_worker())
        if not found:
            return exc
        where = "; ".join(f"{f.origin}: {f.verdict.reason}" for f in found[:5])
        return InvalidEnvelope(
            f"fcop/ holds files Core cannot read ({where}); `baton up` quarantines them",
            code="INVALID_ENVELOPE",
        )

    def _create_once(self, kwargs: Mapping[str, Any]) -> Any:
        """One T1: baton's O(1) writer, or ``fcop.Project.create_task`` when it is off.

        Only the fallback runs Core's O(history) create scan, which reads every TASK and
        operation fact whole; a guard against oversized files belongs on that path only.
        """
        if self._lifecycle is None:
            # Refuse, by lstat alone, to hand Core's scan a file over intake's caps
            # (the team loop quarantines it).
            blocked = oversize(self.root)
            if blocked:
                where = "; ".join(f"{f.origin}: {f.verdict.detail}" for f in blocked[:5])
                raise InvalidEnvelope(
                    f"fcop/ holds files Core cannot read safely ({where}); "
                    "`baton up` quarantines them",
                    code="INVALID_ENVELOPE",
                )
        return self._fast("create_task", lambda lc: lc.create_task(**kwargs), **kwargs)

    def _created_by(self, operation_id: str) -> CreatedTask | None:
        """The TASK a create operation made, by its durable fact, wherever it is now.

        Trusted only when the TASK itself names the operation and the fact's request
        digest (what Core would check if the TASK were still in the inbox).
        """
        from baton.intake.create_fact import create_fact_name

        path = self.fcop_dir / "operations" / create_fact_name(self.workspace_id, operation_id)
        try:
            if path.lstat().st_size > DEFAULT_LIMITS.max_json_bytes:
                return None  # not a fact Core wrote (intake's sweep refuses it)
            fact = json.loads(path.read_bytes())
            task = self.read_task(str(fact["task_id"]))
        except (OSError, ValueError, KeyError, TypeError, RecursionError, CoordinationError):
            return None
        tid = task.task_id
        fields = self._fast("read_task", lambda lc: lc.read_task(tid), task_id=tid)
        if fields.get("operation_id") != operation_id or fields.get(
            "normalized_request_digest"
        ) != fact.get("digest"):
            return None
        return CreatedTask(
            task_id=task.task_id, existing=True, operation_id=operation_id, path=task.path
        )
