"""The built-in agent profiles.

Commands and flags follow each harness's documented ACP entry point (see
``docs/agents.md``). Credentials are listed as *bindable* names only: a profile
receives a credential when the user binds it in ``baton.toml``; nothing is taken
from the shell by default.

Each profile selects the approval mode in which the agent's mutating tools ask baton
(:mod:`baton.providers.approval` says why, and verifies it at session start); in a task
tree's own worktree, the family's edit-without-asking mode where one lets only edits through
(:mod:`baton.providers.worktree_modes`). Each names the npm package and exact version
``baton agents install`` installs and pins.
"""

from __future__ import annotations

import json
from types import MappingProxyType

from baton.agent_profile import PYTHON_PLACEHOLDER, AgentProfile, SeedFile
from baton.providers.approval import APPROVAL_TABLES, OPENCODE_ASK, permission_env
from baton.providers.cursor_sdk.tables import BUNDLED_BRIDGE

__all__ = [
    "BUILTIN",
    "BUILTIN_PROFILES",
    "CLAUDE",
    "CLAUDE_ASK",
    "CODEX",
    "CURSOR",
    "CURSOR_SDK",
    "GEMINI",
    "OPENCODE",
    "QWEN",
]

_NODE_PRIVATE = {"NODE_COMPILE_CACHE": "cache/node-compile"}

CLAUDE_ASK = ("Bash", "WebFetch", "WebSearch")
"""Claude Code tools that ask in every mode (``permissions.ask`` in its seeded settings)."""

BUILTIN = AgentProfile(
    name="builtin",
    title="baton runbook agent (built in, no model)",
    command=(PYTHON_PLACEHOLDER, "-m", "baton.agents.builtin"),
    family="builtin",
    private_dirs=MappingProxyType({"BATON_AGENT_STATE_DIR": "state"}),
    admission=(),
    initialize_timeout=15.0,
    session_timeout=15.0,
    turn_timeout=900.0,
    install_hint="ships with baton",
)

CURSOR = AgentProfile(
    name="cursor",
    title="Cursor Agent",
    command=("agent", "--disable-project-configs", "--disable-auto-update", "acp"),
    family="cursor",
    env=MappingProxyType({"AGENT_CLI_CREDENTIAL_STORE": "memory", "NO_OPEN_BROWSER": "1"}),
    private_dirs=MappingProxyType(
        {
            "CURSOR_CONFIG_DIR": "cursor/config",
            "CURSOR_DATA_DIR": "cursor/data",
            **_NODE_PRIVATE,
        }
    ),
    admission=("cursor", "claude"),
    client_meta=MappingProxyType({"subagents": True}),
    mode=APPROVAL_TABLES["cursor"].select,
    install_hint="curl https://cursor.com/install | bash  (then bind CURSOR_API_KEY)",
)

CURSOR_SDK = AgentProfile(
    name="cursor-sdk",
    title="Cursor Agent through the Cursor SDK (cursor-sdk bridge)",
    command=(BUNDLED_BRIDGE,),
    family="cursor-sdk",
    transport="cursor-sdk",
    env=MappingProxyType({"NO_OPEN_BROWSER": "1"}),
    private_dirs=MappingProxyType(
        {
            # The bridge keeps its local agents here: a role session's persistent private
            # root keeps them across restarts, so the agent is resumed by its id.
            "CURSOR_SDK_BRIDGE_STATE_ROOT": "cursor-sdk/state",
            **_NODE_PRIVATE,
        }
    ),
    admission=("cursor", "claude"),
    mode=APPROVAL_TABLES["cursor-sdk"].select,
    install_hint="pip install 'baton[cursor]'  (cursor-sdk 1.1.0; then bind CURSOR_API_KEY)",
    initialize_timeout=60.0,
)

CLAUDE = AgentProfile(
    name="claude",
    title="Claude Code (claude-agent-acp)",
    command=("claude-agent-acp",),
    family="claude",
    env=MappingProxyType(
        {
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
    ),
    private_dirs=MappingProxyType({"CLAUDE_CONFIG_DIR": "claude/config", **_NODE_PRIVATE}),
    admission=("claude",),
    # Only the private user scope ($CLAUDE_CONFIG_DIR/settings.json, seeded below): the
    # repository's .claude/settings*.json (an allow list that would approve tools behind
    # baton's back) is not loaded at all.
    session_meta=MappingProxyType({"claudeCode": {"options": {"settingSources": ["user"]}}}),
    mode=APPROVAL_TABLES["claude"].select,
    # With an empty config dir claude-agent-acp starts in `auto` (it approves itself);
    # the setting makes even the first moments of the session ask. The `ask` rules make
    # every command and fetch ask in every mode: `acceptEdits` (a task tree's worktree)
    # would otherwise run filesystem commands (mkdir, touch, mv, cp…) unasked.
    files=(
        SeedFile(
            "$CLAUDE_CONFIG_DIR/settings.json",
            content=json.dumps(
                {"permissions": {"defaultMode": "default", "ask": list(CLAUDE_ASK)}}, indent=2
            )
            + "\n",
        ),
    ),
    package="@agentclientprotocol/claude-agent-acp",
    version="0.101.0",
    install_hint="baton agents install claude",
)

CODEX = AgentProfile(
    name="codex",
    title="Codex (Zed codex-acp)",
    command=("codex-acp",),
    family="codex",
    env=MappingProxyType({"NO_BROWSER": "1"}),
    private_dirs=MappingProxyType({"CODEX_HOME": "codex/home", **_NODE_PRIVATE}),
    admission=("codex",),
    mode=APPROVAL_TABLES["codex"].select,
    package="@zed-industries/codex-acp",
    version="0.16.0",
    install_hint="baton agents install codex",
)

GEMINI = AgentProfile(
    name="gemini",
    title="Gemini CLI",
    command=("gemini", "--acp"),
    family="gemini",
    private_dirs=MappingProxyType(_NODE_PRIVATE),
    admission=("gemini",),
    mode=APPROVAL_TABLES["gemini"].select,
    # It reads a file before writing it, and any error answer (ACP's -32002 too) fails its
    # write_file: its ACP SDK rejects with the plain error object, which its fs service
    # does not recognize as "not found" (gemini-cli 0.61.0, acpFileSystemService.ts).
    missing_file_reads="empty",
    package="@google/gemini-cli",
    version="0.61.0",
    install_hint="baton agents install gemini",
)

OPENCODE = AgentProfile(
    name="opencode",
    title="OpenCode",
    command=("opencode", "acp"),
    family="opencode",
    env=MappingProxyType(
        {
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            # Applied after every other config source: edits, commands and fetches ask.
            "OPENCODE_PERMISSION": permission_env(OPENCODE_ASK),
        }
    ),
    private_dirs=MappingProxyType(_NODE_PRIVATE),
    admission=("opencode",),
    package="opencode-ai",
    version="1.18.33",
    install_hint="baton agents install opencode",
)

QWEN = AgentProfile(
    name="qwen",
    title="Qwen Code",
    command=("qwen", "--acp"),
    family="qwen",
    private_dirs=MappingProxyType(_NODE_PRIVATE),
    admission=("qwen",),
    mode=APPROVAL_TABLES["qwen"].select,
    package="@qwen-code/qwen-code",
    version="0.24.4",
    install_hint="baton agents install qwen",
)

BUILTIN_PROFILES: dict[str, AgentProfile] = {
    p.name: p for p in (BUILTIN, CURSOR, CLAUDE, CODEX, GEMINI, OPENCODE, QWEN, CURSOR_SDK)
}
