"""The Cursor SDK's vocabulary as closed tables: tools, modes, baton's custom tools.

Everything here is data read from ``@cursor/sdk`` 1.0.32 / ``cursor-sdk`` 1.1.0 (the
``tool-call-types`` schemas, ``options.d.ts``, the bridge's own list of valid tool names
printed when an unknown one is given) or chosen by baton:

* :data:`TOOL_KINDS`: the SDK's tool names (``SDKToolUseMessage.name``) → the ACP tool
  kind the transport reports them with. A name not listed is reported as ``other`` and
  flagged (``unclassified`` notice), never dropped.
* :data:`MODES`: the approval modes the ``cursor-sdk`` transport offers. The SDK has no
  permission callback for its built-in tools: a local agent runs its edits and shell
  commands itself. What a client *can* decide is which built-in tools the model gets
  (``AgentOptions.tools``, an allowlist) and which host tools it adds (custom tools,
  executed by the host). So ``ask`` gives the model only read-only built-ins plus
  baton's :data:`CUSTOM_TOOLS`, whose every call asks through baton's durable requests
  and runs through baton's contained client methods; ``agent`` is Cursor's default
  toolset, which approves itself (refused unless the profile says ``agent_approves``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from baton.agent_profile import BUNDLED_BRIDGE
from baton.jsontypes import JsonObject, JsonValue

__all__ = [
    "ASK_TOOLS",
    "BUNDLED_BRIDGE",
    "CUSTOM_TOOLS",
    "CUSTOM_TOOLS_SERVER",
    "DEFAULT_MODEL",
    "FAMILY",
    "MODES",
    "TOOL_KINDS",
    "CustomToolSpec",
    "ModeSpec",
    "tool_kind",
]

FAMILY: Final = "cursor-sdk"
DEFAULT_MODEL: Final = "composer-2"
"""The model a ``cursor-sdk`` session uses when its profile names none (the SDK's own
example model; local agents require one)."""

CUSTOM_TOOLS_SERVER: Final = "custom-user-tools"
"""The MCP provider identifier under which the SDK exposes host custom tools."""

TOOL_KINDS: Mapping[str, str] = MappingProxyType(
    {
        "read": "read",
        "ls": "read",
        "readLints": "read",
        "readTodos": "read",
        "glob": "search",
        "grep": "search",
        "semSearch": "search",
        "edit": "edit",
        "write": "edit",
        "applyAgentDiff": "edit",
        "delete": "delete",
        "shell": "execute",
        "writeShellStdin": "execute",
        "webFetch": "fetch",
        "fetch": "fetch",
        "webSearch": "fetch",
        "mcp": "other",
        "getMcpTools": "read",
        "task": "think",
        "updateTodos": "think",
        "createPlan": "think",
        "askQuestion": "think",
        "switchMode": "switch_mode",
        "generateImage": "other",
        "recordScreen": "other",
        "await": "think",
    }
)
"""SDK tool name → ACP tool kind. ``mcp`` calls of baton's custom tools take the custom
tool's own kind (:data:`CUSTOM_TOOLS`)."""


def tool_kind(name: str, args: JsonValue = None) -> tuple[str, bool]:
    """``(ACP kind, known)`` for one SDK tool call; ``known=False``: not in the table."""
    if name == "mcp" and isinstance(args, Mapping):
        spec = CUSTOM_TOOLS.get(str(args.get("toolName") or ""))
        if spec is not None and args.get("providerIdentifier") in (CUSTOM_TOOLS_SERVER, None):
            return spec.kind, True
    kind = TOOL_KINDS.get(name)
    return (kind, True) if kind is not None else ("other", False)


@dataclass(frozen=True, slots=True)
class CustomToolSpec:
    """One host tool baton adds in ``ask`` mode: run by baton, asked through the ledger."""

    name: str
    kind: str
    """The ACP tool kind its permission request carries (the policy's action)."""
    description: str
    input_schema: Mapping[str, Any]

    def definition(self) -> JsonObject:
        """``CustomToolDefinition`` metadata (the SDK sends only this to the bridge)."""
        return {"description": self.description, "inputSchema": dict(self.input_schema)}


def _schema(properties: Mapping[str, str], required: tuple[str, ...]) -> Mapping[str, Any]:
    return MappingProxyType(
        {
            "type": "object",
            "properties": {
                name: {"type": "string", "description": d} for name, d in properties.items()
            },
            "required": list(required),
            "additionalProperties": False,
        }
    )


_PATH = "a path inside the workspace (relative to it, or absolute)"
CUSTOM_TOOLS: Mapping[str, CustomToolSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            CustomToolSpec(
                "write_file",
                "edit",
                "Create or overwrite a text file in the workspace. baton asks for approval "
                "(its policy or a human) before writing; a denied write is not performed.",
                _schema(
                    {"path": _PATH, "content": "the whole new text of the file"},
                    ("path", "content"),
                ),
            ),
            CustomToolSpec(
                "edit_file",
                "edit",
                "Replace one exact occurrence of old_text with new_text in a workspace file. "
                "baton asks for approval before writing.",
                _schema(
                    {
                        "path": _PATH,
                        "old_text": "text that occurs exactly once in the file",
                        "new_text": "its replacement",
                    },
                    ("path", "old_text", "new_text"),
                ),
            ),
            CustomToolSpec(
                "run_command",
                "execute",
                "Run a shell command in the workspace (sh -c). baton asks for approval first; "
                "the result holds the exit code and the output.",
                _schema({"command": "the shell command line"}, ("command",)),
            ),
        )
    }
)

ASK_TOOLS: tuple[str, ...] = (
    "read",
    "ls",
    "glob",
    "grep",
    "semSearch",
    "readLints",
    "readTodos",
    "updateTodos",
    "mcp",
)
"""The built-in tools offered in ``ask`` mode: reading, searching, the todo list and MCP
(baton's role tools and its custom tools travel as MCP). An allowlist, so a tool Cursor
adds later is not offered until it is classified here. Not offered: edits, deletes, the
shell, fetches, subagents (``task``: they keep their own toolsets), images."""


@dataclass(frozen=True, slots=True)
class ModeSpec:
    """One mode of the ``cursor-sdk`` transport, as ``AgentOptions`` realize it."""

    id: str
    name: str
    description: str
    tools: tuple[str, ...] | None
    """``AgentOptions.tools`` (``None``: Cursor's default toolset)."""
    custom_tools: bool
    """Whether baton's :data:`CUSTOM_TOOLS` are added."""

    def advertised(self) -> JsonObject:
        return {"id": self.id, "name": self.name, "description": self.description}


MODES: Mapping[str, ModeSpec] = MappingProxyType(
    {
        "ask": ModeSpec(
            "ask",
            "Ask",
            "read-only built-in tools; writes and commands only through baton's tools, "
            "each asked through baton",
            ASK_TOOLS,
            True,
        ),
        "agent": ModeSpec(
            "agent",
            "Agent",
            "Cursor's default toolset: it edits files and runs commands without asking",
            None,
            False,
        ),
    }
)
