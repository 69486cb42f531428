"""Session bindings: who a role-scoped MCP server speaks for, decided by baton, not the agent.

A binding file (JSON, mode 0600, written by the daemon) pins one agent session
to one role: the FCoP root, the role, the team roster, the allowed tools and
two paths. The *pointer* file says which TASK and attempt the session is on
right now; the daemon rewrites it (atomically) each time the session moves to
its next task, so one long-lived MCP server follows its session without a
restart. The *spool* is an append-only JSON Lines file through which the MCP
server hands the daemon what needs a human or a lifecycle decision
(``ask_human`` questions, leader review decisions).

Identity (role, task, attempt) always comes from here, never from tool
arguments. The pointer is also re-checked against FCoP on every call (the
TASK must be active and addressed to the binding's role), so an edited
pointer can at most point a role at its own work.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from baton.coordination.errors import CoordinationError

__all__ = [
    "BINDING_VERSION",
    "Binding",
    "CurrentTask",
    "SpoolRecord",
    "append_spool",
    "load_binding",
    "read_pointer",
    "read_spool",
    "write_binding",
    "write_pointer",
]

BINDING_VERSION = 1
_MAX_SPOOL_LINE = 64 * 1024


@dataclass(frozen=True, slots=True)
class Binding:
    """One session's identity and capabilities (the binding file's content)."""

    fcop_root: Path
    role: str
    session_name: str
    """``ROLE`` or ``ROLE#n`` when a role has more than one concurrent session."""
    leader: str
    human: str
    team_roles: tuple[str, ...]
    allowed_tools: tuple[str, ...]
    pointer_path: Path
    spool_path: Path
    task_id: str | None = None
    attempt_id: str | None = None
    aliases: tuple[str, ...] = ()
    """Other recipient names routed to this role (``[team.roles.X] aliases``)."""
    path: Path | None = field(default=None, compare=False)
    """Where this binding was written (set by :func:`write_binding`/:func:`load_binding`)."""

    @property
    def is_leader(self) -> bool:
        return self.role == self.leader

    def to_json(self) -> dict[str, Any]:
        return {
            "version": BINDING_VERSION,
            "fcop_root": str(self.fcop_root),
            "role": self.role,
            "session_name": self.session_name,
            "leader": self.leader,
            "human": self.human,
            "team_roles": list(self.team_roles),
            "allowed_tools": list(self.allowed_tools),
            "pointer_path": str(self.pointer_path),
            "spool_path": str(self.spool_path),
            "task_id": self.task_id,
            "attempt_id": self.attempt_id,
            "aliases": list(self.aliases),
        }


@dataclass(frozen=True, slots=True)
class CurrentTask:
    """The pointer file: the TASK and attempt the session works on now."""

    task_id: str | None
    attempt_id: str | None
    seq: int = 0
    """Increments on every move, so a reader can tell two pointers apart."""


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    """One line of the spool: something the daemon must act on after the turn."""

    kind: str
    """``ask_human`` or ``review``."""
    role: str
    task_id: str | None
    attempt_id: str | None
    data: Mapping[str, Any] = field(default_factory=dict)
    at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "data": dict(self.data)}


