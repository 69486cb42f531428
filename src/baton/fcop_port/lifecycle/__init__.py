"""O(1) creates and claims on an FCoP 4.0 workspace, byte-compatible with fcop 4.0.5.

The seam the port (and whoever rewrites it) calls; see ``docs/lifecycle.md``.
:class:`Lifecycle` answers with fcop's own result dicts and raises fcop's own
``V4ProtocolError`` codes, so a caller that mapped ``fcop.Project`` results
keeps its mapping. Cost is constant in the number of settled tasks:

* :meth:`Lifecycle.create` — T1, fcop's plan with a derived TASK id, O(1) commit;
* :meth:`Lifecycle.claim` — T2 with a deterministically named receipt;
* :meth:`Lifecycle.submit` — T3 likewise, its REPORT head found through an index;
* :meth:`Lifecycle.approve_or_reject` — T4/T5 likewise, fcop's authorization gate on the same look-ups;
* :meth:`Lifecycle.write_report` — fcop's ``write_report`` over the same index;
* :meth:`Lifecycle.candidates` — which REPORT/REVIEW files may be about a TASK;
* :meth:`Lifecycle.read_task` — fcop's ``read_task`` on the fast primitives;
* :meth:`Lifecycle.inspect` — where one TASK is and how its claim stands;
* :meth:`Lifecycle.recover` — settle a crashed create or claim (fcop's ``recover_operation``);
  :meth:`Lifecycle.recover_receipt` and :meth:`Lifecycle.complete_fact` are its two
  rules for callers that found a receipt or a TASK by their own scan.

fcop stays the authority: every workspace this writes passes
``fcop.workspace.validate_workspace`` and the stock tools (``fcop validate``,
``inspect_workspace``, stock ``fcop-mcp``) keep working on it (tested).
Use :func:`available` first: with an fcop other than the pinned 4.0.5 the
writer is off and callers use ``fcop.Project``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, Unpack

from baton.fcop_port.lifecycle._fcop import PINNED, publish_temporary, supported
from baton.fcop_port.lifecycle.location import TaskLocation
from baton.fcop_port.records import FcopDict

if TYPE_CHECKING:
    from baton.fcop_port.lifecycle._core import Workspace

__all__ = [
    "PINNED",
    "Lifecycle",
    "NewTask",
    "TaskLocation",
    "available",
    "create_request",
    "open_writer",
    "publish_temporary",
]


def available() -> bool:
    """Whether this writer may be used with the installed ``fcop`` (exactly 4.0.5)."""
    return supported()


def open_writer(
    root: Path, *, trusted_profiles: Mapping[str, Callable[..., str]] | None = None
) -> Lifecycle | None:
    """The writer for ``root``, or None when the installed ``fcop`` is not the pinned one."""
    return Lifecycle(root, trusted_profiles=trusted_profiles) if available() else None


class NewTask(TypedDict):
    """What a T1 asks for: fcop's ``create_task`` keywords besides the workspace and the
    operation (``priority`` ``P2`` and no relations unless given)."""

    sender: str
    recipient: str
    subject: str
    body: str
    priority: NotRequired[str]
    parent: NotRequired[str | None]
    branch_of: NotRequired[str | None]
    references: NotRequired[Sequence[str]]


def create_request(*, workspace_id: str, operation_id: str, **task: Unpack[NewTask]) -> FcopDict:
    """The keyword arguments of fcop's ``create_task`` (optional relations only when set)."""
    request: FcopDict = {
        "workspace_id": workspace_id,
        "operation_id": operation_id,
        "sender": task["sender"],
        "recipient": task["recipient"],
        "subject": task["subject"],
        "body": task["body"],
        "priority": task.get("priority", "P2"),
    }
    for relation in ("parent", "branch_of"):
        if task.get(relation) is not None:
            request[relation] = task.get(relation)
    if task.get("references"):
        request["references"] = list(task.get("references", ()))
    return request


def _invoke(ws: Any, name: str, call: Callable[[], Any], **refs: Any) -> Any:
    """Run ``call`` with fcop's error annotation (``fcop.Project._invoke``'s defaults)."""
    from fcop.errors import V4ProtocolError

    try:
        return call()
    except V4ProtocolError as exc:
        if exc.operation_ref is None:
            exc.operation_ref = refs.get("operation_id") or name
        if exc.subject_ref is None:
            exc.subject_ref = refs.get("task_id") or ws.manifest.get("workspace_id")
        raise


