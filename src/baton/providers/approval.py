"""Who approves an agent's mutations: the approval mode baton selects and verifies.

baton's promise is that a human or an explicit policy decides every mutation. Many agents
have modes in which they decide for themselves (Claude ``auto``/``acceptEdits``, Codex
``auto``/``agent``/``full-access``, Gemini ``yolo``). So, per provider family, this module
says which mode baton selects (the profile's ``mode``), and classifies every mode the
agent may report:

``asks``
    mutating tools ask the client (``session/request_permission``) first;
``read_only``
    the agent cannot mutate at all in this mode (planning, asking);
``contained_edits``
    only in a task tree's own worktree: the agent writes its edits there without asking
    (they are reviewed as the tree's diff), and everything else still asks
    (:mod:`baton.providers.worktree_modes` says which mode of which family);
``self_approves``
    the agent (or a model reviewer, a sandbox, an allowlist) approves mutations itself;
``unknown``
    baton has no verified knowledge of this family or mode.

:func:`verify` reads the *effective* mode from what the agent advertises after baton's
settings were applied (the ``mode`` config option and the legacy ``modes`` object; when
they disagree, the less safe one counts), and for OpenCode, whose approvals come from its
``permission`` configuration rather than an ACP mode, from the profile's own configuration.
The runner refuses a ``self_approves`` session unless the profile says
``agent_approves = true`` (then it runs, flagged by ``security.approval_bypass``). Pure code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from baton.agent_profile import AgentProfile
from baton.jsontypes import JsonMapping, JsonObject, JsonValue

__all__ = [
    "APPROVAL_TABLES",
    "OPENCODE_ASK",
    "ApprovalClass",
    "ApprovalTable",
    "ApprovalVerdict",
    "ModeRule",
    "advertised_mode",
    "opencode_allows",
    "opencode_permission",
    "permission_env",
    "verify",
]

ApprovalClass = Literal["asks", "read_only", "contained_edits", "self_approves", "unknown"]


@dataclass(frozen=True, slots=True)
class ModeRule:
    klass: ApprovalClass
    why: str


@dataclass(frozen=True, slots=True)
class ApprovalTable:
    """What baton knows about one family's approval modes."""

    family: str
    select: str | None
    """The mode the built-in profile selects (``None``: the family has no approval modes)."""
    modes: Mapping[str, ModeRule] = field(default_factory=lambda: MappingProxyType({}))
    evidence: str = ""
    """How the classification was established (a test, a recording, the agent's docs)."""


def _rules(modes: Mapping[str, tuple[ApprovalClass, str]]) -> Mapping[str, ModeRule]:
    return MappingProxyType({name: ModeRule(*rule) for name, rule in modes.items()})


_CLAUDE = ApprovalTable(
    "claude",
    select="default",
    modes=_rules(
        {
            "default": ("asks", "asks before every edit and command (session/request_permission)"),
            "plan": ("read_only", "plans only; asks before leaving plan mode"),
            "acceptEdits": ("self_approves", "accepts every file edit itself"),
            "auto": ("self_approves", "a classifier decides permissions instead of the client"),
            "dontAsk": (
                "self_approves",
                "never asks: runs what its allow rules permit, denies the rest",
            ),
            "bypassPermissions": ("self_approves", "skips every permission check"),
        }
    ),
    evidence="claude-agent-acp 0.101.0 against a scripted Messages server "
    "(tests/integration/test_claude_baton.py); it starts in `auto` with an empty config dir",
)

_CODEX = ApprovalTable(
    "codex",
    select="read-only",
    modes=_rules(
        {
            "read-only": ("asks", "read-only sandbox: every edit and command outside it asks"),
            "auto": ("self_approves", "writes and runs commands inside its sandbox without asking"),
            "workspace-write": ("self_approves", "writes inside its sandbox without asking"),
            "edit-internal": ("self_approves", "writes inside its sandbox without asking"),
            "agent": (
                "self_approves",
                "a model reviewer (Guardian) approves instead of the client",
            ),
            "full-access": ("self_approves", "no sandbox and no approvals"),
            "agent-full-access": ("self_approves", "no sandbox and no approvals"),
        }
    ),
    evidence="Zed codex-acp 0.16.0 against a scripted Responses server "
    "(tests/integration/test_codex_baton.py); the TypeScript adapter "
    "(@agentclientprotocol/codex-acp 2.6.0, probed offline) offers read-only, "
    "workspace-write, agent (auto review) and agent-full-access and starts in `agent`",
)

