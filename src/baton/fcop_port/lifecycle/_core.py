"""fcop's own Core (``fcop.v4.creation._Creation``) bound to O(1) primitives.

fcop 4.0.5 spends most of a claim or a create on checks that are constant-size
but slow, and on scans that grow with history. This subclass keeps fcop's code
for every rule and replaces only *how* it reaches the files:

* ``_check`` (manifest unchanged, certified local filesystem, complete layout,
  one device) is fcop's full check once per process; afterwards a call compares
  the manifest *bytes* with the bound ones and ``lstat``\\ s the layout (no
  symlink, a directory, the same device). Any difference falls back to fcop's
  full check, which raises exactly what fcop raises.
* ``_paths`` (where an id lives) is one ``lstat`` per candidate instead of
  fcop's ``safe_path`` walk; a symlink is refused with fcop's error.
* ``_resolve`` parses through :class:`~.envelopes.EnvelopeMemo`: fcop's own pure-Python
  parser, memoized by the SHA-256 of the bytes (a parse is a function of the
  bytes, so a hit is exactly what fcop would have parsed).

Everything else (schemas, relations, identity, digests, publication, locks,
receipts) is fcop's. The history scans live in the writer modules.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from fcop.v4.creation import _Creation
from fcop.v4.encoding import BUCKETS, ID_RE, STAGES

from baton.errors import ControlFlow
from baton.fcop_port.lifecycle._fcop import fail, publish_temporary
from baton.fcop_port.lifecycle.envelopes import EnvelopeMemo, emitted_frontmatter
from baton.fcop_port.lifecycle.subjects import FolderWatch, SubjectIndex
from baton.fcop_port.records import FcopDict

__all__ = ["Vanished", "Workspace"]

_R = TypeVar("_R")

_LAYOUT: tuple[str, ...] = (
    "fcop",
    "fcop/_lifecycle",
    *(f"fcop/_lifecycle/{stage}" for stage in STAGES),
    *(f"fcop/{bucket}" for bucket in BUCKETS.values()),
    "fcop/operations",
    "fcop/cold",
)
"""Every directory fcop's ``_check`` verifies, parents first."""


class Vanished(ControlFlow):
    """A listed envelope was gone when read: a concurrent move finished in between."""


def _settled(read: Callable[[], _R], subject: str, attempts: int = 4) -> _R:
    """Repeat a list-then-read lookup a concurrent move raced (bounded).

    fcop's own readers report this race as INVALID_ENVELOPE ("Unreadable
    envelope"): a claim that loses fcop's 8-process race can get it instead of
    INVALID_TRANSITION. Listing again sees the move finished.
    """
    for _ in range(attempts - 1):
        try:
            return read()
        except Vanished:
            continue
    try:
        return read()
    except Vanished as exc:
        raise fail("STATE_AMBIGUOUS", "TASK moved while it was read", subject=subject) from exc


