"""A thin typed port over ``fcop.Project``, the single writer and lifecycle authority.

baton never writes or edits a TASK, REPORT, ISSUE or REVIEW file itself: every
write and every lifecycle move (T1–T5) goes through ``fcop.Project`` (FCoP's
ADR-0002: "REPORT done is evidence; TASK done is lifecycle state; only the
lifecycle authority may move lifecycle state"). This module exists because the
library's surface is untyped (18 operations attached by ``setattr``, plain
``dict`` results) and churns between releases: here it becomes frozen
dataclasses and baton's error tree (:mod:`baton.coordination.errors`), in one
file that a new ``fcop`` release has to get past.

What the port adds on top of Core, and why:

* **Reads that tolerate the two-stage window.** A move publishes the target,
  then unlinks the source, so a reader can briefly see the TASK twice
  (``STATE_AMBIGUOUS``) or, for moves towards an earlier-listed stage, not at
  all. :meth:`FcopPort.read_task` retries both with a short bounded backoff.
* **Cheap enumeration.** ``fcop.workspace.list_envelopes`` validates every
  envelope of a kind in every stage (1.7 s at 300 tasks; ``inspect_workspace``
  174 s). The doorbell needs only ``fcop/_lifecycle/inbox/TASK-*.md``:
  :meth:`FcopPort.scan_inbox` is one ``os.scandir`` of that directory with
  ``lstat`` facts (symlink, size, regular file), and each name is then read
  through Core (:meth:`read_task`), which validates schema, identity, path
  containment and relations. Cost is O(inbox), not O(workspace).
* **Report and child look-ups without Core's quadratic listing.**
  ``Project.list_reports`` re-scans every REPORT once per (subject, attempt)
  group. The port prefilters files by their literal frontmatter line
  (``subject_ref: TASK-…`` / ``parent: TASK-…``) and validates each match
  through Core (``inspect_state(envelope_path=…)`` / ``read_task``); T3 then
  re-derives the head itself, so a wrong prefilter can only make baton wait,
  never submit the wrong evidence.
* **Approvals.** T4/T5 need an acceptance or rejection REVIEW (evidence), a
  single-use authorization REVIEW (``mark_human_approved``) whose issuer proof
  a trusted evaluator accepts, and the transition itself. See
  :mod:`baton.coordination.authority` and :meth:`FcopPort.approve`.
* **Legacy detection.** :func:`inspect_workspace_kind` classifies a project
  root without writing and explains how to move a 1.x–3.x workspace aside.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from baton.coordination.authority import PROFILE_REF, Expectation, TrustedAuthority
from baton.coordination.errors import (
    CODE_TO_ERROR,
    AuthorizationRefused,
    CoordinationError,
    EvidenceError,
    FcopProtocolError,
    InvalidEnvelope,
    LegacyWorkspaceError,
    StateAmbiguous,
    TaskNotFound,
    WorkspaceNotInitialized,
)

__all__ = [
    "STAGES",
    "TASK_FILE_RE",
    "TASK_ID_RE",
    "CreatedTask",
    "FcopPort",
    "InboxEntry",
    "ReportInfo",
    "ReviewInfo",
    "TaskInfo",
    "TransitionInfo",
    "WorkspaceStatus",
    "init_workspace",
    "inspect_workspace_kind",
    "map_fcop_error",
    "operation_id_for",
]

Stage = Literal["inbox", "active", "review", "done", "archive"]
STAGES: tuple[Stage, ...] = ("inbox", "active", "review", "done", "archive")
TASK_ID_RE = re.compile(r"TASK-[A-Za-z0-9][A-Za-z0-9._-]*\Z")
"""Core's TASK id grammar (``fcop.v4.encoding.ID_RE`` restricted to TASK)."""
TASK_FILE_RE = re.compile(r"(TASK-[A-Za-z0-9][A-Za-z0-9._-]*)\.md\Z")
_REVIEW_DECISIONS = {"acceptance": "approved", "rejection": "rejected"}

AUTHORIZATION_TTL = timedelta(minutes=10)
"""Lifetime of a minted authorization: long enough to consume, short enough to be useless later."""