_GEMINI = ApprovalTable(
    "gemini",
    select="default",
    modes=_rules(
        {
            "default": ("asks", "asks before edits and shell commands"),
            "plan": ("read_only", "read-only planning"),
            "autoEdit": ("self_approves", "applies edits without asking"),
            "yolo": ("self_approves", "approves every tool call itself"),
        }
    ),
    evidence="gemini-cli 0.61.0 advertises default, autoEdit, yolo and plan and starts in "
    "`default` (probed with a dummy key); no turn is run here",
)

_QWEN = ApprovalTable(
    "qwen",
    select="default",
    modes=_rules(
        {
            "default": ("asks", "asks before edits and shell commands"),
            "plan": ("read_only", "analyzes only; no edits or commands"),
            "auto-edit": ("self_approves", "applies edits without asking"),
            "auto": ("self_approves", "an LLM classifier approves actions instead of the client"),
            "yolo": ("self_approves", "approves every tool call itself"),
        }
    ),
    evidence="qwen-code 0.24.4 against scripted chat completions "
    "(tests/integration/test_qwen_baton.py); it starts in `auto`",
)

_CURSOR = ApprovalTable(
    "cursor",
    select="plan",
    modes=_rules(
        {
            "agent": (
                "self_approves",
                "edits are written without asking (only shell commands and fetches ask)",
            ),
            "plan": ("read_only", "edits are blocked by the mode; shell commands ask"),
            "ask": ("read_only", "answers questions; no edits"),
        }
    ),
    evidence="recorded cursor-agent ACP sessions (agent mode: edits never ask); not run here",
)

_CURSOR_SDK = ApprovalTable(
    "cursor-sdk",
    select="ask",
    modes=_rules(
        {
            "ask": (
                "asks",
                "built-in tools are read-only; writes and commands exist only as baton's custom "
                "tools, each asked through session/request_permission",
            ),
            "agent": (
                "self_approves",
                "Cursor's default toolset edits files and runs commands; the SDK asks no client",
            ),
        }
    ),
    evidence="the cursor-sdk transport realizes the mode as AgentOptions.tools (an allowlist) "
    "plus baton's custom tools; tested through the real cursor-sdk 1.1.0 client against "
    "baton's scripted bridge (tests/cursor_sdk_transport)",
)

_BUILTIN = ApprovalTable(
    "builtin",
    select=None,
    modes=_rules(
        {"runbook": ("asks", "its one mode: every step asks through session/request_permission")}
    ),
    evidence="baton's own runbook agent asks for every tool call through the client",
)

_OPENCODE = ApprovalTable(
    "opencode",
    select=None,
    evidence="opencode-ai 1.18.33: approvals follow its `permission` config (OPENCODE_PERMISSION); "
    "its ACP `mode` option (build/plan) is not an approval mode",
)

APPROVAL_TABLES: Mapping[str, ApprovalTable] = MappingProxyType(
    {
        t.family: t
        for t in (_BUILTIN, _CLAUDE, _CODEX, _GEMINI, _OPENCODE, _QWEN, _CURSOR, _CURSOR_SDK)
    }
)

OPENCODE_ASK: Mapping[str, str] = MappingProxyType(
    {"edit": "ask", "bash": "ask", "webfetch": "ask", "external_directory": "ask"}
)
"""The OpenCode permission baton sets (``OPENCODE_PERMISSION``): edits, commands and
fetches ask the client, and OpenCode then writes through ``fs/write_text_file``."""

_OPENCODE_MUTATING = ("edit", "write", "patch", "bash")


@dataclass(frozen=True, slots=True)
class ApprovalVerdict:
    """The effective approval behaviour of one session."""

    family: str
    mode: str | None
    klass: ApprovalClass
    reason: str
    source: str
    """Where the mode was read: ``configOptions``, ``modes``, ``profile``, ``none``."""

    @property
    def self_approves(self) -> bool:
        return self.klass == "self_approves"

    def message(self) -> str:
        shown = f"mode {self.mode!r}" if self.mode is not None else "its configuration"
        return f"{self.family} in {shown}: {self.reason} (read from {self.source})"


def _option_mode(options: Any) -> str | None:
    if not isinstance(options, Sequence) or isinstance(options, str | bytes):
        return None
    for option in options:
        if not isinstance(option, Mapping):
            continue
        if option.get("id") == "mode" or option.get("category") == "mode":
            value = option.get("currentValue")
            return value if isinstance(value, str) else None
    return None


def _legacy_mode(modes: Any) -> str | None:
    if isinstance(modes, Mapping):
        current = modes.get("currentModeId")
        return current if isinstance(current, str) else None
    return None


