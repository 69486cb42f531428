"""What a project root holds (no workspace, FCoP 4.0, or legacy), and creating a 4.0 one.

Classifying never writes: a 1.x–3.x workspace is explained, with how to move it
aside, and left untouched. ``fcop/fcop.json`` is read bounded, because any file
under ``fcop/`` may be hostile.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from baton.fcop_errors import LegacyWorkspaceError
from baton.fcop_port.authority import PROFILE_REF, TrustedAuthority
from baton.fcop_port.calls import fcop_errors, prime_fcop
from baton.intake.limits import DEFAULT_LIMITS

__all__ = ["WorkspaceStatus", "init_workspace", "inspect_workspace_kind", "refuse_legacy"]


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


def _read_manifest(manifest: Path, evidence: list[str]) -> Any:
    """``fcop/fcop.json`` read bounded (any file under ``fcop/`` may be hostile)."""
    try:
        size = manifest.stat().st_size
        if size > DEFAULT_LIMITS.max_json_bytes:
            evidence.append(
                f"fcop/fcop.json is {size} bytes, over the {DEFAULT_LIMITS.max_json_bytes}-byte limit"
            )
            return None
        return json.loads(manifest.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        evidence.append("fcop/fcop.json is not readable JSON")
        return None


def inspect_workspace_kind(root: Path) -> WorkspaceStatus:
    """Classify ``root``: no workspace, an FCoP 4.0 one, or a legacy one. Never writes."""
    root = root.resolve()
    manifest = root / "fcop" / "fcop.json"
    evidence: list[str] = []
    if manifest.is_symlink():
        evidence.append("fcop/fcop.json is a symlink")
    elif manifest.is_file():
        value = _read_manifest(manifest, evidence)
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
            pass  # _read_manifest said why
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
            f"{status.root}: legacy FCoP {status.legacy_kind} workspace "
            f"({'; '.join(status.evidence)}); not touched",
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
    prime_fcop()
    import fcop

    profile = authority.profile_ref if authority else PROFILE_REF
    trusted = authority.trusted_profiles if authority else {}
    with fcop_errors():
        project: Any = fcop.Project(status.root, trusted_profiles=trusted)
        project.create_workspace(protocol_version="4.0", profiles=[profile])
    return inspect_workspace_kind(status.root)
