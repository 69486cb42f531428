"""The ``[team]`` section of ``baton.toml``: who the role agents are and what they may do.

FCoP Core defines no roles and does not enforce routing (``actor`` grants no
authority; anyone can claim anything), so baton does: each role named here is
bound to an agent profile, gets a concurrency limit (how many sessions may work
for it at once), an MCP tool allowlist (tools not allowed are not even listed
to the agent) and a permission policy preset. A TASK whose ``recipient`` is not
a role here (nor one of its explicit ``aliases``) is refused with an ISSUE,
never routed by a guess. ``human`` (default ``ADMIN``) is the person: TASKs
and final REPORTs addressed to it become human requests, never agent work.

Parsing is pure (a mapping in, a frozen :class:`TeamConfig` out) and every
problem is a :class:`~baton.errors.ConfigError` naming the key.

Length: one configuration section, its frozen types, defaults and the check of
each key side by side (a key's meaning, default and refusal are changed together).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from baton.errors import ConfigError

__all__ = [
    "ALL_TOOLS",
    "DEFAULT_TOOLS",
    "FCOP_MCP_KEYS",
    "LEADER_TOOLS",
    "PERMISSION_PRESETS",
    "ROLE_KEYS",
    "TEAM_KEYS",
    "FcopMcpCompat",
    "Isolation",
    "RoleSpec",
    "TeamConfig",
    "default_team",
    "default_team_toml",
    "load_team",
    "parse_team",
]

ROLE_RE = re.compile(r"[A-Z][A-Z0-9_]{0,31}\Z")
"""Role codes: the FCoP convention, and what the built-in agent's ``- [ ] @ROLE`` accepts."""

ALL_TOOLS: tuple[str, ...] = (
    "read_task",
    "write_report",
    "write_issue",
    "list_reports",
    "ask_human",
    "create_task",
    "review_report",
)
"""Every tool baton's role-scoped MCP server can serve."""

LEADER_TOOLS = frozenset({"create_task", "review_report"})
"""Only the leader delegates and reviews (FCoP rule 4: others report to the leader)."""

DEFAULT_TOOLS: tuple[str, ...] = (
    "read_task",
    "write_report",
    "write_issue",
    "list_reports",
    "ask_human",
)

PERMISSION_PRESETS = ("ask", "reads", "all", "none")
"""How an agent's permission requests are answered: the human, or a preset rule.

``ask`` escalates every request to the human; ``reads`` allows read/search
kinds and escalates the rest; ``all`` allows everything (the offline built-in
demo); ``none`` denies everything.
"""

ChildAcceptance = Literal["on_consolidation", "explicit"]

TEAM_KEYS = frozenset(
    {
        "name",
        "leader",
        "human",
        "child_acceptance",
        "turn_limit",
        "reminder_turns",
        "zero_tool_limit",
        "zero_tool_cooldown",
        "answer_timeout",
        "max_task_bytes",
        "quarantine",
        "roles",
        "fcop_mcp",
        "isolation",
        "base",
        "worktrees_dir",
        "merge",
    }
)
ROLE_KEYS = frozenset({"agent", "concurrency", "tools", "permissions", "description", "aliases"})
FCOP_MCP_KEYS = frozenset({"enabled", "python"})
_MAX_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """One role agent: its profile, how many sessions, which tools, which policy."""

    name: str
    agent: str
    concurrency: int = 1
    tools: tuple[str, ...] = DEFAULT_TOOLS
    permissions: str = "ask"
    is_leader: bool = False
    description: str = ""
    aliases: tuple[str, ...] = ()

    def allows(self, tool: str) -> bool:
        return tool in self.tools


@dataclass(frozen=True, slots=True)
class Isolation:
    """Where a task tree's agents work: its own branch and worktree, or the one checkout."""

    mode: Literal["worktree", "none"] = "worktree"
    """``worktree`` (the default; a folder that is not a git repository runs as ``none``)."""
    base: str | None = None
    """The branch task branches come from and merge into (None: the branch checked out
    in the main checkout when the tree is first dispatched)."""
    worktrees_dir: str | None = None
    """Where worktrees live (relative to the project; None: ``.baton/worktrees``)."""
    merge: Literal["merge", "squash", "ff"] = "merge"
    """How an approved tree reaches its base."""
    remote: bool = False
    """The project has ``[cluster]``: a tree's worktree lives on the worker host that holds
    the role, the coordinator's checkout keeps only its branch (``docs/cluster.md``)."""


@dataclass(frozen=True, slots=True)
class FcopMcpCompat:
    """Opt-in: inject the stock ``fcop-mcp`` server instead of baton's (no allowlist, no T4)."""

    enabled: bool = False
    python: Path | None = None
    """The interpreter of the dedicated ``fcop-mcp`` venv (it pins fastmcp exactly)."""