_T = TypeVar("_T")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One TASK as Core validated it, plus where it is now (the path is the state)."""

    task_id: str
    subject: str
    sender: str
    recipient: str
    stage: str
    body: str
    priority: str = "P2"
    parent: str | None = None
    branch_of: str | None = None
    created_at: str = ""
    operation_id: str | None = None
    attempt_id: str | None = None
    """The current attempt (from the last entry-to-active transition); None in the inbox."""
    last_transition: Mapping[str, Any] = field(default_factory=dict)
    claims: int = 0
    """How many ``claim_task`` transitions the TASK has (exactly one after T2)."""
    path: Path = Path()


@dataclass(frozen=True, slots=True)
class CreatedTask:
    task_id: str
    existing: bool
    """True when the ``operation_id`` had already created this TASK (idempotent redelivery)."""
    operation_id: str
    path: Path


@dataclass(frozen=True, slots=True)
class TransitionInfo:
    task_id: str
    from_stage: str
    to_stage: str
    attempt_id: str
    receipt_ref: str
    existing: bool
    evidence_ref: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReportInfo:
    report_id: str
    subject_ref: str
    attempt_id: str
    sender: str
    recipient: str
    result: str
    report_kind: str
    body: str
    created_at: str
    references: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReviewInfo:
    review_id: str
    subject_ref: str
    review_kind: str
    decision: str
    sender: str
    recipient: str
    attempt_id: str | None
    references: tuple[str, ...]
    body: str
    created_at: str


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """An ``lstat`` view of one inbox directory entry, before anything reads it."""

    name: str
    path: Path
    task_id: str | None
    """The id the name claims (None when the name is not ``TASK-<id>.md``)."""
    is_symlink: bool
    is_regular: bool
    size: int
    ctime_ns: int = 0
    """When the name appeared (Core hard-links the finished file into place)."""


@dataclass(frozen=True, slots=True)
class WorkspaceStatus:
    """What a project root holds, found without writing anything."""

    kind: Literal["absent", "v4", "legacy"]
    root: Path
    workspace_id: str | None = None
    profiles: tuple[str, ...] = ()
    legacy_kind: str | None = None
    evidence: tuple[str, ...] = ()
    guidance: str = ""

    @property
    def authority_adopted(self) -> bool:
        """Whether baton's Profile was adopted, i.e. whether T4–T7 can ever succeed here."""
        return PROFILE_REF in self.profiles


# ---------------------------------------------------------------------- error mapping


def map_fcop_error(exc: BaseException) -> CoordinationError:
    """Translate ``fcop.errors.V4ProtocolError`` into baton's tree (other errors pass).

    Callers ``raise map_fcop_error(exc) from exc`` so the original stays chained.
    """
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        cls = CODE_TO_ERROR.get(code, FcopProtocolError)
        return cls(
            str(exc),
            code=code,
            operation_ref=getattr(exc, "operation_ref", None),
            subject_ref=getattr(exc, "subject_ref", None),
        )
    if isinstance(exc, CoordinationError):
        return exc
    return CoordinationError(f"{type(exc).__name__}: {exc}")


_PRIMED = threading.Lock()
_primed = False


def _prime_fcop() -> None:
    """Import ``fcop`` and build its schema validators once, deprecation warnings muted.

    fcop 4.0.5 imports ``jsonschema.RefResolver``, deprecated since jsonschema
    4.18; the warning fires once per process, at first use. Building the
    (cached) validators here keeps it out of callers that run with warnings
    as errors, without muting anything else.
    """
    global _primed
    with _PRIMED:
        if _primed:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from fcop.v4 import schema

            schema._validators()
        _primed = True


@contextmanager
def _fcop_errors() -> Iterator[None]:
    from fcop.errors import FcopError

    try:
        yield
    except FcopError as exc:
        raise map_fcop_error(exc) from exc


