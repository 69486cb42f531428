"""baton's built-in runbook agent: its inventory and capability declarations.

The built-in agent (:mod:`baton.agents.builtin`) speaks plain stable ACP: a plan of
the runbook's steps, one tool call per step (diff content for file steps), replies
as message chunks, and a permission request before execute and edit steps. It has
no model, so it has no usage to report, no questions and no subagents. The
extension adds nothing; it exists so the inventory makes anything else visible.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.providers.inventory import BUILTIN_INVENTORY, Claim, TableExtension

_SRC = "baton.agents.builtin"


class BuiltinExtension(TableExtension):
    """Nothing beyond stable ACP."""

    usage_unavailable_reason = "the built-in runbook agent uses no model and reports no usage"

    def __init__(self) -> None:
        super().__init__(BUILTIN_INVENTORY)


DECLARATIONS: Mapping[str, Claim] = {
    "streaming": Claim(
        "implemented", f"replies and summaries as agent_message_chunk ({_SRC}.updates)"
    ),
    "questions": Claim("unsupported", "a runbook asks nothing; it has no model"),
    "plans": Claim("unsupported", "no plan approval; the runbook is the plan"),
    "child_activity": Claim("unsupported", "no subagents"),
    "subagent_tasks": Claim(
        "unsupported",
        "delegation lines become FCoP create_task MCP calls (tool executions), not subagents",
    ),
    "images": Claim("unsupported", "no images"),
    "files_diffs": Claim(
        "implemented", f"file steps report diff content on their tool call ({_SRC}.updates)"
    ),
    "steering": Claim("unsupported", f"a new prompt cancels and replaces the running one ({_SRC})"),
    "queueing": Claim("unsupported", "no queue method"),
    "cancellation": Claim(
        "implemented",
        f"session/cancel stops the running step's process group; steps end failed with "
        f"rawOutput cancelled ({_SRC}.steps)",
    ),
    "settlement": Claim("implemented", f"end_turn or cancelled, once per prompt ({_SRC}.turn)"),
    "session_continuity": Claim(
        "implemented", f"session/load replays the prompt and each step's final state ({_SRC}.store)"
    ),
    "discovery": Claim("implemented", f"session/list from the agent's store ({_SRC}.store)"),
    "fork_resume": Claim("unsupported", "no session/fork or session/resume"),
    "modes": Claim("unsupported", "no modes"),
    "model_selection": Claim("unsupported", "no model"),
    "commands": Claim("unsupported", "no slash commands"),
    "session_metadata": Claim("unverified", "titles are kept in its store; no session_info_update"),
    "prompt_media": Claim("unsupported", "text prompts only (a runbook)"),
    "mcp": Claim("implemented", f"stdio MCP servers from session/new and session/load ({_SRC})"),
    "usage": Claim("unsupported", "no model, no tokens: usage is reported unavailable"),
    "hooks_memory": Claim("unsupported", "no hooks or memory"),
    "subagent_questions": Claim("unsupported", "no subagents"),
    "goals_lineage": Claim("unsupported", "no goals; sessions are not forked"),
}

__all__ = ["DECLARATIONS", "BuiltinExtension"]
