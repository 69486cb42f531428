"""baton's built-in runbook agent: its inventory and capability declarations.

The built-in agent (:mod:`baton.agents.builtin`) speaks plain stable ACP: a plan of
the runbook's steps, one tool call per step (diff content for file steps), replies
as message chunks, and a permission request before execute and edit steps. It has
no model, so it has no usage to report, no questions and no subagents. The
extension adds nothing; it exists so the inventory makes anything else visible.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.providers.inventory import BUILTIN_INVENTORY, CapabilityClaim, TableExtension

_SRC = "baton.agents.builtin"


class BuiltinExtension(TableExtension):
    """Nothing beyond stable ACP."""

    usage_unavailable_reason = "the built-in runbook agent uses no model and reports no usage"

    def __init__(self) -> None:
        super().__init__(BUILTIN_INVENTORY)


DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "streaming": CapabilityClaim(
        "implemented", f"replies and summaries as agent_message_chunk ({_SRC}.updates)"
    ),
    "questions": CapabilityClaim("unsupported", "a runbook asks nothing; it has no model"),
    "plans": CapabilityClaim("unsupported", "no plan approval; the runbook is the plan"),
    "child_activity": CapabilityClaim("unsupported", "no subagents"),
    "subagent_tasks": CapabilityClaim(
        "unsupported",
        "delegation lines become FCoP create_task MCP calls (tool executions), not subagents",
    ),
    "images": CapabilityClaim("unsupported", "no images"),
    "files_diffs": CapabilityClaim(
        "implemented", f"file steps report diff content on their tool call ({_SRC}.updates)"
    ),
    "steering": CapabilityClaim(
        "unsupported", f"a new prompt cancels and replaces the running one ({_SRC})"
    ),
    "queueing": CapabilityClaim("unsupported", "no queue method"),
    "cancellation": CapabilityClaim(
        "implemented",
        f"session/cancel stops the running step's process group; steps end failed with "
        f"rawOutput cancelled ({_SRC}.steps)",
    ),
    "settlement": CapabilityClaim(
        "implemented", f"end_turn or cancelled, once per prompt ({_SRC}.turn)"
    ),
    "session_continuity": CapabilityClaim(
        "implemented", f"session/load replays the prompt and each step's final state ({_SRC}.store)"
    ),
    "discovery": CapabilityClaim(
        "implemented", f"session/list from the agent's store ({_SRC}.store)"
    ),
    "fork_resume": CapabilityClaim("unsupported", "no session/fork or session/resume"),
    "modes": CapabilityClaim("unsupported", "no modes"),
    "model_selection": CapabilityClaim("unsupported", "no model"),
    "commands": CapabilityClaim("unsupported", "no slash commands"),
    "session_metadata": CapabilityClaim(
        "unverified", "titles are kept in its store; no session_info_update"
    ),
    "prompt_media": CapabilityClaim("unsupported", "text prompts only (a runbook)"),
    "mcp": CapabilityClaim(
        "implemented", f"stdio MCP servers from session/new and session/load ({_SRC})"
    ),
    "usage": CapabilityClaim("unsupported", "no model, no tokens: usage is reported unavailable"),
    "hooks_memory": CapabilityClaim("unsupported", "no hooks or memory"),
    "subagent_questions": CapabilityClaim("unsupported", "no subagents"),
    "goals_lineage": CapabilityClaim("unsupported", "no goals; sessions are not forked"),
}

__all__ = ["DECLARATIONS", "BuiltinExtension"]