class Lifecycle:
    """T1–T5 and REPORTs for one workspace, constant in history. Thread-safe like ``fcop.Project``."""

    def __init__(
        self,
        root: Path,
        *,
        trusted_profiles: Mapping[str, Callable[..., str]] | None = None,
    ) -> None:
        from baton.fcop_port.lifecycle._fcop import prime
        from baton.fcop_port.lifecycle.create import CreatingWorkspace

        prime()
        self._ws: Workspace = CreatingWorkspace.open(root, trusted_profiles=trusted_profiles)

    @property
    def root(self) -> Path:
        return Path(self._ws.root)

    @property
    def workspace_id(self) -> str:
        return str(self._ws.manifest["workspace_id"])

    @property
    def workspace(self) -> Workspace:
        """The bound Core (``_Creation`` subclass); tests use it for fault injection."""
        return self._ws

    def create(self, *, operation_id: str, **task: Unpack[NewTask]) -> FcopDict:
        """T1: fcop's ``create_task`` result (``task_id``, ``path``, ``existing``, …)."""
        return self.create_task(
            **create_request(workspace_id=self.workspace_id, operation_id=operation_id, **task)
        )

    def create_task(self, **request: object) -> FcopDict:
        """T1 with ``fcop.Project.create_task``'s keyword arguments (see :func:`create_request`)."""
        result: FcopDict = _invoke(
            self._ws, "create_task", lambda: self._ws.create_task(**request), **request
        )
        return result

    def claim(self, task_id: str, *, actor: str) -> FcopDict:
        """T2 (inbox → active): fcop's ``transition`` result with the new ``attempt_id``."""
        from baton.fcop_port.lifecycle.claim import claim

        result: FcopDict = _invoke(
            self._ws, "transition", lambda: claim(self._ws, task_id, actor=actor), task_id=task_id
        )
        return result

    def submit(self, task_id: str, *, actor: str, report_ref: str | None = None) -> FcopDict:
        """T3 (active → review): fcop's ``transition`` result, the head REPORT as evidence."""
        from baton.fcop_port.lifecycle.submit import submit

        result: FcopDict = _invoke(
            self._ws,
            "transition",
            lambda: submit(self._ws, task_id, actor=actor, report_ref=report_ref),
            task_id=task_id,
        )
        return result

    def approve_or_reject(
        self, task_id: str, *, tool: str, actor: str, **refs: str | None
    ) -> FcopDict:
        """T4 (``approve_task``) or T5 (``reject_task``) with fcop's ``transition`` references."""
        from baton.fcop_port.lifecycle.approve_reject import approve_or_reject

        result: FcopDict = _invoke(
            self._ws,
            "transition",
            lambda: approve_or_reject(self._ws, task_id, tool=tool, actor=actor, **refs),
            task_id=task_id,
        )
        return result

    def write_report(self, **request: object) -> FcopDict:
        """fcop's ``write_report`` with its keyword arguments (``report_id``, ``path``, …)."""
        from baton.fcop_port.lifecycle.reports import write_report

        result: FcopDict = _invoke(
            self._ws, "write_report", lambda: write_report(self._ws, **request), **request
        )
        return result

    def candidates(self, kind: str, subject: str, attempt_id: str | None = None) -> list[Path]:
        """``REPORT``/``REVIEW`` files that may be about ``subject`` (validate each one).

        See :mod:`.subjects`: a superset of the files whose validated ``subject_ref``
        (and ``attempt_id``, when given) match, in name order.
        """
        return self._ws.subjects(kind).lookup(subject, attempt_id)

    def children(self, parent: str, stage: str) -> list[Path]:
        """TASK files in ``stage`` that may name ``parent`` (validate each one)."""
        return self._ws.subjects(f"TASK:{stage}").lookup(parent, None)

    def warm(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Read every REPORT/REVIEW/TASK folder into its index once (a team loop's first look).

        O(history) once, so no look-up in a dispatch pays it; ``stop`` is asked between
        folders (one folder's listing is not interrupted).
        """
        for index in self._ws._subjects.values():
            if stop():
                return
            index.refresh()

    def forget(self, origin: str) -> None:
        """An indexed file changed in place or vanished (the intake sweeper says so)."""
        folder, _, name = origin.rpartition("/")
        if folder == "fcop/reports":
            self._ws.subjects("REPORT").forget(name)
        elif folder == "fcop/reviews":
            self._ws.subjects("REVIEW").forget(name)
        elif folder.startswith("fcop/_lifecycle/"):
            stage = folder.removeprefix("fcop/_lifecycle/")
            if f"TASK:{stage}" in self._ws._subjects:
                self._ws.subjects(f"TASK:{stage}").forget(name)

    def read_task(self, task_id: str) -> FcopDict:
        """fcop's ``read_task`` (fields plus ``path``), validated by fcop."""
        result: FcopDict = _invoke(
            self._ws, "read_task", lambda: self._ws.read_task(task_id=task_id), task_id=task_id
        )
        return dict(result)

    def inspect(self, task_id: str) -> TaskLocation:
        """Where ``task_id`` is and how baton's claim of it stands (reads only)."""
        from baton.fcop_port.lifecycle.inspect import inspect

        return inspect(self._ws, task_id)

    def recover_receipt(self, receipt_path: Path | str) -> FcopDict:
        """Any lifecycle receipt through fcop's recovery (see :func:`.inspect.recover_receipt`)."""
        from baton.fcop_port.lifecycle.inspect import recover_receipt

        result: FcopDict = recover_receipt(self._ws, Path(receipt_path))
        return result

    def complete_fact(
        self,
        task_id: str,
        *,
        derived_only: bool = True,
        claim_receipt: Path | str | None = None,
    ) -> str | None:
        """The fact a crashed create did not write (see :func:`.inspect.complete_fact`)."""
        from baton.fcop_port.lifecycle.inspect import complete_fact

        receipt = None if claim_receipt is None else self.root / Path(claim_receipt)
        return complete_fact(self._ws, task_id, derived_only=derived_only, claim_receipt=receipt)

    def recover(self, task_id: str) -> FcopDict:
        """Settle what a crash left for ``task_id`` (see :func:`.inspect.recover`)."""
        from baton.fcop_port.lifecycle.inspect import recover

        return recover(self._ws, task_id)
