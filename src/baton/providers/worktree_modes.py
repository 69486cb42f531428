"""In a task tree's own worktree, an agent may edit without asking: its edits are the diff.

With worktree isolation (``docs/worktrees.md``) what an agent writes inside its task tree's
worktree is checkpointed on the tree's branch and reviewed, as a diff, before anything
reaches the base. Asking about each of those edits as well only tires the human. So a
session working in a tree's worktree runs the agent in the mode in which it writes its
edits without asking, *provided that mode lets nothing else through*: commands, fetches,
edits outside the working folder still ask, and anything that touches ``.git`` is never
covered (the permission audit's worktree rule, :mod:`baton.requests.audit`).

:data:`WORKTREE_MODES` is that table, one row per family: the mode, what goes unasked in it,
what still asks, and whether baton selects it (``selected``: only edits go unasked). A
family whose edit mode also lets commands or fetches through keeps its asking mode in a
worktree too, and the row says why. :func:`in_worktree` is the profile a session in a
tree's worktree runs (the session opener applies it when the team loop says the session
works in one, never for the user's own checkout or a one-off ``baton run``);
:func:`verify_in_worktree` is :func:`~baton.providers.approval.verify` with the selected
mode classified ``contained_edits``. :func:`render_markdown` is the table in
``docs/agents.md`` and ``docs/worktrees.md`` (a test fails when they are stale). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from baton.agent_profile import AgentProfile
from baton.jsontypes import JsonMapping
from baton.providers.approval import (
    APPROVAL_TABLES,
    OPENCODE_ASK,
    ApprovalVerdict,
    opencode_allows,
    opencode_permission,
    permission_env,
    verify,
)

__all__ = [
    "OPENCODE_WORKTREE",
    "WORKTREE_MODES",
    "WorktreeMode",
    "in_worktree",
    "render_markdown",
    "verify_in_worktree",
]


@dataclass(frozen=True, slots=True)
class WorktreeMode:
    """One family's edit-without-asking mode, as a session in a tree's worktree sees it."""

    family: str
    mode: str | None
    """The ACP mode (``None``: OpenCode, whose approvals are its ``permission`` config)."""
    selected: bool
    """baton selects it in a worktree: only edits inside the working folder go unasked."""
    unasked: str
    """What the agent does without asking in this mode."""
    still_asks: str
    """What still reaches baton as a permission request."""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Variables set instead in a worktree (OpenCode's permission)."""
    why_not: str = ""
    """Why baton does not select it (what, besides edits, goes unasked)."""
    evidence: str = ""


OPENCODE_WORKTREE: Mapping[str, str] = MappingProxyType({**OPENCODE_ASK, "edit": "allow"})
"""OpenCode's permission in a tree's worktree: edits go through, commands, fetches and
paths outside the working folder (``external_directory``) still ask."""

_OPENCODE_STILL_ASK = ("bash", "webfetch", "external_directory")
"""Every one of these must be set and allow nothing for an OpenCode session to count as
``contained_edits``."""


def _rows(*modes: WorktreeMode) -> Mapping[str, WorktreeMode]:
    return MappingProxyType({m.family: m for m in modes})


