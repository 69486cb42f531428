"""Workspace admission: refuse ambient agent configuration a repository could use.

Agent harnesses load configuration from the directory they work in: MCP servers,
hooks, plugins, helper commands, API base URLs, pre-approved tools. A repository that
ships such files gets to run code, start tools or redirect credentials as soon as an
agent opens it, behind the back of baton's approvals. Before launching an agent (and
again on recovery), :func:`admit` walks from the workspace up to its git root (the
nearest ancestor holding ``.git``; without one, only the workspace itself) and checks
every directory against the rules of the families the profile loads.

The rules are one declarative table, :data:`RULES`. A rule either refuses a path that
merely *exists* (``.cursor/mcp.json``, a plugins directory) or refuses a settings file
that carries any of the listed keys (``.claude/settings*.json`` with ``hooks``); ordinary
settings pass. Anything that cannot be checked fails closed: a symbolic link, a
non-regular file, a file over 1 MiB, an unreadable file or directory, a parse error.
``cursor`` also loads ``claude``'s rules (:data:`FAMILY_INCLUDES`), and cursor's
system-wide hook files (:data:`DEFAULT_SYSTEM_HOOK_PATHS`) are checked too.

Admission is a check at one moment; it cannot stop a concurrent change to these files,
so the runner re-admits on recovery. ``allow_workspace_config=True`` (the documented
per-profile override for users who trust their repository) turns refusals into
warnings, which are still reported.

The key lists come from each harness's documentation as we know it (no network
research was possible while writing this); each row's ``note`` states the assumption.

Length: the table of ambient configuration files per agent family is data; the verdict logic over it is short.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal

from baton.errors import ConfigError, SecurityError
from baton.events.model import SecurityAdmissionRefused
from baton.jsontypes import JsonObject
from baton.security.paths import open_regular, resolved_dir

__all__ = [
    "DEFAULT_SYSTEM_HOOK_PATHS",
    "FAMILY_INCLUDES",
    "KNOWN_FAMILIES",
    "MAX_CONFIG_BYTES",
    "RULES",
    "AdmissionFinding",
    "AdmissionVerdict",
    "ConfigRule",
    "admit",
    "find_git_root",
]

MAX_CONFIG_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class ConfigRule:
    """One kind of ambient configuration a family would load from a workspace directory."""

    id: str
    family: str
    path: str
    """Relative POSIX path; the last component may be a glob (``settings*.json``)."""
    kind: Literal["present", "keys"]
    """``present``: refuse if the path exists at all; ``keys``: refuse if any key is set."""
    why: str
    fmt: Literal["json", "jsonc", "toml", ""] = ""
    keys: tuple[str, ...] = ()
    """Dotted key paths; the presence of any refuses (``permissions.allow``)."""
    note: str = ""
    """What we assumed about the harness when writing the rule."""


_CLAUDE_KEYS: Final = (
    "hooks",
    "enabledPlugins",
    "extraKnownMarketplaces",
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "statusLine",
    "mcpServers",
    "enableAllProjectMcpServers",
    "enabledMcpjsonServers",
    "env",
    "permissions.defaultMode",
)
"""``permissions.allow`` is not refused: the Claude profile loads only its private user
settings (``settingSources``, :data:`baton.providers.catalog.CLAUDE`), so a repository's
allow list approves nothing, and the permission audit records any mutation no decision
allowed. Ordinary settings are admitted."""
_GEMINI_KEYS: Final = (
    "mcpServers",
    "hooks",
    "toolDiscoveryCommand",
    "toolCallCommand",
    "mcpServerCommand",
    "tools.discoveryCommand",
    "tools.callCommand",
    "mcp.serverCommand",
    "autoAccept",
    "tools.autoAccept",
    "tools.allowed",
)
_CODEX_KEYS: Final = (
    "mcp_servers",
    "hooks",
    "notify",
    "model_providers",
    "profiles",
    "approval_policy",
    "sandbox_mode",
    "sandbox_workspace_write",
    "shell_environment_policy",
)
_OPENCODE_KEYS: Final = (
    "mcp",
    "plugin",
    "provider",
    "formatter",
    "lsp",
    "experimental",
    "permission",
)

RULES: Final[tuple[ConfigRule, ...]] = (
    # ---------------------------------------------------------------- cursor
    ConfigRule(
        "cursor.mcp",
        "cursor",
        ".cursor/mcp.json",
        "present",
        "project MCP servers: the agent would start these tools itself",
        note="--disable-project-configs only suppresses .cursor/cli.json (seed document)",
    ),
    ConfigRule(
        "cursor.hooks",
        "cursor",
        ".cursor/hooks.json",
        "present",
        "project hooks: commands run on agent events",
    ),
    ConfigRule(
        "cursor.plugins",
        "cursor",
        ".cursor/plugins",
        "present",
        "project plugins: code loaded into the agent",
    ),
    # ---------------------------------------------------------------- claude
    ConfigRule(
        "claude.plugins",
        "claude",
        ".claude/plugins",
        "present",
        "project plugins: code loaded into the agent",
    ),
    ConfigRule(
        "claude.settings",
        "claude",
        ".claude/settings*.json",
        "keys",
        "settings that run commands, load plugins or MCP servers, set the agent's env "
        "(API base URLs) or pre-approve tools",
        fmt="json",
        keys=_CLAUDE_KEYS,
        note="settings.json and settings.local.json are loaded as project settings; helper "
        "keys (apiKeyHelper, statusLine …) run commands; env can redirect API traffic; "
        "permissions.defaultMode could select a self-approving mode; a permissions.allow "
        "list is neutralized at launch (Claude loads only user settings) and audited",
    ),
    ConfigRule(
        "claude.mcp_json",
        "claude",
        ".mcp.json",
        "present",
        "project-scoped MCP servers",
        note="Claude Code reads .mcp.json at the project root; its approval prompt is not "
        "assumed to apply under ACP",
    ),
    # ---------------------------------------------------------------- codex
    ConfigRule(
        "codex.config",
        "codex",
        ".codex/config.toml",
        "keys",
        "project config that starts MCP servers, runs commands (notify, hooks), redirects "
        "model traffic or relaxes the sandbox/approval policy",
        fmt="toml",
        keys=_CODEX_KEYS,
        note="assumes Codex reads a project .codex/config.toml (trusted projects) with the "
        "same keys as ~/.codex/config.toml",
    ),
    # ---------------------------------------------------------------- gemini
    ConfigRule(
        "gemini.settings",
        "gemini",
        ".gemini/settings.json",
        "keys",
        "workspace settings that start MCP servers, run discovery/call commands or hooks, "
        "or auto-accept tools",
        fmt="jsonc",
        keys=_GEMINI_KEYS,
        note="covers both the flat (v1) and nested (v2) settings layouts; the file may "
        "hold comments",
    ),
    ConfigRule(
        "gemini.extensions",
        "gemini",
        ".gemini/extensions",
        "present",
        "workspace extensions: MCP servers and commands loaded into the agent",
    ),
    ConfigRule(
        "gemini.env",
        "gemini",
        ".gemini/.env",
        "present",
        "an env file the agent loads (can redirect API endpoints or change credentials)",
        note="a plain .env at the workspace root is also read by Gemini CLI; it is not "
        "refused because most repositories have one (documented gap)",
    ),
    # ---------------------------------------------------------------- qwen
    ConfigRule(
        "qwen.settings",
        "qwen",
        ".qwen/settings.json",
        "keys",
        "workspace settings that start MCP servers, run discovery/call commands or hooks, "
        "or auto-accept tools",
        fmt="jsonc",
        keys=_GEMINI_KEYS,
        note="Qwen Code is a Gemini CLI fork; assumes the same settings keys",
    ),
    ConfigRule(
        "qwen.extensions",
        "qwen",
        ".qwen/extensions",
        "present",
        "workspace extensions: MCP servers and commands loaded into the agent",
    ),
    ConfigRule(
        "qwen.env",
        "qwen",
        ".qwen/.env",
        "present",
        "an env file the agent loads (can redirect API endpoints or change credentials)",
    ),
    # ---------------------------------------------------------------- opencode
    ConfigRule(
        "opencode.config",
        "opencode",
        "opencode.json*",
        "keys",
        "project config that starts MCP servers, loads plugins, runs formatters/LSP "
        "commands or hooks, redirects providers or pre-approves tools",
        fmt="jsonc",
        keys=_OPENCODE_KEYS,
        note="opencode.json and opencode.jsonc are merged from every directory up to the git root",
    ),
    ConfigRule(
        "opencode.dir_config",
        "opencode",
        ".opencode/opencode.json*",
        "keys",
        "project config that starts MCP servers, loads plugins, runs formatters/LSP "
        "commands or hooks, redirects providers or pre-approves tools",
        fmt="jsonc",
        keys=_OPENCODE_KEYS,
    ),
    *(
        ConfigRule(
            f"opencode.{name}",
            "opencode",
            f".opencode/{name}",
            "present",
            "project plugins or custom tools: code loaded into the agent",
            note="OpenCode auto-loads .opencode/plugin(s) and .opencode/tool(s)",
        )
        for name in ("plugin", "plugins", "tool", "tools")
    ),
)
"""Every admission rule, for every family. Documented in ``docs/security.md``."""

FAMILY_INCLUDES: Final[dict[str, tuple[str, ...]]] = {"cursor": ("claude",)}
"""Families that also load another family's configuration (Cursor reads Claude's)."""

KNOWN_FAMILIES: Final = frozenset({r.family for r in RULES} | set(FAMILY_INCLUDES) | {"builtin"})

SYSTEM_HOOK_FAMILIES: Final = frozenset({"cursor"})
"""Families that load the system-wide hook files."""

DEFAULT_SYSTEM_HOOK_PATHS: Final[tuple[Path, ...]] = (
    Path("/etc/cursor/hooks.json"),
    Path("/Library/Application Support/Cursor/hooks.json"),
)
"""Enterprise hook files Cursor loads for every project, whatever the workspace."""


@dataclass(frozen=True, slots=True)
class AdmissionFinding:
    """One refused (or, under the override, tolerated) piece of configuration."""

    rule: str
    family: str
    path: str
    """Relative to the repository root (the workspace without one); system paths as is."""
    reason: str

    def describe(self) -> str:
        return f"{self.path}: {self.reason} [{self.rule}]"


@dataclass(frozen=True, slots=True)
class AdmissionVerdict:
    """The outcome of :func:`admit`: plain data, convertible to canonical events."""

    workspace: str
    scanned: tuple[str, ...]
    """The directories checked, workspace-relative (``.``, ``..`` …)."""
    families: tuple[str, ...]
    refusals: tuple[AdmissionFinding, ...]
    warnings: tuple[AdmissionFinding, ...]
    overridden: bool

    @property
    def admitted(self) -> bool:
        return not self.refusals

    def events(self) -> list[SecurityAdmissionRefused]:
        """``security.admission_refused`` payloads: refusals, then tolerated findings."""
        out = [
            SecurityAdmissionRefused(control="admission", subject=f.path, reason=_reason(f))
            for f in self.refusals
        ]
        out.extend(
            SecurityAdmissionRefused(
                control="admission.override",
                subject=f.path,
                reason="allowed by allow_workspace_config: " + _reason(f),
            )
            for f in self.warnings
        )
        return out

    def raise_if_refused(self) -> None:
        """Raise :class:`SecurityError` naming every refusal."""
        if self.refusals:
            listed = "; ".join(f.describe() for f in self.refusals)
            raise SecurityError(
                f"workspace refused ({len(self.refusals)} finding(s)): {listed}. Remove the "
                "configuration, or set allow_workspace_config = true for this profile if you "
                "trust the repository"
            )

    def to_dict(self) -> JsonObject:
        def rows(items: Iterable[AdmissionFinding]) -> list[dict[str, str]]:
            return [
                {"rule": f.rule, "family": f.family, "path": f.path, "reason": f.reason}
                for f in items
            ]

        return {
            "admitted": self.admitted,
            "workspace": self.workspace,
            "scanned": list(self.scanned),
            "families": list(self.families),
            "overridden": self.overridden,
            "refusals": rows(self.refusals),
            "warnings": rows(self.warnings),
        }


def _reason(f: AdmissionFinding) -> str:
    return f"{f.family}: {f.reason} ({f.rule})"


def expand_families(families: Sequence[str]) -> tuple[str, ...]:
    """The families to check, with includes, in a stable order; unknown names refused."""
    out: list[str] = []
    pending = list(families)
    while pending:
        family = pending.pop(0)
        if family not in KNOWN_FAMILIES:
            raise ConfigError(
                f"unknown admission family {family!r} (known: {', '.join(sorted(KNOWN_FAMILIES))})"
            )
        if family not in out:
            out.append(family)
            pending.extend(FAMILY_INCLUDES.get(family, ()))
    return tuple(f for f in out if f != "builtin")


def find_git_root(workspace: Path) -> Path | None:
    """The nearest directory at or above ``workspace`` holding ``.git`` (dir or file)."""
    current = workspace
    while True:
        if os.path.lexists(current / ".git"):
            return current
        if current.parent == current:
            return None
        current = current.parent


def admit(
    workspace: Path,
    families: Sequence[str],
    *,
    allow_workspace_config: bool = False,
    system_paths: Sequence[Path] = DEFAULT_SYSTEM_HOOK_PATHS,
) -> AdmissionVerdict:
    """Check ``workspace`` (up to its git root) against the rules of ``families``."""
    ws = resolved_dir(workspace, "workspace")
    checked = expand_families(families)
    rules = [r for r in RULES if r.family in checked]
    levels = [ws]
    git_root = find_git_root(ws)
    if git_root is not None:
        current = ws
        while current != git_root:
            current = current.parent
            levels.append(current)
    findings: list[AdmissionFinding] = []
    base = git_root if git_root is not None else ws  # findings name paths from the repo root
    if rules:
        for level in levels:
            for rule in rules:
                findings.extend(_check_rule(base, level, rule))
    if any(f in SYSTEM_HOOK_FAMILIES for f in checked):
        for path in system_paths:
            if os.path.lexists(path):
                findings.append(
                    AdmissionFinding(
                        "system.hooks",
                        "cursor",
                        str(path),
                        "system-wide hooks: commands run on agent events in every workspace",
                    )
                )
    scanned = tuple(_rel(ws, level) for level in levels)
    if allow_workspace_config:
        return AdmissionVerdict(str(ws), scanned, checked, (), tuple(findings), True)
    return AdmissionVerdict(str(ws), scanned, checked, tuple(findings), (), False)


def _rel(ws: Path, path: Path) -> str:
    rel = os.path.relpath(path, ws)
    return PurePosixPath(*Path(rel).parts).as_posix() if rel != "." else "."


def _check_rule(ws: Path, level: Path, rule: ConfigRule) -> list[AdmissionFinding]:
    parts = PurePosixPath(rule.path).parts
    current = level
    for part in parts[:-1]:
        current = current / part
        try:
            st = current.lstat()
        except FileNotFoundError:
            return []
        except OSError as exc:
            return [
                _finding(ws, rule, current, f"cannot be inspected ({exc.strerror}); failing closed")
            ]
        if stat.S_ISLNK(st.st_mode):
            return [_finding(ws, rule, current, "is a symbolic link; failing closed")]
        if not stat.S_ISDIR(st.st_mode):
            return []
    last = parts[-1]
    if any(c in last for c in "*?["):
        try:
            names = sorted(os.listdir(current))
        except FileNotFoundError:
            return []
        except OSError as exc:
            return [
                _finding(ws, rule, current, f"cannot be listed ({exc.strerror}); failing closed")
            ]
        targets = [current / n for n in names if fnmatch.fnmatchcase(n, last)]
    else:
        targets = [current / last]
    out: list[AdmissionFinding] = []
    for target in targets:
        finding = _check_target(ws, rule, target)
        if finding is not None:
            out.append(finding)
    return out


def _check_target(ws: Path, rule: ConfigRule, target: Path) -> AdmissionFinding | None:
    try:
        st = target.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _finding(ws, rule, target, f"cannot be inspected ({exc.strerror}); failing closed")
    if rule.kind == "present":
        suffix = " (a symbolic link)" if stat.S_ISLNK(st.st_mode) else ""
        return _finding(ws, rule, target, rule.why + suffix)
    if stat.S_ISLNK(st.st_mode):
        return _finding(ws, rule, target, "is a symbolic link; failing closed")
    if not stat.S_ISREG(st.st_mode):
        return _finding(ws, rule, target, "is not a regular file; failing closed")
    if st.st_size > MAX_CONFIG_BYTES:
        return _finding(ws, rule, target, "is larger than 1 MiB; failing closed")
    try:
        raw = _read_config(target)
    except OSError as exc:
        return _finding(ws, rule, target, f"cannot be read ({exc.strerror}); failing closed")
    if len(raw) > MAX_CONFIG_BYTES:
        return _finding(ws, rule, target, "is larger than 1 MiB; failing closed")
    try:
        data = _parse(raw, rule.fmt)
    except ValueError as exc:
        return _finding(ws, rule, target, f"cannot be parsed ({exc}); failing closed")
    if not isinstance(data, dict):
        return _finding(ws, rule, target, "is not an object at the top level; failing closed")
    present = [k for k in rule.keys if _has_key(data, k)]
    if present:
        return _finding(ws, rule, target, f"sets {', '.join(present)}: {rule.why}")
    return None


def _read_config(path: Path) -> bytes:
    with open_regular(path) as fh:
        return fh.read(MAX_CONFIG_BYTES + 1)


def _parse(raw: bytes, fmt: str) -> Any:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    if fmt == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"invalid TOML: {exc}") from None
    if fmt == "jsonc":
        text = strip_jsonc(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON at line {exc.lineno}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


_JSONC_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas → JSON (strings are left untouched)."""

    def keep(m: re.Match[str]) -> str:
        token = m.group(0)
        if token.startswith('"'):
            return token
        # Keep line numbers stable for error messages.
        return "\n" * token.count("\n") if token.startswith("/*") else ""

    return _JSONC_TOKEN.sub(keep, text)


def _has_key(data: dict[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _finding(ws: Path, rule: ConfigRule, path: Path, reason: str) -> AdmissionFinding:
    return AdmissionFinding(rule.id, rule.family, _rel(ws, path), reason)