@dataclass(frozen=True, slots=True)
class TeamConfig:
    """The whole team, validated."""

    roles: Mapping[str, RoleSpec]
    leader: str
    human: str = "ADMIN"
    name: str = "team"
    child_acceptance: ChildAcceptance = "on_consolidation"
    """``on_consolidation``: the leader's consolidated REPORT accepts the children it
    covers (baton records an acceptance REVIEW by the leader for each). ``explicit``:
    the leader must call ``review_report`` for every child REPORT."""
    turn_limit: int = 8
    """Prompts per TASK (all kinds together) before baton stalls it with an ISSUE."""
    reminder_turns: int = 1
    """Extra turns for a role that ended a turn without a REPORT."""
    zero_tool_limit: int = 3
    """Consecutive turns without a tool call before a role's circuit breaker opens."""
    zero_tool_cooldown: float = 300.0
    answer_timeout: float = 3600.0
    """Seconds an agent's request (a permission, a question, a form) waits for the human
    before it is refused, so the turn goes on (reviews wait as long as it takes)."""
    max_task_bytes: int = 1024 * 1024
    """A TASK file larger than this is hostile: refused unread, with an ISSUE."""
    quarantine: bool = True
    """Move hostile inbox entries out of ``fcop/`` (they break Core's O(n) scans)."""
    fcop_mcp: FcopMcpCompat = field(default_factory=FcopMcpCompat)
    isolation: Isolation = field(default_factory=Isolation)

    def role_for(self, recipient: str) -> RoleSpec | None:
        """The role a TASK ``recipient`` routes to, by exact name or declared alias."""
        spec = self.roles.get(recipient)
        if spec is not None:
            return spec
        for candidate in self.roles.values():
            if recipient in candidate.aliases:
                return candidate
        return None

    @property
    def leader_spec(self) -> RoleSpec:
        return self.roles[self.leader]

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(self.roles)


# --------------------------------------------------------------------------- parse


def _int(value: Any, where: str, *, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: must be an integer")
    if value < low or (high is not None and value > high):
        span = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{where}: must be {span} (got {value})")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: must be a non-empty string")
    return value


def _role_name(value: str, where: str) -> str:
    if not ROLE_RE.fullmatch(value):
        raise ConfigError(
            f"{where}: role {value!r} must be upper-case letters, digits and _ (e.g. DEV, QA_2)"
        )
    return value


def _parse_role(
    name: str,
    section: Any,
    *,
    leader: str,
    known_profiles: Collection[str] | None,
) -> RoleSpec:
    where = f"[team.roles.{name}]"
    _role_name(name, where)
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(section) - ROLE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}")
    agent = _str(section.get("agent"), f"{where} agent")
    if known_profiles is not None and agent not in known_profiles:
        raise ConfigError(
            f"{where} agent: unknown agent profile {agent!r} (known: {', '.join(sorted(known_profiles))})"
        )
    is_leader = name == leader
    default_tools = (*DEFAULT_TOOLS, *sorted(LEADER_TOOLS)) if is_leader else DEFAULT_TOOLS
    raw_tools = section.get("tools", list(default_tools))
    if not isinstance(raw_tools, list) or not all(isinstance(t, str) for t in raw_tools):
        raise ConfigError(f"{where} tools: must be a list of tool names")
    unknown_tools = sorted(set(raw_tools) - set(ALL_TOOLS))
    if unknown_tools:
        raise ConfigError(
            f"{where} tools: unknown {', '.join(unknown_tools)} (known: {', '.join(ALL_TOOLS)})"
        )
    if "write_report" not in raw_tools:
        raise ConfigError(
            f"{where} tools: must include write_report (a role must be able to finish)"
        )
    if not is_leader and LEADER_TOOLS & set(raw_tools):
        raise ConfigError(
            f"{where} tools: {', '.join(sorted(LEADER_TOOLS & set(raw_tools)))} are for the "
            f"leader ({leader}) only"
        )
    tools = tuple(t for t in ALL_TOOLS if t in raw_tools)
    permissions = section.get("permissions", "ask")
    if permissions not in PERMISSION_PRESETS:
        raise ConfigError(
            f"{where} permissions: {permissions!r} is not one of {', '.join(PERMISSION_PRESETS)}"
        )
    aliases_raw = section.get("aliases", [])
    if not isinstance(aliases_raw, list) or not all(isinstance(a, str) and a for a in aliases_raw):
        raise ConfigError(f"{where} aliases: must be a list of recipient names")
    description = section.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where} description: must be a string")
    return RoleSpec(
        name=name,
        agent=agent,
        concurrency=_int(
            section.get("concurrency", 1), f"{where} concurrency", low=1, high=_MAX_CONCURRENCY
        ),
        tools=tools,
        permissions=str(permissions),
        is_leader=is_leader,
        description=description,
        aliases=tuple(aliases_raw),
    )


