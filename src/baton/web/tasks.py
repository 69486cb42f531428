"""One task as the board shows it: its TASK, REPORTs, ISSUEs and REVIEWs, and its changes.

Documents are found the way :class:`~baton.fcop_port.port.FcopPort`
finds reports (a bounded front-matter scan for ``subject_ref: <task>``) and
each is validated by FCoP Core (``inspect_envelope``) before it is shown; one
that does not validate is listed as refused, with Core's reason, never shown as
if it were fine. Bodies are rendered by :func:`baton.web.markdown.render_markdown`.

The changes of a task are what its role's sessions reported as files changed,
shown as ``git diff`` against ``HEAD`` (new files in full). A diff over
:data:`MAX_DIFF_BYTES` is not cut: the page says how large it is and to look
with git.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from baton.app.facade.fcop import FcopPort
from baton.jsontypes import JsonObject

__all__ = ["MAX_DIFF_BYTES", "DocumentView", "task_changes", "task_documents"]

MAX_DIFF_BYTES: Final = 2 * 1024 * 1024
_HEAD_BYTES: Final = 64 * 1024
_MAX_DOC_BYTES: Final = 4 * 1024 * 1024
_FOLDERS: Final = (("reports", "REPORT"), ("issues", "ISSUE"), ("reviews", "REVIEW"))


@dataclass(frozen=True, slots=True)
class DocumentView:
    kind: str
    """``TASK``, ``REPORT``, ``ISSUE`` or ``REVIEW``."""
    doc_id: str
    sender: str
    recipient: str
    created_at: str
    body: str
    fields: dict[str, str]
    """A few front-matter fields worth showing (result, severity, decision ...)."""
    refused: str | None = None


def _body(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    parts = text.split("---\n", 2)
    body = parts[2] if len(parts) == 3 else ""
    return body[1:] if body.startswith("\n") else body


def _mentions(path: Path, needle: bytes) -> bool:
    try:
        with path.open("rb") as handle:
            return needle in handle.read(_HEAD_BYTES)
    except OSError:
        return False


def task_documents(port: FcopPort, task_id: str) -> list[DocumentView]:
    """The TASK and every document about it, oldest first (blocking: call off-loop)."""
    task = port.read_task(task_id)
    docs = [
        DocumentView(
            kind="TASK",
            doc_id=task.task_id,
            sender=task.sender,
            recipient=task.recipient,
            created_at=task.created_at,
            body=task.body,
            fields={"stage": task.stage, "priority": task.priority, "subject": task.subject},
        )
    ]
    needle = f"\nsubject_ref: {task_id}\n".encode()
    for folder, kind in _FOLDERS:
        directory = port.fcop_dir / folder
        try:
            names = sorted(
                e.name
                for e in os.scandir(directory)
                if e.name.startswith(f"{kind}-") and e.name.endswith(".md") and e.is_file()
            )
        except FileNotFoundError:
            continue
        for name in names:
            path = directory / name
            if not _mentions(path, needle):
                continue
            doc_id = name.removesuffix(".md")
            try:
                if path.stat().st_size > _MAX_DOC_BYTES:
                    raise ValueError(f"over {_MAX_DOC_BYTES} bytes")
                fields: JsonObject = port.inspect_envelope(path)
                body = _body(path.read_bytes())
            except Exception as exc:  # Core refused it: list it as refused, show nothing
                docs.append(DocumentView(kind, doc_id, "", "", "", "", {}, refused=str(exc)))
                continue
            if fields.get("subject_ref") != task_id:
                continue
            shown = {
                k: str(fields[k])
                for k in (
                    "result",
                    "report_kind",
                    "severity",
                    "review_kind",
                    "decision",
                    "attempt_id",
                )
                if fields.get(k) is not None
            }
            docs.append(
                DocumentView(
                    kind=kind,
                    doc_id=doc_id,
                    sender=str(fields.get("sender", "")),
                    recipient=str(fields.get("recipient", "")),
                    created_at=str(fields.get("created_at", "")),
                    body=body,
                    fields=shown,
                )
            )
    docs[1:] = sorted(docs[1:], key=lambda d: (d.created_at, d.doc_id))
    return docs


def task_changes(project_dir: Path, paths: list[str]) -> JsonObject:
    """``git diff HEAD`` of the files a task changed (new files in full), bounded."""
    if not paths:
        return {"files": [], "diff": "", "note": "the task's sessions reported no changed files"}
    safe = []
    root = project_dir.resolve()
    for p in paths:
        candidate = (root / p).resolve()
        if candidate == root or root not in candidate.parents:
            continue  # never diff outside the workspace
        safe.append(str(candidate.relative_to(root)))
    if not safe:
        return {"files": [], "diff": "", "note": "no changed file is inside the workspace"}
    try:
        tracked = subprocess.run(
            ["git", "diff", "--no-color", "--no-ext-diff", "HEAD", "--", *safe],
            cwd=root,
            capture_output=True,
            timeout=20,
            check=False,
        )
        untracked = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard", "--", *safe],
            cwd=root,
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"files": safe, "diff": "", "note": f"git is not available here: {exc}"}
    if tracked.returncode != 0:
        note = tracked.stderr.decode("utf-8", "replace").strip()[:500]
        return {"files": safe, "diff": "", "note": f"git diff failed: {note}"}
    out = tracked.stdout
    for name in untracked.stdout.decode("utf-8", "replace").splitlines():
        new = subprocess.run(
            ["git", "diff", "--no-color", "--no-index", "--", "/dev/null", name],
            cwd=root,
            capture_output=True,
            timeout=20,
            check=False,
        )
        out += new.stdout
        if len(out) > MAX_DIFF_BYTES:
            break
    if len(out) > MAX_DIFF_BYTES:
        return {
            "files": safe,
            "diff": "",
            "note": f"the diff is over {MAX_DIFF_BYTES} bytes; look with `git diff` in the project",
        }
    return {"files": safe, "diff": out.decode("utf-8", "replace"), "note": ""}