def _atomic_write(path: Path, data: bytes) -> None:
    """Write a private file (0600) by temp + fsync + rename, so readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_binding(binding: Binding, path: Path) -> Binding:
    """Persist ``binding`` at ``path`` (0600) and return it with ``path`` set."""
    data = json.dumps(binding.to_json(), indent=2, sort_keys=True).encode() + b"\n"
    _atomic_write(path, data)
    if binding.task_id is not None and not binding.pointer_path.exists():
        write_pointer(binding.pointer_path, CurrentTask(binding.task_id, binding.attempt_id, 0))
    return Binding(**{**_fields(binding), "path": path})


def _fields(binding: Binding) -> dict[str, Any]:
    return {name: getattr(binding, name) for name in Binding.__dataclass_fields__}


def _str_tuple(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CoordinationError(f"binding {key}: must be a list of strings")
    return tuple(value)


def load_binding(path: Path) -> Binding:
    """Read and validate a binding file; refuse one others could have written."""
    try:
        info = path.stat()
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CoordinationError(f"{path}: cannot read binding: {exc}") from exc
    if info.st_mode & 0o022:
        raise CoordinationError(f"{path}: binding is writable by others; refusing it")
    if not isinstance(raw, dict) or raw.get("version") != BINDING_VERSION:
        raise CoordinationError(f"{path}: not a version {BINDING_VERSION} binding")
    try:
        strings = {
            k: raw[k]
            for k in (
                "fcop_root",
                "role",
                "session_name",
                "leader",
                "human",
                "pointer_path",
                "spool_path",
            )
        }
    except KeyError as exc:
        raise CoordinationError(f"{path}: binding lacks {exc.args[0]}") from exc
    for key, value in strings.items():
        if not isinstance(value, str) or not value:
            raise CoordinationError(f"{path}: binding {key} must be a non-empty string")
    for key in ("task_id", "attempt_id"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise CoordinationError(f"{path}: binding {key} must be a string or null")
    root = Path(strings["fcop_root"])
    if not root.is_absolute():
        raise CoordinationError(f"{path}: fcop_root must be absolute (never the cwd)")
    return Binding(
        fcop_root=root,
        role=strings["role"],
        session_name=strings["session_name"],
        leader=strings["leader"],
        human=strings["human"],
        team_roles=_str_tuple(raw.get("team_roles"), "team_roles"),
        allowed_tools=_str_tuple(raw.get("allowed_tools"), "allowed_tools"),
        pointer_path=Path(strings["pointer_path"]),
        spool_path=Path(strings["spool_path"]),
        task_id=raw.get("task_id"),
        attempt_id=raw.get("attempt_id"),
        aliases=_str_tuple(raw.get("aliases", []), "aliases"),
        path=path,
    )


def write_pointer(path: Path, current: CurrentTask) -> None:
    """Move the session to ``current`` (atomic replace; 0600)."""
    _atomic_write(path, json.dumps(asdict(current), sort_keys=True).encode() + b"\n")


def read_pointer(binding: Binding) -> CurrentTask:
    """The session's current TASK: the pointer when present, else the binding's own."""
    try:
        raw = json.loads(binding.pointer_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CurrentTask(binding.task_id, binding.attempt_id, 0)
    except (OSError, ValueError) as exc:
        raise CoordinationError(f"{binding.pointer_path}: unreadable task pointer: {exc}") from exc
    task_id, attempt_id, seq = raw.get("task_id"), raw.get("attempt_id"), raw.get("seq", 0)
    if not (task_id is None or isinstance(task_id, str)) or not (
        attempt_id is None or isinstance(attempt_id, str)
    ):
        raise CoordinationError(f"{binding.pointer_path}: malformed task pointer")
    return CurrentTask(task_id, attempt_id, seq if isinstance(seq, int) else 0)


def append_spool(path: Path, record: SpoolRecord) -> None:
    """Append one record as one ``write(2)`` with ``O_APPEND`` (no torn lines)."""
    line = json.dumps(record.to_json(), sort_keys=True, ensure_ascii=False).encode() + b"\n"
    if len(line) > _MAX_SPOOL_LINE:
        raise CoordinationError(f"spool record too large ({len(line)} bytes)")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_spool(path: Path, offset: int = 0) -> tuple[list[SpoolRecord], int]:
    """Complete records after byte ``offset``, and the offset to resume from."""
    try:
        with path.open("rb") as stream:
            stream.seek(offset)
            data = stream.read()
    except FileNotFoundError:
        return [], offset
    records: list[SpoolRecord] = []
    consumed = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # a record still being written
        consumed += len(line)
        try:
            raw = json.loads(line)
            records.append(
                SpoolRecord(
                    kind=str(raw["kind"]),
                    role=str(raw["role"]),
                    task_id=raw.get("task_id"),
                    attempt_id=raw.get("attempt_id"),
                    data=dict(raw.get("data") or {}),
                    at=str(raw.get("at", "")),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue  # a damaged line is skipped, never fatal
    return records, offset + consumed