def operation_id_for(*parts: str) -> str:
    """A deterministic Core ``operation_id`` (``[A-Za-z0-9][A-Za-z0-9._:-]{0,127}``).

    The same request parts always give the same id, so a redelivered request
    (a retried tool call, a re-run script) finds the TASK it already created.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"baton:{digest[:48]}"


# ----------------------------------------------------------------- workspace kind


def _legacy_guidance(root: Path, label: str, evidence: Sequence[str]) -> str:
    moves = []
    if (root / "fcop").exists():
        moves.append("git mv fcop fcop-legacy        # or: mv fcop fcop-legacy")
    if (root / "docs" / "agents").exists():
        moves.append("git mv docs/agents docs/agents-legacy")
    steps = "\n".join(f"     {m}" for m in moves) or "     (move the old workspace directory aside)"
    found = "; ".join(evidence)
    return (
        f"This project holds an FCoP {label} workspace ({found}).\n"
        "baton speaks FCoP 4.0 only and never writes to an older workspace. fcop 4.0.5 has no\n"
        "in-place upgrade to 4.0 (`fcop migrate --to-v3` stops at 3.0, and 4.0's\n"
        "derive_workspace mints a fresh identity rather than copying old facts).\n"
        "To move on, keep the old workspace as read-only history and start a 4.0 one:\n"
        "  1. note the still-open tasks (fcop/tasks/, fcop/_lifecycle/inbox|active/)\n"
        "  2. move the old workspace aside (Core refuses to init over fcop/ or docs/agents/):\n"
        f"{steps}\n"
        "  3. baton init                 # a fresh FCoP 4.0 fcop/ with baton's evaluator\n"
        '  4. baton task new --to ROLE --subject "…" --body-file F   # per open task\n'
        "The old files stay readable with fcop.compatibility.v3.project.Project."
    )


def inspect_workspace_kind(root: Path) -> WorkspaceStatus:
    """Classify ``root``: no workspace, an FCoP 4.0 one, or a legacy one. Never writes."""
    root = root.resolve()
    manifest = root / "fcop" / "fcop.json"
    evidence: list[str] = []
    if manifest.is_symlink():
        evidence.append("fcop/fcop.json is a symlink")
    elif manifest.is_file():
        try:
            value = json.loads(manifest.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            value = None
        if isinstance(value, dict) and value.get("protocol_version") == "4.0":
            profiles = value.get("profiles")
            return WorkspaceStatus(
                kind="v4",
                root=root,
                workspace_id=str(value.get("workspace_id")),
                profiles=tuple(p for p in profiles if isinstance(p, str))
                if isinstance(profiles, list)
                else (),
            )
        if value is None:
            evidence.append("fcop/fcop.json is not readable JSON")
        else:
            declared = value.get("protocol_version", value.get("version", "none"))
            evidence.append(f"fcop/fcop.json declares version {declared!r}, not protocol 4.0")
    for rel in ("fcop/tasks", "fcop/log", "fcop/_lifecycle"):
        if (root / rel).is_dir() and not manifest.is_file():
            evidence.append(f"{rel}/ without a 4.0 manifest")
        elif (root / rel).is_dir() and rel in ("fcop/tasks", "fcop/log"):
            evidence.append(f"{rel}/ (a 1.x–2.x directory)")
    docs_agents = root / "docs" / "agents"
    if docs_agents.is_dir():
        evidence.append("docs/agents/ (the 0.x layout)")
    if not evidence and (root / "fcop").exists():
        if any((root / "fcop").iterdir()):
            evidence.append("fcop/ exists without an FCoP manifest")
        else:
            evidence.append("fcop/ exists (empty); Core will not initialize over it")
    if not evidence:
        return WorkspaceStatus(kind="absent", root=root)
    if any("_lifecycle" in e for e in evidence):
        label = "3.x"
    elif any("docs/agents" in e for e in evidence):
        label = "0.x"
    elif any("tasks" in e or "log" in e or "version" in e for e in evidence):
        label = "1.x–3.x"
    else:
        label = "unrecognized"
    return WorkspaceStatus(
        kind="legacy",
        root=root,
        legacy_kind=label,
        evidence=tuple(evidence),
        guidance=_legacy_guidance(root, label, evidence),
    )


def refuse_legacy(status: WorkspaceStatus) -> None:
    """A 1.x–3.x workspace is explained (with migration guidance), never touched."""
    if status.kind == "legacy":
        raise LegacyWorkspaceError(
            f"{status.root}: legacy FCoP {status.legacy_kind} workspace; not touched",
            kind=status.legacy_kind or "unknown",
            evidence=status.evidence,
            guidance=status.guidance,
        )


def init_workspace(root: Path, authority: TrustedAuthority | None) -> WorkspaceStatus:
    """Create an FCoP 4.0 workspace adopting baton's Profile; idempotent on a 4.0 one.

    Raises :class:`LegacyWorkspaceError` (with the migration guidance) when a
    legacy workspace is present: nothing is written then.
    """
    status = inspect_workspace_kind(root)
    refuse_legacy(status)
    if status.kind == "v4":
        return status
    _prime_fcop()
    import fcop

    profile = authority.profile_ref if authority else PROFILE_REF
    trusted = authority.trusted_profiles if authority else {}
    with _fcop_errors():
        project: Any = fcop.Project(status.root, trusted_profiles=trusted)
        project.create_workspace(protocol_version="4.0", profiles=[profile])
    return inspect_workspace_kind(status.root)


# ------------------------------------------------------------------------- the port


def _split_body(data: bytes) -> str:
    text = data.decode("utf-8")
    parts = text.split("---\n", 2)
    body = parts[2] if len(parts) == 3 else ""
    return body[1:] if body.startswith("\n") else body


def _entry_claims(transitions: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for t in transitions if t.get("tool") == "claim_task")


def _current_attempt(transitions: Sequence[Mapping[str, Any]]) -> str | None:
    entry_tools = {"claim_task", "reject_task", "reopen_task"}
    for event in reversed(transitions):
        if event.get("to") == "active" and event.get("tool") in entry_tools:
            attempt = event.get("attempt_id")
            return attempt if isinstance(attempt, str) else None
    return None


def _now() -> datetime:
    return datetime.now(UTC)


class FcopPort:
    """Typed, error-mapped access to one FCoP 4.0 workspace through ``fcop.Project``.

    Synchronous on purpose (Core fsyncs and takes file locks); async callers
    use ``asyncio.to_thread``. One instance may be shared across threads.
    """

    def __init__(
        self,
        root: Path,
        *,
        authority: TrustedAuthority | None = None,
        human: str = "ADMIN",
        read_attempts: int = 8,
        read_backoff: float = 0.002,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        _prime_fcop()
        import fcop

        self.root = Path(root).resolve()
        status = inspect_workspace_kind(self.root)
        if status.kind == "legacy":
            raise LegacyWorkspaceError(
                f"{self.root}: legacy FCoP {status.legacy_kind} workspace; not touched",
                kind=status.legacy_kind or "unknown",
                evidence=status.evidence,
                guidance=status.guidance,
            )
        if status.kind == "absent":
            raise WorkspaceNotInitialized(f"{self.root}: no FCoP workspace (run `baton init`)")
        self.authority = authority
        self.human = human
        trusted = authority.trusted_profiles if authority else {}
        with _fcop_errors():
            self._project: Any = fcop.Project(self.root, trusted_profiles=trusted)
        self.workspace_id: str = status.workspace_id or ""
        self.profiles = status.profiles
        self._read_attempts = max(1, read_attempts)
        self._read_backoff = read_backoff
        self._sleep = sleep

    # ---------------------------------------------------------------- basics

    @property
    def fcop_dir(self) -> Path:
        return self.root / "fcop"

    def stage_dir(self, stage: str) -> Path:
        return self.root / "fcop" / "_lifecycle" / stage

    @property
    def can_authorize(self) -> bool:
        """True when T4–T7 can succeed: Profile adopted and our evaluator registered."""
        return self.authority is not None and self.authority.profile_ref in self.profiles

    def _call(self, name: str, **kwargs: Any) -> Any:
        with _fcop_errors():
            return getattr(self._project, name)(**kwargs)

    def _retrying(self, what: Callable[[], _T], task_id: str) -> _T:
        delay = self._read_backoff
        for attempt in range(self._read_attempts):
            try:
                return what()
            except StateAmbiguous:
                if attempt + 1 == self._read_attempts:
                    raise
            except InvalidEnvelope as exc:
                # RELATION_INVALID is transient in two cases: zero paths (a move
                # towards an earlier-listed stage is in flight) and a parent that
                # is itself mid-move (Core wraps its STATE_AMBIGUOUS). Retry both;
                # then "gone" is TaskNotFound and anything else is re-raised.
                if exc.code != "RELATION_INVALID":
                    raise
                if attempt + 1 == self._read_attempts:
                    if self._exists_anywhere(task_id):
                        raise
                    raise TaskNotFound(task_id) from exc
            self._sleep(delay)
            delay = min(delay * 2, 0.05)
        raise AssertionError("unreachable")  # pragma: no cover

    def _exists_anywhere(self, task_id: str) -> bool:
        return any(os.path.lexists(self.stage_dir(s) / f"{task_id}.md") for s in STAGES)

    # ----------------------------------------------------------------- T1

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
        kwargs: dict[str, Any] = {
            "workspace_id": self.workspace_id,
            "operation_id": opid,
            "sender": sender,
            "recipient": recipient,
            "subject": subject,
            "body": body,
            "priority": priority,
        }
        if parent is not None:
            kwargs["parent"] = parent
        if references:
            kwargs["references"] = list(references)
        for attempt in range(2):
            try:
                result = self._call("create_task", **kwargs)
                break
            except FcopProtocolError as exc:
                if exc.code != "RECOVERY_REQUIRED":
                    raise
                if "without its durable operation fact" in str(exc) and attempt == 0:
                    # A crash between publishing the TASK and its create fact (rule R3).
                    from baton.coordination.fcop_recovery import complete_create_fact

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

    def _created_by(self, operation_id: str) -> CreatedTask | None:
        """The TASK a create operation made, by its durable fact, wherever it is now.

        Trusted only when the TASK itself names the operation and the fact's request
        digest (what Core would check if the TASK were still in the inbox).
        """
        from fcop.v4.encoding import canonical, digest

        key = digest(
            canonical(
                {
                    "workspace_id": self.workspace_id,
                    "operation_kind": "create_task",
                    "operation_id": operation_id,
                }
            )
        )
        path = self.fcop_dir / "operations" / f"create-{key}.json"
        try:
            fact = json.loads(path.read_bytes())
            task = self.read_task(str(fact["task_id"]))
        except (OSError, ValueError, KeyError, CoordinationError):
            return None
        fields = self._call("read_task", task_id=task.task_id)
        if fields.get("operation_id") != operation_id or fields.get(
            "normalized_request_digest"
        ) != fact.get("digest"):
            return None
        return CreatedTask(
            task_id=task.task_id, existing=True, operation_id=operation_id, path=task.path
        )

    # --------------------------------------------------------------- reads

    def read_task(self, task_id: str) -> TaskInfo:
        """Read one TASK through Core, retrying the two-stage window (bounded)."""
        if not TASK_ID_RE.fullmatch(task_id):
            raise InvalidEnvelope(f"not a TASK id: {task_id!r}", code="INVALID_ENVELOPE")

        def once() -> TaskInfo:
            fields = self._call("read_task", task_id=task_id)
            path = Path(fields["path"])
            try:
                body = _split_body(path.read_bytes())
            except FileNotFoundError as exc:
                # Moved between Core's validation and our body read: read again.
                raise StateAmbiguous("TASK moved while reading", code="STATE_AMBIGUOUS") from exc
            return self._task_info(fields, path, body)

        return self._retrying(once, task_id)

    def _task_info(self, fields: Mapping[str, Any], path: Path, body: str) -> TaskInfo:
        transitions = fields.get("transitions") or []
        return TaskInfo(
            task_id=fields["task_id"],
            subject=str(fields.get("subject", "")),
            sender=str(fields.get("sender", "")),
            recipient=str(fields.get("recipient", "")),
            stage=path.parent.name,
            body=body,
            priority=str(fields.get("priority") or "P2"),
            parent=fields.get("parent"),
            branch_of=fields.get("branch_of"),
            created_at=str(fields.get("created_at", "")),
            operation_id=fields.get("operation_id"),
            attempt_id=_current_attempt(transitions) if path.parent.name != "inbox" else None,
            last_transition=dict(transitions[-1]) if transitions else {},
            claims=_entry_claims(transitions),
            path=path,
        )

    def scan_inbox(self) -> list[InboxEntry]:
        """Every ``TASK-*.md`` (and lookalike) entry in the inbox, by ``lstat`` only.

        Core's temporaries (``.fcop-*.tmp``) and non-``TASK-`` names are left out:
        they are not envelopes. Nothing is opened here, so a huge file or a
        symlink costs one ``lstat``.
        """
        return self._scan_stage("inbox")

    def _scan_stage(self, stage: str) -> list[InboxEntry]:
        out: list[InboxEntry] = []
        try:
            with os.scandir(self.stage_dir(stage)) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.startswith("TASK-") or not name.endswith(".md"):
                        continue
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # moved on between listing and lstat
                    match = TASK_FILE_RE.fullmatch(name)
                    out.append(
                        InboxEntry(
                            name=name,
                            path=Path(entry.path),
                            task_id=match.group(1) if match else None,
                            is_symlink=stat.S_ISLNK(info.st_mode),
                            is_regular=stat.S_ISREG(info.st_mode),
                            size=info.st_size,
                            ctime_ns=info.st_ctime_ns,
                        )
                    )
        except FileNotFoundError as exc:
            raise WorkspaceNotInitialized(f"{self.stage_dir(stage)} is missing") from exc
        out.sort(key=lambda e: e.name)
        return out

    def list_stage(self, stage: Stage) -> list[TaskInfo]:
        """Every valid TASK in one stage, read through Core (O(stage), not O(workspace)).

        Invalid entries are skipped here; the doorbell is what reports them.
        """
        tasks = []
        for entry in self._scan_stage(stage):
            if entry.task_id is None or entry.is_symlink or not entry.is_regular:
                continue
            try:
                task = self.read_task(entry.task_id)
            except (TaskNotFound, InvalidEnvelope, StateAmbiguous):
                continue
            if task.stage == stage:
                tasks.append(task)
        return tasks

    def stage_counts(self) -> dict[str, int]:
        """``TASK-*.md`` names per stage (a directory listing each; nothing is parsed)."""
        counts: dict[str, int] = {}
        for stage in STAGES:
            try:
                with os.scandir(self.stage_dir(stage)) as entries:
                    counts[stage] = sum(
                        1 for e in entries if e.name.startswith("TASK-") and e.name.endswith(".md")
                    )
            except FileNotFoundError:
                counts[stage] = 0
        return counts

    def children(self, parent_id: str, stages: Sequence[Stage] = STAGES) -> list[TaskInfo]:
        """TASKs whose ``parent`` is ``parent_id``, in the given stages."""
        needle = f"\nparent: {parent_id}\n".encode()
        found: list[TaskInfo] = []
        for stage in stages:
            for entry in self._scan_stage(stage):
                if entry.task_id is None or entry.is_symlink or not entry.is_regular:
                    continue
                if not self._frontmatter_has(entry.path, needle):
                    continue
                try:
                    task = self.read_task(entry.task_id)
                except (TaskNotFound, InvalidEnvelope):
                    continue
                if task.parent == parent_id and all(t.task_id != task.task_id for t in found):
                    found.append(task)
        found.sort(key=lambda t: (t.created_at, t.task_id))
        return found

    @staticmethod
    def _frontmatter_has(path: Path, needle: bytes, limit: int = 64 * 1024) -> bool:
        try:
            with path.open("rb") as stream:
                head = stream.read(limit)
        except OSError:
            return False
        end = head.find(b"\n---\n", 3)
        return needle in (head[: end + 1] if end >= 0 else head)

    # -------------------------------------------------------------- T2, T3

    def claim(self, task_id: str, *, actor: str) -> TransitionInfo:
        """T2 (inbox → active); the result's ``attempt_id`` is the new attempt.

        A lost race raises :class:`~baton.coordination.errors.LifecycleConflict`.
        """
        result = self._call(
            "transition",
            task_id=task_id,
            from_stage="inbox",
            to_stage="active",
            tool="claim_task",
            actor=actor,
        )
        return self._transition_info(result)

    def submit(self, task_id: str, *, actor: str, report_ref: str | None = None) -> TransitionInfo:
        """T3 (active → review) with the current attempt's REPORT head as evidence."""
        kwargs: dict[str, Any] = {
            "task_id": task_id,
            "from_stage": "active",
            "to_stage": "review",
            "tool": "submit_task",
            "actor": actor,
        }
        if report_ref is not None:
            kwargs["report_ref"] = report_ref
        return self._transition_info(self._call("transition", **kwargs))

    @staticmethod
    def _transition_info(result: Mapping[str, Any]) -> TransitionInfo:
        return TransitionInfo(
            task_id=result["task_id"],
            from_stage=result["from_stage"],
            to_stage=result["to_stage"],
            attempt_id=result["attempt_id"],
            receipt_ref=result.get("receipt_ref", ""),
            existing=bool(result.get("existing")),
        )

    # ------------------------------------------------------------- appends

    def write_report(
        self,
        *,
        task_id: str,
        attempt_id: str,
        sender: str,
        recipient: str,
        result: str,
        body: str,
    ) -> ReportInfo:
        """Append a REPORT for ``attempt_id``; a second one replaces the current head.

        Core allows one ``final`` REPORT per attempt; an agent that reports
        again in the same attempt (a correction) gets a ``replacement`` that
        references the current head, so the latest word is the one T3 submits.
        """
        head = self.find_report_head(task_id, attempt_id)
        kwargs: dict[str, Any] = {
            "workspace_id": self.workspace_id,
            "sender": sender,
            "recipient": recipient,
            "subject_ref": task_id,
            "attempt_id": attempt_id,
            "body": body,
            "result": result,
            "report_kind": "final" if head is None else "replacement",
        }
        if head is not None:
            kwargs["references"] = [head.report_id]
        written = self._call("write_report", **kwargs)
        return ReportInfo(
            report_id=written["report_id"],
            subject_ref=task_id,
            attempt_id=attempt_id,
            sender=sender,
            recipient=recipient,
            result=result,
            report_kind=kwargs["report_kind"],
            body=body,
            created_at="",
            references=tuple(kwargs.get("references", ())),
        )

    def write_issue(
        self,
        *,
        sender: str,
        recipient: str,
        severity: str,
        body: str,
        subject_ref: str | None = None,
    ) -> str:
        """Append an ISSUE about a TASK, or about the workspace when ``subject_ref`` is None."""
        written = self._call(
            "write_issue",
            workspace_id=self.workspace_id,
            sender=sender,
            recipient=recipient,
            subject_ref=subject_ref or f"workspace:{self.workspace_id}",
            severity=severity,
            body=body,
        )
        return str(written["issue_id"])

    def write_decision_review(
        self,
        *,
        task_id: str,
        attempt_id: str,
        report_ref: str,
        reviewer: str,
        recipient: str,
        decision: Literal["approve", "reject"],
        reason: str,
    ) -> str:
        """Append the acceptance/rejection REVIEW (evidence only; moves nothing)."""
        kind = "acceptance" if decision == "approve" else "rejection"
        written = self._call(
            "write_review",
            workspace_id=self.workspace_id,
            sender=reviewer,
            recipient=recipient,
            subject_ref=task_id,
            review_kind=kind,
            decision=_REVIEW_DECISIONS[kind],
            attempt_id=attempt_id,
            references=[report_ref],
            body=reason or f"{kind} by {reviewer}",
        )
        return str(written["review_id"])

    # ------------------------------------------------------- report queries

    def inspect_envelope(self, path: Path) -> dict[str, Any]:
        """Any envelope's fields, validated by Core (schema, identity, relations, no links)."""
        rel = path.relative_to(self.root).as_posix()
        fields: dict[str, Any] = self._call("inspect_state", envelope_path=rel)
        return fields

    def reports_for(self, task_id: str, attempt_id: str | None = None) -> list[ReportInfo]:
        """REPORTs about ``task_id`` (optionally one attempt), each validated by Core."""
        needle = f"\nsubject_ref: {task_id}\n".encode()
        reports = []
        directory = self.fcop_dir / "reports"
        with os.scandir(directory) as entries:
            paths = sorted(
                Path(e.path)
                for e in entries
                if e.name.startswith("REPORT-") and e.name.endswith(".md")
            )
        for path in paths:
            if not self._frontmatter_has(path, needle):
                continue
            fields = self.inspect_envelope(path)
            if fields.get("subject_ref") != task_id:
                continue
            if attempt_id is not None and fields.get("attempt_id") != attempt_id:
                continue
            reports.append(
                ReportInfo(
                    report_id=fields["report_id"],
                    subject_ref=task_id,
                    attempt_id=fields["attempt_id"],
                    sender=fields["sender"],
                    recipient=fields["recipient"],
                    result=str(fields.get("result", "")),
                    report_kind=str(fields.get("report_kind", "final")),
                    body=_split_body(path.read_bytes()),
                    created_at=str(fields.get("created_at", "")),
                    references=tuple(fields.get("references") or ()),
                )
            )
        reports.sort(key=lambda r: (r.created_at, r.report_id))
        return reports

    def find_report_head(self, task_id: str, attempt_id: str) -> ReportInfo | None:
        """The current attempt's REPORT head (Core's rule), or None when none exists.

        Raises :class:`EvidenceError` when replacements do not form one chain.
        """
        group = self.reports_for(task_id, attempt_id)
        if not group:
            return None
        ids = {r.report_id for r in group}
        replaced = {
            ref
            for r in group
            if r.report_kind == "replacement"
            for ref in r.references
            if ref in ids
        }
        heads = [r for r in group if r.report_id not in replaced]
        if len(heads) != 1:
            raise EvidenceError(
                f"{task_id}: {len(heads)} REPORT heads for attempt {attempt_id}",
                code="REPORT_HEAD_AMBIGUOUS",
                subject_ref=task_id,
            )
        return heads[0]

    def find_decision(
        self, task_id: str, attempt_id: str, *, reviewer: str | None = None
    ) -> ReviewInfo | None:
        """The latest acceptance/rejection REVIEW for this attempt (by ``reviewer``)."""
        needle = f"\nsubject_ref: {task_id}\n".encode()
        found: list[ReviewInfo] = []
        with os.scandir(self.fcop_dir / "reviews") as entries:
            paths = sorted(
                Path(e.path)
                for e in entries
                if e.name.startswith("REVIEW-") and e.name.endswith(".md")
            )
        for path in paths:
            if not self._frontmatter_has(path, needle):
                continue
            fields = self.inspect_envelope(path)
            kind = fields.get("review_kind")
            if (
                kind not in _REVIEW_DECISIONS
                or fields.get("decision") != _REVIEW_DECISIONS[kind]
                or fields.get("subject_ref") != task_id
                or fields.get("attempt_id") != attempt_id
                or (reviewer is not None and fields.get("sender") != reviewer)
            ):
                continue
            found.append(
                ReviewInfo(
                    review_id=fields["review_id"],
                    subject_ref=task_id,
                    review_kind=str(kind),
                    decision=str(fields["decision"]),
                    sender=str(fields["sender"]),
                    recipient=str(fields["recipient"]),
                    attempt_id=fields.get("attempt_id"),
                    references=tuple(fields.get("references") or ()),
                    body=_split_body(path.read_bytes()),
                    created_at=str(fields.get("created_at", "")),
                )
            )
        found.sort(key=lambda r: (r.created_at, r.review_id))
        return found[-1] if found else None

    def read_review(self, review_id: str) -> ReviewInfo:
        """One REVIEW by id, validated by Core."""
        if not re.fullmatch(r"REVIEW-[A-Za-z0-9][A-Za-z0-9._-]*", review_id):
            raise InvalidEnvelope(f"not a REVIEW id: {review_id!r}", code="INVALID_ENVELOPE")
        path = self.fcop_dir / "reviews" / f"{review_id}.md"
        fields = self.inspect_envelope(path)
        return ReviewInfo(
            review_id=review_id,
            subject_ref=str(fields.get("subject_ref", "")),
            review_kind=str(fields.get("review_kind", "")),
            decision=str(fields.get("decision", "")),
            sender=str(fields.get("sender", "")),
            recipient=str(fields.get("recipient", "")),
            attempt_id=fields.get("attempt_id"),
            references=tuple(fields.get("references") or ()),
            body=_split_body(path.read_bytes()),
            created_at=str(fields.get("created_at", "")),
        )

    # --------------------------------------------------------------- T4, T5

    def approve(
        self, task_id: str, *, approver: str, reason: str = "", review_ref: str | None = None
    ) -> TransitionInfo:
        """T4 (review → done): acceptance REVIEW, authorization, transition."""
        return self._decide(task_id, "approve", approver, reason, review_ref)

    def reject(
        self, task_id: str, *, approver: str, reason: str = "", review_ref: str | None = None
    ) -> TransitionInfo:
        """T5 (review → active): rejection REVIEW, authorization, transition; new attempt."""
        return self._decide(task_id, "reject", approver, reason, review_ref)

    def _decide(
        self,
        task_id: str,
        decision: Literal["approve", "reject"],
        approver: str,
        reason: str,
        review_ref: str | None,
    ) -> TransitionInfo:
        """The whole authorized edge. Policy: only the TASK's sender or the human decides.

        Steps, each through Core: (1) the evidence REVIEW (``acceptance`` /
        ``approved`` or ``rejection`` / ``rejected``) bound to the attempt and
        referencing the REPORT head, reused when the reviewer already wrote it
        (e.g. through the MCP ``review_report`` tool); (2) a single-use
        authorization REVIEW via ``mark_human_approved`` carrying baton's
        HMAC issuer proof, checked by the trusted evaluator on publication;
        (3) the transition consuming both, checked by the evaluator again.
        """
        if self.authority is None or not self.can_authorize:
            raise AuthorizationRefused(
                "this workspace cannot authorize T4/T5: "
                + (
                    "no trusted evaluator is registered"
                    if self.authority is None
                    else f"its manifest did not adopt Profile {self.authority.profile_ref!r} "
                    "(the Profile set is fixed when the workspace is created)"
                ),
                code="AUTHORIZATION_PROFILE_UNAVAILABLE",
                subject_ref=task_id,
            )
        task = self.read_task(task_id)
        self.check_reviewer(task, approver)
        if task.stage != "review" or task.attempt_id is None:
            raise CODE_TO_ERROR["INVALID_TRANSITION"](
                f"{task_id} is in {task.stage}, not review", code="INVALID_TRANSITION"
            )
        try:
            return self._decide_task(task, decision, approver, reason, review_ref)
        except FcopProtocolError as exc:
            if exc.code != "RECOVERY_REQUIRED" or "conflicting receipt" not in str(exc):
                raise
            # A crash after this round's receipt, before its target (rule R5): finish that
            # move from its own receipt instead of authorizing a second one.
            replayed = self.replay_prepared(task_id, from_stage="review")
            if replayed is None:
                raise
            return replayed

    def replay_prepared(self, task_id: str, *, from_stage: str) -> TransitionInfo | None:
        """R5: replay the exact request of ``task_id``'s one unfinished (``PREPARED``) move.

        ``fcop`` finishes a move whose receipt matches a request exactly; an
        authorized move (T4/T5) can only be replayed with its own REVIEW and
        authorization refs, which are in the receipt. None when there is no such
        receipt with its source still in place.
        """
        source = self.stage_dir(from_stage) / f"{task_id}.md"
        if not source.is_file():
            return None
        needle = f'"task_id":"{task_id}"'.encode()
        pending = []
        for path in sorted((self.fcop_dir / "operations").glob("transition-*.json")):
            data = path.read_bytes()
            if needle not in data:
                continue
            value = json.loads(data)
            if (
                value.get("stage") == "PREPARED"
                and value.get("from_stage") == from_stage
                and value.get("task_id") == task_id
                and not (self.root / str(value.get("target_path", ""))).exists()
            ):
                pending.append(value)
        if len(pending) != 1:
            return None
        value = pending[0]
        request: dict[str, Any] = {
            name: value[name] for name in ("task_id", "from_stage", "to_stage", "tool", "actor")
        }
        for name in ("report_ref", "review_ref", "authorization_ref", "family_digest"):
            if value.get(name) is not None:
                request[name] = value[name]
        if value.get("request_profile_ref") is not None:
            request["profile_ref"] = value["request_profile_ref"]
        return self._transition_info(self._call("transition", **request))

    def _decide_task(
        self,
        task: TaskInfo,
        decision: Literal["approve", "reject"],
        approver: str,
        reason: str,
        review_ref: str | None,
    ) -> TransitionInfo:
        assert self.authority is not None and task.attempt_id is not None
        attempt = task.attempt_id
        head = self.find_report_head(task.task_id, attempt)
        if head is None:
            raise EvidenceError(
                f"{task.task_id}: no REPORT for attempt {attempt}", code="REPORT_REQUIRED"
            )
        evidence = self._evidence_review(task, decision, approver, reason, review_ref, head)
        to_stage = "done" if decision == "approve" else "active"
        expectation = Expectation(
            issuer=approver,
            subject_ref=task.task_id,
            from_stage="review",
            to_stage=to_stage,
            attempt_id=attempt,
        )
        issued = _now()
        with self.authority.expecting(expectation):
            auth = self._call(
                "mark_human_approved",
                review_id=evidence,
                decision="approved",
                approver=approver,
                profile_ref=self.authority.profile_ref,
                from_stage="review",
                to_stage=to_stage,
                attempt_id=attempt,
                issued_at=issued.isoformat(),
                expires_at=(issued + AUTHORIZATION_TTL).isoformat(),
                issuer_proof=self.authority.mint(expectation, issued_at=issued.isoformat()),
                comment=f"{approver} authorizes review -> {to_stage} for {task.task_id}",
            )
            result = self._call(
                "transition",
                task_id=task.task_id,
                from_stage="review",
                to_stage=to_stage,
                tool="approve_task" if decision == "approve" else "reject_task",
                actor=approver,
                report_ref=head.report_id,
                review_ref=evidence,
                authorization_ref=auth["review_id"],
                profile_ref=self.authority.profile_ref,
            )
        info = self._transition_info(result)
        return TransitionInfo(
            task_id=info.task_id,
            from_stage=info.from_stage,
            to_stage=info.to_stage,
            attempt_id=info.attempt_id,
            receipt_ref=info.receipt_ref,
            existing=info.existing,
            evidence_ref=(head.report_id, evidence, auth["review_id"]),
        )

    def _evidence_review(
        self,
        task: TaskInfo,
        decision: Literal["approve", "reject"],
        approver: str,
        reason: str,
        review_ref: str | None,
        head: ReportInfo,
    ) -> str:
        assert task.attempt_id is not None
        kind = "acceptance" if decision == "approve" else "rejection"
        if review_ref is not None:
            review = self.find_decision(task.task_id, task.attempt_id, reviewer=approver)
            if review is None or review.review_id != review_ref or review.review_kind != kind:
                raise AuthorizationRefused(
                    f"{review_ref} is not {approver}'s {kind} of {task.task_id} "
                    f"attempt {task.attempt_id}",
                    code="AUTHORIZATION_INVALID",
                    subject_ref=task.task_id,
                )
            if head.report_id not in review.references:
                raise EvidenceError(
                    f"{review_ref} does not reference the REPORT head {head.report_id}",
                    code="REPORT_HEAD_AMBIGUOUS",
                    subject_ref=task.task_id,
                )
            return review_ref
        return self.write_decision_review(
            task_id=task.task_id,
            attempt_id=task.attempt_id,
            report_ref=head.report_id,
            reviewer=approver,
            recipient=task.recipient,
            decision=decision,
            reason=reason,
        )

    def check_reviewer(self, task: TaskInfo, approver: str) -> None:
        """baton's policy: the TASK's sender (who delegated it) or the human decides."""
        if approver not in (task.sender, self.human):
            raise AuthorizationRefused(
                f"{approver} may not review {task.task_id}: only its sender "
                f"{task.sender} or {self.human} may",
                code="AUTHORIZATION_INVALID",
                subject_ref=task.task_id,
            )