class Workspace(_Creation):
    """One bound FCoP 4.0 workspace: fcop's Core with the fast primitives above.

    Build it with :meth:`open`; share it across threads like ``fcop.Project``.
    """

    manifest_bytes: bytes
    device: int

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        trusted_profiles: Mapping[str, Callable[..., str]] | None = None,
        memo: EnvelopeMemo | None = None,
    ) -> Workspace:
        """Bind ``root`` as fcop does (``open_if_declared``), then run fcop's full check once."""
        root = Path(root).resolve()
        base = _Creation.open_if_declared(root, trusted_profiles=trusted_profiles)
        if base is None or base.invalid:
            raise fail(
                "UNSUPPORTED_WORKSPACE_VERSION",
                "A canonical 4.0 workspace is required",
                operation="workspace_binding",
            )
        ws = cls(root, base.manifest, trusted_profiles=trusted_profiles)
        ws.memo = memo or EnvelopeMemo()
        ws._layout = tuple(os.path.join(root, relative) for relative in ("", *_LAYOUT))
        ws._manifest_path = os.path.join(root, "fcop", "fcop.json")
        ws._folders = {
            "TASK": tuple(os.path.join(root, "fcop", "_lifecycle", s) for s in STAGES),
            **{kind: (os.path.join(root, "fcop", folder),) for kind, folder in BUCKETS.items()},
        }
        reports = {kind: root / "fcop" / BUCKETS[kind] for kind in ("REPORT", "REVIEW")}
        stages = {stage: ws.stage_dir(stage) for stage in STAGES}
        ws.watch = FolderWatch(root, [*reports.values(), *stages.values()])
        ws._subjects = {
            kind: SubjectIndex(folder, f"{kind}-", watch=ws.watch)
            for kind, folder in reports.items()
        }
        for stage, folder in stages.items():
            ws._subjects[f"TASK:{stage}"] = SubjectIndex(
                folder, "TASK-", keys=("parent", None), required=False, watch=ws.watch
            )
        _Creation._check(ws)
        ws.manifest_bytes = (root / "fcop" / "fcop.json").read_bytes()
        ws.device = os.lstat(root / "fcop" / "fcop.json").st_dev
        return ws

    memo: EnvelopeMemo
    watch: FolderWatch
    """The kernel's news of the index folders (armed once a folder is large)."""
    _subjects: dict[str, SubjectIndex]
    _layout: tuple[str, ...]
    _manifest_path: str
    _folders: dict[str, tuple[str, ...]]

    def stage_dir(self, stage: str) -> Path:
        """A lifecycle stage's folder, ``fcop/_lifecycle/<stage>``."""
        return self.root / "fcop" / "_lifecycle" / stage

    def task_path(self, stage: str, task_id: str) -> Path:
        """Where ``task_id``'s copy in ``stage`` lives (whether or not it is there)."""
        return self.stage_dir(stage) / f"{task_id}.md"

    def subjects(self, kind: str) -> SubjectIndex:
        """The index of the ``REPORT`` or ``REVIEW`` folder, or of ``TASK:<stage>`` by parent."""
        return self._subjects[kind]

    # ----------------------------------------------------------- fast checks

    def _check(self, workspace_id: str | None = None) -> None:
        if not self._layout_unchanged():
            super()._check(workspace_id)  # raises what fcop raises, or passes: rebind
            self.manifest_bytes = (self.root / "fcop" / "fcop.json").read_bytes()
            self.device = os.lstat(self.root / "fcop" / "fcop.json").st_dev
            return
        if workspace_id is not None and workspace_id != self.manifest["workspace_id"]:
            raise fail(
                "WORKSPACE_ID_MISMATCH",
                "Request workspace identity mismatch",
                operation="workspace_binding",
            )

    def _layout_unchanged(self) -> bool:
        """The manifest holds the bound bytes and every layout directory is intact."""
        try:
            for directory in self._layout:
                info = os.lstat(directory)
                if not stat.S_ISDIR(info.st_mode) or info.st_dev != self.device:
                    return False
            info = os.lstat(self._manifest_path)
            if not stat.S_ISREG(info.st_mode) or info.st_dev != self.device:
                return False
            with open(self._manifest_path, "rb") as stream:
                return stream.read(len(self.manifest_bytes) + 1) == self.manifest_bytes
        except OSError:
            return False

    def _paths(self, envelope_id: str) -> list[Path]:
        if not isinstance(envelope_id, str) or not ID_RE.fullmatch(envelope_id):
            raise fail(
                "RELATION_INVALID", "Invalid typed envelope reference", subject=str(envelope_id)
            )
        name = f"{envelope_id}.md"
        found = []
        for folder in self._folders[envelope_id.split("-", 1)[0]]:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                raise fail(
                    "INVALID_ENVELOPE",
                    "Symlink/junction in workspace path",
                    subject=os.path.relpath(path, self.root),
                )
            found.append(Path(path))
        return found

    def read_validated(self, path: Path) -> tuple[bytes, FcopDict]:
        """The bytes at ``path`` and ``_validate(parse_envelope(path), path)``, memoized.

        A file that vanished since it was listed raises :class:`Vanished` (a move
        finished in between); any other read error is fcop's INVALID_ENVELOPE.
        """
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise Vanished(str(path)) from exc
        except OSError as exc:
            raise fail("INVALID_ENVELOPE", "Unreadable envelope", subject=str(path)) from exc
        fields = self.memo.validated(data, path.stem, lambda parsed: self._validate(parsed, path))
        return data, fields

    def sweep_temporaries(self, stage: str, task_id: str) -> list[str]:
        """Remove fcop ``publish`` temporaries of ``task_id`` a crash left in ``stage``.

        Call only holding the lock that guards publication of ``task_id`` into
        ``stage`` (the create key lock for the inbox, the family lock for
        ``active/``), after the operation's authoritative state is settled.
        One listing of ``stage`` (live work: ``inbox/`` or ``active/``).
        """
        removed = []
        for path in self.temporaries(stage, task_id):
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
                removed.append(path.relative_to(self.root).as_posix())
        if removed:
            from fcop.v4.encoding import sync_directory

            sync_directory(self.stage_dir(stage))
        return removed

    def temporaries(self, stage: str, task_id: str) -> list[Path]:
        """fcop ``publish`` temporaries of ``task_id`` in one stage (``mkstemp``'s names)."""
        mine = ("create", task_id)
        with os.scandir(self.stage_dir(stage)) as entries:
            return sorted(Path(e.path) for e in entries if publish_temporary(e.name) == mine)

    def remember(self, path: Path, data: bytes) -> None:
        """Seed the memo with an envelope baton just published (fcop's emitter output)."""
        fields = emitted_frontmatter(data)
        if fields is not None:
            self.memo.seed(data, fields, path.stem)

    def _resolve(
        self, envelope_id: str, *, seen: frozenset[str] = frozenset()
    ) -> tuple[Path, FcopDict]:
        path, _, fields = self.resolve_bytes(envelope_id, seen=seen)
        return path, fields

    def resolve_bytes(
        self, envelope_id: str, *, seen: frozenset[str] = frozenset()
    ) -> tuple[Path, bytes, FcopDict]:
        """fcop's ``_resolve`` (exactly one path, valid, strong relations), plus the bytes read."""
        return _settled(lambda: self._resolve_once(envelope_id, seen), envelope_id)

    def _resolve_once(self, envelope_id: str, seen: frozenset[str]) -> tuple[Path, bytes, FcopDict]:
        paths = self._paths(envelope_id)
        if len(paths) != 1:
            raise fail(
                "STATE_AMBIGUOUS" if len(paths) > 1 else "RELATION_INVALID",
                "Reference must resolve to exactly one envelope",
                subject=envelope_id,
            )
        path = paths[0]
        data, fields = self.read_validated(path)
        if envelope_id in seen:
            raise fail("RELATION_INVALID", "Cyclic strong relation", subject=envelope_id)
        for key in ("parent", "branch_of"):
            target = fields.get(key)
            if target is not None:
                self._strong_task(target, seen=seen | {envelope_id})
        return path, data, fields

    def family_root(self, task_id: str) -> str:
        """fcop's ``family_root_for`` (which Root's family lock guards this TASK)."""
        return _settled(lambda: self._family_root_once(task_id), task_id)

    def _family_root_once(self, task_id: str) -> str:
        paths = self._paths(task_id)
        if not paths:
            raise fail("RELATION_INVALID", "TASK does not exist", subject=task_id)
        roots: set[str] = set()
        for path in paths:
            _, fields = self.read_validated(path)
            root = fields.get("branch_of") or task_id
            if not isinstance(root, str) or not root.startswith("TASK-"):
                raise fail("RELATION_INVALID", "Invalid Branch Root", subject=task_id)
            roots.add(root)
        if len(roots) != 1:
            raise fail("RECOVERY_REQUIRED", "TASK copies disagree on family identity")
        return roots.pop()

    crash_hook: Callable[[str, str], None] | None = None
    """Tests only: called at every durable boundary (``operation``, ``stage``) to kill the process."""

    def boundary(self, operation: str, stage: str) -> None:
        """A durable boundary: fcop's fault plan (``inject_fault``) and the test crash hook."""
        if operation == "transition":
            self._trigger_fault("transition", stage)
        if self.crash_hook is not None:
            self.crash_hook(operation, stage)