def advertised_mode(session_result: JsonMapping) -> list[tuple[str, str]]:
    """Every ``(source, mode)`` the agent advertises (config option first, then legacy)."""
    found: list[tuple[str, str]] = []
    option = _option_mode(session_result.get("configOptions"))
    if option is not None:
        found.append(("configOptions", option))
    legacy = _legacy_mode(session_result.get("modes"))
    if legacy is not None:
        found.append(("modes", legacy))
    return found


_RANK: Mapping[ApprovalClass, int] = MappingProxyType(
    {"read_only": 0, "asks": 1, "contained_edits": 2, "unknown": 3, "self_approves": 4}
)


def verify(
    profile: AgentProfile,
    session_result: JsonMapping,
    *,
    contained: Mapping[str, str] = MappingProxyType({}),
) -> ApprovalVerdict:
    """The effective approval behaviour of a session of ``profile`` (see the module doc);
    ``contained``: self-approving modes that are ``contained_edits`` here, and why (in a
    task tree's worktree, :mod:`baton.providers.worktree_modes`)."""
    family = profile.family
    if family == "opencode":
        return _opencode(profile)
    table = APPROVAL_TABLES.get(family)
    modes = advertised_mode(session_result)
    if table is None:
        mode = modes[0][1] if modes else None
        return ApprovalVerdict(
            family,
            mode,
            "unknown",
            "baton has no approval table for this family; the permission audit is the check",
            modes[0][0] if modes else "none",
        )
    if not modes:
        if not table.modes or table.select is None:  # approvals do not hang on a mode
            return ApprovalVerdict(family, None, "asks", table.evidence, "profile")
        return ApprovalVerdict(
            family,
            None,
            "unknown",
            "the agent advertised no mode, so baton cannot verify who approves",
            "none",
        )
    worst: ApprovalVerdict | None = None
    for source, mode in modes:
        rule = table.modes.get(mode)
        if rule is None:
            verdict = ApprovalVerdict(
                family,
                mode,
                "unknown",
                f"mode {mode!r} is not one baton has classified for {family}",
                source,
            )
        elif rule.klass == "self_approves" and mode in contained:
            verdict = ApprovalVerdict(family, mode, "contained_edits", contained[mode], source)
        else:
            verdict = ApprovalVerdict(family, mode, rule.klass, rule.why, source)
        if worst is None or _RANK[verdict.klass] > _RANK[worst.klass]:
            worst = verdict
    assert worst is not None
    return worst


def permission_env(permission: Mapping[str, str]) -> str:
    """An OpenCode permission as the ``OPENCODE_PERMISSION`` value baton sets."""
    return json.dumps(dict(permission), sort_keys=True)


def opencode_permission(profile: AgentProfile) -> JsonObject | None:
    """The ``permission`` an OpenCode profile's inline configuration gives it (the
    ``OPENCODE_PERMISSION`` variable over ``OPENCODE_CONFIG_CONTENT``'s), ``None`` when
    either is not JSON."""
    permission: dict[str, Any] = {}
    content = profile.env.get("OPENCODE_CONFIG_CONTENT")
    for text in (content, profile.env.get("OPENCODE_PERMISSION")):
        if not text:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if text is content:
            value = value.get("permission") if isinstance(value, Mapping) else None
        if isinstance(value, Mapping):
            permission.update(value)
        elif isinstance(value, str):
            permission = dict.fromkeys(_OPENCODE_MUTATING, value)
    return permission


def _opencode(profile: AgentProfile) -> ApprovalVerdict:
    """OpenCode asks only for what its ``permission`` config says ``ask``."""
    permission = opencode_permission(profile)
    if permission is None:
        return ApprovalVerdict(
            "opencode", None, "unknown", "its inline configuration is not JSON", "profile"
        )
    allowing = [
        key for key in _OPENCODE_MUTATING if key in permission and opencode_allows(permission[key])
    ]
    unset = [key for key in ("edit", "bash") if key not in permission]
    if allowing:
        return ApprovalVerdict(
            "opencode",
            None,
            "self_approves",
            f"its permission config allows {', '.join(allowing)} without asking",
            "profile",
        )
    if unset:
        return ApprovalVerdict(
            "opencode",
            None,
            "self_approves",
            f"its permission config leaves {', '.join(unset)} unset, and OpenCode then acts "
            "without asking",
            "profile",
        )
    return ApprovalVerdict(
        "opencode", None, "asks", "its permission config asks for edits and commands", "profile"
    )


def opencode_allows(value: JsonValue) -> bool:
    """Whether an OpenCode permission value lets something through unasked (``allow``, or a
    pattern table with an ``allow``)."""
    if isinstance(value, str):
        return value == "allow"
    if isinstance(value, Mapping):
        return any(opencode_allows(v) for v in value.values())
    return False
