"""Which MCP transport a role session's agent is offered: HTTP where it advertises it.

ACP makes stdio MCP mandatory and ``http``/``sse`` optional, advertised in
``initialize`` as ``agentCapabilities.mcpCapabilities``. baton's role tools are served
by the daemon (:mod:`baton.coordination.mcp_hub`); an agent that speaks HTTP MCP
reaches them directly, any other through the stdio shim. ``session/new`` carries the
``mcpServers`` before baton can act on that ``initialize`` answer, so the choice is made
from what the slot's previous session advertised (kept with the session record) or,
for a first session, from :data:`HTTP_MCP` (what each family's pinned agent advertised
when observed); when the agent then turns out not to advertise HTTP, the session is
reopened with the shim (``mcpCapabilities.http`` as :mod:`baton.acp.messages` reads it).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["HTTP_MCP", "offer_http"]

HTTP_MCP: Mapping[str, str] = {
    "claude": "claude-agent-acp 0.101.0: mcpCapabilities {http: true, sse: true}",
    "codex": "codex-acp 0.16.0: mcpCapabilities {http: true, sse: false}",
    "qwen": "qwen-code 0.24.4: mcpCapabilities {http: true, sse: true}",
    "opencode": "opencode-ai 1.18.33: mcpCapabilities {http: true, sse: true}",
}
"""Families whose pinned agent was seen advertising HTTP MCP (and where it was seen)."""


def offer_http(family: str, learned: bool | None) -> bool:
    """Offer the HTTP entry: what the agent last advertised, else what its family is known for."""
    if learned is not None:
        return learned
    return family in HTTP_MCP