WORKTREE_MODES: Mapping[str, WorktreeMode] = _rows(
    WorktreeMode(
        "claude",
        "acceptEdits",
        selected=True,
        unasked="file edits (Edit, Write, MultiEdit, NotebookEdit) inside the working folder",
        still_asks="commands (Bash), fetches and searches (WebFetch, WebSearch), edits outside "
        "the working folder; the `ask` rules baton seeds in its settings.json keep every "
        "command asking (acceptEdits alone runs mkdir, touch, mv, cp… unasked)",
        evidence="claude-agent-acp 0.101.0 against a scripted Messages server in a task tree's "
        "worktree (tests/integration/test_worktree_agents.py): a Write lands unasked, "
        "`mkdir … && touch …` asks (without the seeded `ask` rules it ran unasked)",
    ),
    WorktreeMode(
        "cursor",
        "agent",
        selected=True,
        unasked="file edits",
        still_asks="shell commands, fetches; edits outside the working folder are not known to "
        "ask (the audit flags each one)",
        evidence="recorded cursor-agent ACP sessions (agent mode: edits never ask, shell "
        "commands and fetches do); not run here",
    ),
    WorktreeMode(
        "opencode",
        None,
        selected=True,
        unasked="file edits inside the working folder (permission `edit: allow`)",
        still_asks="commands (`bash`), fetches (`webfetch`), paths outside the working folder "
        "(`external_directory`)",
        env=MappingProxyType({"OPENCODE_PERMISSION": permission_env(OPENCODE_WORKTREE)}),
        evidence="opencode-ai 1.18.33 against a scripted chat-completions server in a task "
        "tree's worktree (tests/integration/test_worktree_agents.py): an edit lands unasked, "
        "a bash command asks",
    ),
    WorktreeMode(
        "codex",
        "auto",
        selected=False,
        unasked="edits, and commands inside its sandbox (no network; writes in the working "
        "folder and /tmp); the TypeScript adapter's `workspace-write` is the same",
        still_asks="commands that leave the sandbox (network, writes elsewhere)",
        why_not="commands run without asking",
        evidence="the adapters' mode tables (Zed codex-acp 0.16.0 `auto`: on-request approvals "
        "in a workspace-write sandbox; @agentclientprotocol/codex-acp 2.6.0 `workspace-write`)",
    ),
    WorktreeMode(
        "gemini",
        "autoEdit",
        selected=False,
        unasked="edits (write_file, replace) and web fetches (web_fetch)",
        still_asks="shell commands",
        why_not="fetches run without asking",
        evidence="gemini-cli 0.61.0's built-in policy (policies/write.toml: autoEdit allows "
        "replace, write_file and web_fetch)",
    ),
    WorktreeMode(
        "qwen",
        "auto-edit",
        selected=False,
        unasked="edits and web fetches (every confirmation of type edit or info)",
        still_asks="shell commands",
        why_not="fetches run without asking",
        evidence="qwen-code 0.24.4's ACP agent (auto-edit approves edit and info confirmations)",
    ),
)


def in_worktree(profile: AgentProfile) -> AgentProfile:
    """The profile a session in a task tree's worktree runs: the family's selected edit
    mode instead of the asking mode baton selects (a mode the profile chose itself, a
    permission config of its own, ``worktree_edits = false``: unchanged)."""
    row = WORKTREE_MODES.get(profile.family)
    table = APPROVAL_TABLES.get(profile.family)
    if row is None or not row.selected or table is None or not profile.worktree_edits:
        return profile
    changes: dict[str, Any] = {}
    if row.mode is not None and profile.mode == table.select:
        changes["mode"] = row.mode
    if row.env and profile.env.get("OPENCODE_PERMISSION") == permission_env(OPENCODE_ASK):
        changes["env"] = MappingProxyType({**profile.env, **row.env})
    return dataclasses.replace(profile, **changes) if changes else profile


def verify_in_worktree(profile: AgentProfile, session_result: JsonMapping) -> ApprovalVerdict:
    """:func:`~baton.providers.approval.verify` for a session in a task tree's worktree: the
    family's selected edit mode is ``contained_edits`` there (any other mode as anywhere)."""
    row = WORKTREE_MODES.get(profile.family)
    if row is None or not row.selected:
        return verify(profile, session_result)
    why = (
        f"in the task's worktree: {row.unasked} without asking (reviewed as its diff); "
        f"{row.still_asks} still ask"
    )
    if row.mode is not None:
        return verify(profile, session_result, contained={row.mode: why})
    verdict = verify(profile, session_result)
    if verdict.klass != "self_approves" or not _opencode_contained(profile):
        return verdict
    return dataclasses.replace(verdict, klass="contained_edits", reason=why)


def _opencode_contained(profile: AgentProfile) -> bool:
    """Only edits go unasked: commands, fetches and outside paths are set and allow nothing."""
    permission = opencode_permission(profile)
    if permission is None:
        return False
    return all(
        key in permission and not opencode_allows(permission[key]) for key in _OPENCODE_STILL_ASK
    )


def render_markdown() -> str:
    """The table of ``docs/agents.md`` and ``docs/worktrees.md``: agent × mode × what asks."""
    lines = [
        "| agent | edit mode | goes unasked | still asks | in a task's worktree |",
        "|---|---|---|---|---|",
    ]
    for family in sorted(WORKTREE_MODES):
        row = WORKTREE_MODES[family]
        mode = f"`{row.mode}`" if row.mode else "permission `edit: allow`"
        kept = APPROVAL_TABLES[family].select
        there = "selected" if row.selected else f"not selected ({row.why_not}): keeps `{kept}`"
        lines.append(f"| {family} | {mode} | {row.unasked} | {row.still_asks} | {there} |")
    return "\n".join(lines) + "\n"
