"""Opening a project for coordination: ``baton.toml`` team, authority key, FCoP port.

Shared by the CLI (``baton init``, ``task new``, ``status``, ``sessions``) and
``baton up`` so every entry point finds the same workspace, state directory,
team and trusted evaluator. Nothing here starts agents.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from baton.config import CONFIG_NAME, default_state_dir, load_config
from baton.errors import ConfigError
from baton.fcop_port.authority import TrustedAuthority, load_or_create_key
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import (
    WorkspaceStatus,
    init_workspace,
    inspect_workspace_kind,
    refuse_legacy,
)
from baton.team_config import TeamConfig, default_team, default_team_toml, parse_team

__all__ = [
    "CoordinationContext",
    "CoordinationPaths",
    "InitResult",
    "init_project",
    "open_context",
]


@dataclass(frozen=True, slots=True)
class CoordinationPaths:
    """Where coordination keeps its files in baton's state directory (state is in the store)."""

    state_dir: Path

    @property
    def root(self) -> Path:
        return self.state_dir / "coordination"

    @property
    def quarantine(self) -> Path:
        return self.state_dir / "quarantine"

    @property
    def authority_key(self) -> Path:
        return self.root / "authority.key"


@dataclass(frozen=True, slots=True)
class CoordinationContext:
    project_dir: Path
    state_dir: Path
    team: TeamConfig
    authority: TrustedAuthority
    port: FcopPort

    @property
    def paths(self) -> CoordinationPaths:
        return CoordinationPaths(self.state_dir)

    @property
    def config_path(self) -> Path:
        return self.project_dir / CONFIG_NAME


@dataclass(frozen=True, slots=True)
class InitResult:
    project_dir: Path
    workspace: WorkspaceStatus
    workspace_created: bool
    config: Literal["written", "appended", "kept"]
    team: TeamConfig


def _team(raw: Mapping[str, Any], profiles: Mapping[str, Any]) -> TeamConfig:
    section = raw.get("team")
    on_cluster = "cluster" in raw
    if section is None:
        return default_team(on_cluster=on_cluster)
    return parse_team(section, known_profiles=set(profiles), on_cluster=on_cluster)


def open_context(cwd: Path, *, environ: Mapping[str, str] | None = None) -> CoordinationContext:
    """Find ``baton.toml`` above ``cwd`` and open its FCoP workspace with baton's authority."""
    config = load_config(cwd, environ=environ)
    if config.project_dir is None:
        raise ConfigError(f"no {CONFIG_NAME} at or above {cwd}; run `baton init` in the project")
    team = _team(config.raw, config.profiles)
    paths = CoordinationPaths(config.state_dir)
    authority = TrustedAuthority(load_or_create_key(paths.authority_key))
    port = FcopPort(config.project_dir, authority=authority, human=team.human)
    return CoordinationContext(
        project_dir=config.project_dir,
        state_dir=config.state_dir,
        team=team,
        authority=authority,
        port=port,
    )


def init_project(root: Path, *, environ: Mapping[str, str] | None = None) -> InitResult:
    """``baton init``: an FCoP 4.0 workspace and a ``[team]`` in ``baton.toml``.

    A legacy workspace raises :class:`LegacyWorkspaceError` before anything is
    written. An existing ``baton.toml`` keeps its content; a ``[team]`` table
    is appended only when it has none.
    """
    import os

    root = root.resolve()
    status = inspect_workspace_kind(root)
    refuse_legacy(status)  # before anything is written
    config_path = root / CONFIG_NAME
    written: Literal["written", "appended", "kept"] = "kept"
    if not config_path.exists():
        config_path.write_text("# baton configuration\n\n" + default_team_toml(), encoding="utf-8")
        written = "written"
    else:
        try:
            raw = tomllib.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{config_path}: {exc}") from exc
        if "team" not in raw:
            with config_path.open("a", encoding="utf-8") as stream:
                stream.write("\n" + default_team_toml())
            written = "appended"
    config = load_config(root, environ=environ)
    team = _team(config.raw, config.profiles)
    state_dir = default_state_dir(root, os.environ if environ is None else environ)
    authority = TrustedAuthority(load_or_create_key(CoordinationPaths(state_dir).authority_key))
    workspace = init_workspace(root, authority)
    return InitResult(
        project_dir=root,
        workspace=workspace,
        workspace_created=status.kind == "absent",
        config=written,
        team=team,
    )