def parse_team(
    raw: Mapping[str, Any],  # TOML in: every key checked below
    *,
    known_profiles: Collection[str] | None = None,
    on_cluster: bool = False,
) -> TeamConfig:
    """Validate a ``[team]`` table (the mapping under the ``team`` key).

    ``on_cluster``: the project has ``[cluster]``: a task tree's worktree then lives on the
    worker host that holds the role (:attr:`Isolation.remote`, docs/cluster.md)."""
    if not isinstance(raw, Mapping):
        raise ConfigError("[team] must be a table")
    unknown = sorted(set(raw) - TEAM_KEYS)
    if unknown:
        raise ConfigError(f"[team]: unknown keys {', '.join(unknown)}")
    leader = _role_name(_str(raw.get("leader", "PM"), "[team] leader"), "[team] leader")
    human = _role_name(_str(raw.get("human", "ADMIN"), "[team] human"), "[team] human")
    roles_raw = raw.get("roles")
    if not isinstance(roles_raw, Mapping) or not roles_raw:
        raise ConfigError("[team.roles]: define at least the leader, e.g. [team.roles.PM]")
    if human in roles_raw:
        raise ConfigError(f"[team.roles.{human}]: {human} is the human, not an agent role")
    if leader not in roles_raw:
        raise ConfigError(f"[team] leader: {leader} has no [team.roles.{leader}] table")
    roles = {
        name: _parse_role(name, section, leader=leader, known_profiles=known_profiles)
        for name, section in roles_raw.items()
    }
    seen: dict[str, str] = {}
    for spec in roles.values():
        for alias in spec.aliases:
            if alias in roles or alias == human or alias in seen:
                raise ConfigError(
                    f"[team.roles.{spec.name}] aliases: {alias!r} already names "
                    f"{seen.get(alias, alias)}"
                )
            seen[alias] = spec.name
    child_acceptance = raw.get("child_acceptance", "on_consolidation")
    if child_acceptance not in ("on_consolidation", "explicit"):
        raise ConfigError(
            "[team] child_acceptance: must be 'on_consolidation' or 'explicit' "
            f"(got {child_acceptance!r})"
        )
    quarantine = raw.get("quarantine", True)
    if not isinstance(quarantine, bool):
        raise ConfigError("[team] quarantine: must be true or false")
    cooldown = raw.get("zero_tool_cooldown", 300)
    if isinstance(cooldown, bool) or not isinstance(cooldown, int | float) or cooldown < 0:
        raise ConfigError("[team] zero_tool_cooldown: must be a number of seconds >= 0")
    answer_timeout = raw.get("answer_timeout", 3600)
    if (
        isinstance(answer_timeout, bool)
        or not isinstance(answer_timeout, int | float)
        or not 1 <= answer_timeout <= 7 * 86400
    ):
        raise ConfigError("[team] answer_timeout: must be a number of seconds from 1 to 604800")
    name = raw.get("name", "team")
    if not isinstance(name, str) or not name:
        raise ConfigError("[team] name: must be a non-empty string")
    return TeamConfig(
        roles=MappingProxyType(roles),
        leader=leader,
        human=human,
        name=name,
        child_acceptance=child_acceptance,
        turn_limit=_int(raw.get("turn_limit", 8), "[team] turn_limit", low=1, high=1000),
        reminder_turns=_int(raw.get("reminder_turns", 1), "[team] reminder_turns", low=0, high=10),
        zero_tool_limit=_int(raw.get("zero_tool_limit", 3), "[team] zero_tool_limit", low=1),
        zero_tool_cooldown=float(cooldown),
        answer_timeout=float(answer_timeout),
        max_task_bytes=_int(
            raw.get("max_task_bytes", 1024 * 1024), "[team] max_task_bytes", low=1024
        ),
        quarantine=quarantine,
        fcop_mcp=_parse_compat(raw.get("fcop_mcp", {})),
        isolation=_parse_isolation(raw, on_cluster=on_cluster),
    )


_BRANCH_RE = re.compile(r"[A-Za-z0-9._/-]{1,200}\Z")


