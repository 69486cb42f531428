"""The built-in agent profiles.

Commands and flags follow each harness's documented ACP entry point (see
``docs/providers.md``). Credentials are listed as *bindable* names only: a profile
receives a credential when the user binds it in ``baton.toml``; nothing is taken
from the shell by default.
"""

from __future__ import annotations

from types import MappingProxyType

from baton.providers.profile import PYTHON_PLACEHOLDER, AgentProfile

__all__ = [
    "BUILTIN",
    "BUILTIN_PROFILES",
    "CLAUDE",
    "CODEX",
    "CURSOR",
    "GEMINI",
    "OPENCODE",
    "QWEN",
]

_NODE_PRIVATE = {"NODE_COMPILE_CACHE": "cache/node-compile"}

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
    install_hint="curl https://cursor.com/install | bash  (then bind CURSOR_API_KEY)",
)

CLAUDE = AgentProfile(
    name="claude",
    title="Claude Code (claude-agent-acp)",
    command=("claude-agent-acp",),
    family="claude",
    env=MappingProxyType({"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_TELEMETRY": "1"}),
    private_dirs=MappingProxyType({"CLAUDE_CONFIG_DIR": "claude/config", **_NODE_PRIVATE}),
    admission=("claude",),
    install_hint="npm install -g -E @agentclientprotocol/claude-agent-acp@0.101.0",
)

CODEX = AgentProfile(
    name="codex",
    title="Codex (codex-acp)",
    command=("codex-acp",),
    family="codex",
    env=MappingProxyType({"NO_BROWSER": "1"}),
    private_dirs=MappingProxyType({"CODEX_HOME": "codex/home", **_NODE_PRIVATE}),
    admission=("codex",),
    install_hint="npm install -g -E @agentclientprotocol/codex-acp@2.6.0",
)

GEMINI = AgentProfile(
    name="gemini",
    title="Gemini CLI",
    command=("gemini", "--acp"),
    family="gemini",
    private_dirs=MappingProxyType(_NODE_PRIVATE),
    admission=("gemini",),
    install_hint="npm install -g -E @google/gemini-cli@0.61.0",
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
        }
    ),
    private_dirs=MappingProxyType(_NODE_PRIVATE),
    admission=("opencode",),
    install_hint="npm install -g -E opencode-ai@1.18.33",
)

QWEN = AgentProfile(
    name="qwen",
    title="Qwen Code",
    command=("qwen", "--acp"),
    family="qwen",
    private_dirs=MappingProxyType(_NODE_PRIVATE),
    admission=("qwen",),
    install_hint="npm install -g -E @qwen-code/qwen-code@0.24.4",
)

BUILTIN_PROFILES: dict[str, AgentProfile] = {
    p.name: p for p in (BUILTIN, CURSOR, CLAUDE, CODEX, GEMINI, OPENCODE, QWEN)
}
