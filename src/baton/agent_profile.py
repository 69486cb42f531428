"""Agent profiles: how to launch one agent harness, as plain data.

A profile says which command to run, which environment the agent may see (an
allowlist plus explicitly bound credentials, never the inherited shell env), which
private directories it gets, which ambient configuration families it would load
(for workspace admission), and which session settings to request. Profiles do no
I/O; :mod:`baton.providers.catalog` holds the built-in ones and
:mod:`baton.config` loads user profiles from ``baton.toml``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

__all__ = [
    "BUNDLED_BRIDGE",
    "DEFAULT_PASS_ENV",
    "PYTHON_PLACEHOLDER",
    "TRANSPORTS",
    "AgentProfile",
    "CredentialBinding",
    "MissingFileReads",
    "SeedFile",
]

BUNDLED_BRIDGE: Final = "cursor-sdk-bridge"
"""A ``cursor-sdk`` profile whose command is this name runs the bridge bundled in the
installed ``cursor-sdk`` wheel, verified against baton's pin of that release
(:mod:`baton.security.bridge_pin`); any other command is a bridge binary of its own."""

PYTHON_PLACEHOLDER = "$PYTHON"
"""Stands for the interpreter running baton in a profile's command."""

DEFAULT_PASS_ENV: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
"""Non-secret variables every agent may inherit from baton's environment."""


TRANSPORTS: tuple[str, ...] = ("acp", "cursor-sdk")
"""The ways baton can talk to an agent (:attr:`AgentProfile.transport`)."""


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class CredentialBinding:
    """One credential the agent receives, by name, from an explicit source.

    ``source="env"`` reads baton's own environment variable ``key``;
    ``source="file"`` reads ``key`` from the secrets file named in the config
    (which must be mode 0600). The value enters only this agent's environment.
    """

    name: str
    source: Literal["env", "file"] = "env"
    key: str = ""

    @property
    def lookup_key(self) -> str:
        return self.key or self.name


@dataclass(frozen=True, slots=True)
class SeedFile:
    """A file baton writes into the agent's private root before launch.

    ``path`` is relative to the private root (``home/.claude/settings.json``,
    ``codex/home/config.toml``) or starts with a private variable (``$CODEX_HOME/config.toml``),
    so each agent gets its own config format without baton parsing it. The content is given
    inline, or read at launch from ``source`` (a file; relative to the project).
    """

    path: str
    content: str | None = None
    source: str | None = None
    mode: int = 0o600


MissingFileReads = Literal["not-found", "empty"]
"""How a client read of a file that is not there is answered
(:attr:`AgentProfile.missing_file_reads`)."""


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """How to launch and talk to one agent harness."""

    name: str
    title: str
    command: tuple[str, ...]
    family: str
    """Provider family for normalizers and inventories (``cursor``, ``claude``, ...)."""
    env: Mapping[str, str] = field(default_factory=_frozen)
    """Fixed variables set for the agent (never secrets)."""
    pass_env: tuple[str, ...] = DEFAULT_PASS_ENV
    credentials: tuple[CredentialBinding, ...] = ()
    private_dirs: Mapping[str, str] = field(default_factory=_frozen)
    """Variable name -> sub-directory of the session's private root (created 0700)."""
    admission: tuple[str, ...] = ()
    """Ambient config families this agent would load (``cursor``, ``claude``)."""
    allow_workspace_config: bool = False
    """Documented override: the user trusts the repository's own agent config."""
    client_meta: Mapping[str, Any] = field(default_factory=_frozen)
    """``_meta`` sent in ``initialize.clientCapabilities`` (e.g. Cursor subagents)."""
    session_meta: Mapping[str, Any] = field(default_factory=_frozen)
    """``_meta`` sent with ``session/new``, ``load`` and ``resume`` (e.g. Claude's setting
    sources: only the private user scope, so a repository's ``permissions.allow`` list
    approves nothing)."""
    missing_file_reads: MissingFileReads = "not-found"
    """How baton answers this agent's ``fs/read_text_file`` of a file that is not there
    (inside the workspace): ACP's resource not found (-32002), or ``empty``
    (``{"content": ""}``) for an agent that fails on any error answer to a read it makes
    before writing a new file (Gemini CLI); the record says so, once per session."""
    mode: str | None = None
    model: str | None = None
    config_options: Mapping[str, str] = field(default_factory=_frozen)
    """Other session config options to set, sent only when the agent advertises them."""
    install_hint: str = ""
    package: str | None = None
    """The npm package that provides ``command`` (``baton agents install``)."""
    version: str | None = None
    """The exact package version baton pins (``npm install -E``)."""
    files: tuple[SeedFile, ...] = ()
    """Config files seeded into the private root before every launch."""
    endpoint: str | None = None
    """The model endpoint the agent is pointed at (a loopback one accepts dummy keys)."""
    agent_approves: bool = False
    """Documented override: run even in a mode where the agent approves its own mutations;
    the session then carries a ``security.approval_bypass`` event."""
    worktree_edits: bool = True
    """In a task tree's own worktree, run the family's edit-without-asking mode instead of
    the asking one (:mod:`baton.providers.worktree_modes`); ``False`` keeps ``mode`` there."""
    pin: str | None = None
    """Path of a pinned-distribution manifest to verify before every launch."""
    initialize_timeout: float = 30.0
    session_timeout: float = 60.0
    turn_timeout: float = 1800.0
    stall_timeout: float | None = None
    """Silence before a running turn gets ``turn.stalled``; ``None``: the runner's default
    (60 s, ``baton.runner.liveness.DEFAULT_STALL_SECONDS``)."""
    transport: str = "acp"
    """How baton talks to the agent: ``acp`` (its ``command`` speaks ACP on stdio) or
    ``cursor-sdk`` (``command`` is a Cursor SDK bridge, driven through the ``cursor-sdk``
    client; :mod:`baton.cursor_sdk`)."""
    source: str = "builtin"

    @property
    def package_spec(self) -> str | None:
        """``name@version`` for ``npm install -E``, when the profile names a package."""
        if self.package is None or self.version is None:
            return None
        return f"{self.package}@{self.version}"

    def argv(self) -> list[str]:
        """The command with :data:`PYTHON_PLACEHOLDER` resolved."""
        return [sys.executable if part == PYTHON_PLACEHOLDER else part for part in self.command]