def _parse_isolation(raw: Mapping[str, Any], *, on_cluster: bool = False) -> Isolation:
    mode = raw.get("isolation", "worktree")
    if mode not in ("worktree", "none"):
        raise ConfigError(f"[team] isolation: must be 'worktree' or 'none' (got {mode!r})")
    merge = raw.get("merge", "merge")
    if merge not in ("merge", "squash", "ff"):
        raise ConfigError(f"[team] merge: must be 'merge', 'squash' or 'ff' (got {merge!r})")
    base = raw.get("base")
    if base is not None:
        base = _str(base, "[team] base")
        if not _BRANCH_RE.fullmatch(base) or ".." in base or base.startswith(("-", "/")):
            raise ConfigError(f"[team] base: {base!r} is not a branch name (e.g. main)")
        base = base.removeprefix("refs/heads/")
    directory = raw.get("worktrees_dir")
    if directory is not None:
        directory = _str(directory, "[team] worktrees_dir")
        if Path(directory).is_absolute() or ".." in Path(directory).parts:
            raise ConfigError(
                "[team] worktrees_dir: must be a folder inside the project (e.g. .baton/worktrees)"
            )
    return Isolation(mode=mode, base=base, worktrees_dir=directory, merge=merge, remote=on_cluster)


def _parse_compat(section: Any) -> FcopMcpCompat:
    where = "[team.fcop_mcp]"
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(section) - FCOP_MCP_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}")
    enabled = section.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where} enabled: must be true or false")
    python_raw = section.get("python")
    python = None
    if python_raw is not None:
        python = Path(_str(python_raw, f"{where} python")).expanduser()
        if not python.is_absolute():
            raise ConfigError(f"{where} python: must be an absolute path to the venv's python")
    if enabled and python is None:
        raise ConfigError(
            f"{where}: enabled needs python = the interpreter of fcop-mcp's own venv "
            "(e.g. /opt/fcop-mcp/bin/python); it is never taken from PATH"
        )
    return FcopMcpCompat(enabled=enabled, python=python)


def load_team(config_path: Path, *, known_profiles: Collection[str] | None = None) -> TeamConfig:
    """Read ``[team]`` from ``baton.toml``; the default team when the section is absent."""
    try:
        raw = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default_team()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{config_path}: {exc}") from exc
    section = raw.get("team")
    if section is None:
        return default_team()
    return parse_team(section, known_profiles=known_profiles)


# ------------------------------------------------------------------------ defaults

_DEFAULT_TOML = """\
# The FCoP team baton coordinates (`baton up`). ADMIN is you, the human.
[team]
name = "default"
leader = "PM"                        # delegates with create_task, reports to ADMIN
human = "ADMIN"
child_acceptance = "on_consolidation"  # or "explicit": the leader calls review_report
turn_limit = 8                       # prompts per task before it stalls with an ISSUE
reminder_turns = 1                   # extra turn for a role that ended without a report
zero_tool_limit = 3                  # consecutive zero-tool-call turns before a role pauses
zero_tool_cooldown = 300             # seconds a paused role rests
max_task_bytes = 1048576             # larger TASK files are refused unread (hostile)
quarantine = true                    # move hostile inbox files to .baton/quarantine/
isolation = "worktree"               # each task tree works on its own branch and worktree
                                     # (.baton/worktrees/; with [cluster], on the worker
                                     # that holds the role); "none": agents edit this checkout
merge = "merge"                      # an approved tree reaches its base by "merge", "squash" or "ff"
# base = "main"                      # default: the branch checked out when a tree starts

# Every role runs on the built-in agent so `baton up` works offline. Point a role
# at another profile (e.g. agent = "opencode") to use a real coding agent, and
# set permissions = "ask" so its edits and commands come to you first.
[team.roles.PM]
agent = "builtin"
concurrency = 1
tools = ["read_task", "write_report", "write_issue", "list_reports", "ask_human",
         "create_task", "review_report"]
permissions = "all"
description = "Leader: splits work into tasks for the team and consolidates their reports."

[team.roles.DEV]
agent = "builtin"
concurrency = 1
tools = ["read_task", "write_report", "write_issue", "list_reports", "ask_human"]
permissions = "all"
description = "Developer: implements changes."

[team.roles.QA]
agent = "builtin"
concurrency = 1
tools = ["read_task", "write_report", "write_issue", "list_reports", "ask_human"]
permissions = "all"
description = "QA: tests and verifies."

[team.roles.OPS]
agent = "builtin"
concurrency = 1
tools = ["read_task", "write_report", "write_issue", "list_reports", "ask_human"]
permissions = "all"
description = "Operations: builds, deploys, runs checks."

# Opt-in: give agents the stock fcop-mcp server instead of baton's role-scoped one.
# It lives in its own venv (it pins fastmcp exactly), is launched with --root, and
# cannot approve (no trusted evaluator), so baton still closes the loop.
# [team.fcop_mcp]
# enabled = true
# python = "/opt/fcop-mcp/bin/python"
"""


def default_team_toml() -> str:
    """The ``[team]`` text ``baton init`` writes into a new ``baton.toml``."""
    return _DEFAULT_TOML


def default_team(*, on_cluster: bool = False) -> TeamConfig:
    """The team ``default_team_toml`` describes."""
    return parse_team(tomllib.loads(_DEFAULT_TOML)["team"], on_cluster=on_cluster)
