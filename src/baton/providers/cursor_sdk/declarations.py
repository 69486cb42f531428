"""The capability-matrix rows of the Cursor SDK transport that no native event can show."""

from __future__ import annotations

from collections.abc import Mapping

from baton.providers.inventory import CapabilityClaim

__all__ = ["DECLARATIONS"]

_OFFLINE = (
    "tested offline through the real cursor-sdk 1.1.0 client against baton's scripted "
    "bridge (baton.testing.cursor_bridge, sdk/v1 traffic checked against the shipped protobuf "
    "schema); not yet qualified against Cursor's backend (needs an account)"
)

DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "questions": CapabilityClaim(
        "unsupported",
        "the SDK has no question callback to the client; askQuestion is not offered in ask "
        "mode, and what a local run does with it in agent mode is not observable",
    ),
    "plans": CapabilityClaim(
        "unsupported",
        "no plan-approval callback in the SDK; createPlan is not offered in ask mode",
    ),
    "checklist": CapabilityClaim(
        "implemented", f"updateTodos tool calls → ACP plan → plan.updated; {_OFFLINE}"
    ),
    "child_activity": CapabilityClaim(
        "partial",
        "a task tool call (a subagent) → delegation.started/completed; subagents keep their "
        "own toolsets, so task is not offered in ask mode; no child transcripts",
    ),
    "subagent_tasks": CapabilityClaim(
        "partial", "task tool calls → delegation.completed (no duration field in the SDK)"
    ),
    "subagent_questions": CapabilityClaim("unsupported", "no question callback in the SDK"),
    "images": CapabilityClaim(
        "unsupported", "generateImage is not offered in ask mode; its files are not ingested"
    ),
    "files_diffs": CapabilityClaim(
        "partial",
        "write tool calls carry the new text (a diff without old text); in ask mode every "
        f"write goes through baton's fs/write_text_file (file.written with SHA-256); {_OFFLINE}",
    ),
    "steering": CapabilityClaim(
        "unsupported", "Run.steer is TypeScript-only and not in the sdk/v1 bridge contract"
    ),
    "queueing": CapabilityClaim(
        "unsupported",
        "a local agent runs one Send at a time (AGENT_BUSY); follow-ups are sent after the "
        "run settles",
    ),
    "cancellation": CapabilityClaim(
        "implemented",
        "session/cancel → CancelRun → the run ends cancelled; a turn timeout or a second "
        f"signal kills the bridge's whole process group; {_OFFLINE}",
    ),
    "settlement": CapabilityClaim(
        "implemented",
        "the run's result envelope ends the turn (finished → end_turn, cancelled → cancelled, "
        f"error/expired → turn.failed with the SDK's error code and message); {_OFFLINE}",
    ),
    "session_continuity": CapabilityClaim(
        "implemented",
        "one long-lived SDK agent per session: CreateAgent once, its id is the session id, "
        "ResumeAgent after a restart (agents live in the bridge's state root under the "
        f"session's persistent private root); {_OFFLINE}",
    ),
    "discovery": CapabilityClaim(
        "unsupported", "ListAgents exists in the SDK; baton resumes only its recorded agent"
    ),
    "fork_resume": CapabilityClaim(
        "partial", "ACP session/resume → ResumeAgent; no fork in the SDK"
    ),
    "modes": CapabilityClaim(
        "implemented",
        "ask (read-only built-ins + baton's asked custom tools, selected) and agent (Cursor's "
        "default toolset, self-approving: refused unless agent_approves, then audited), "
        "realized as AgentOptions.tools on create/resume",
    ),
    "model_selection": CapabilityClaim(
        "partial",
        "the profile's model is the agent's model (ModelSelection id); the list of models "
        "needs an account (ListModels), so no other value is offered",
    ),
    "commands": CapabilityClaim("unsupported", "no command list in the SDK"),
    "session_metadata": CapabilityClaim(
        "unsupported", "agent names/summaries exist (GetAgent) but are not surfaced"
    ),
    "prompt_media": CapabilityClaim(
        "partial", "text prompts; the SDK accepts images (base64), not converted by baton yet"
    ),
    "mcp": CapabilityClaim(
        "implemented",
        "baton's role MCP server is injected on every Send (SendOptions.mcpServers, stdio), "
        "as CodeFlow does; settingSources are not loaded, so no ambient project MCP; "
        f"{_OFFLINE}",
    ),
    "usage": CapabilityClaim(
        "implemented",
        "SDK usage messages (token counts) summed per run → usage.reported with their "
        "provenance in raw; no dollar cost for local agents (cloud only), never zero",
    ),
    "hooks_memory": CapabilityClaim(
        "unsupported", "no hook, memory or compaction events in the SDK stream"
    ),
    "goals_lineage": CapabilityClaim("unsupported", "no goal or lineage protocol in the SDK"),
}
