"""OpenCode (``opencode acp``): stable ACP, plus its ``task`` tool as delegation.

OpenCode was observed offline (acp.md §5): message chunks with ``messageId``, tool
calls that start ``pending`` with an empty ``rawInput`` and fill it later,
``available_commands_update``, ``model``/``mode`` config options, ``session/list``,
``session/load``, ``session/fork`` and ``session/resume``. Its ``task`` tool runs a
subagent; its rawInput ``{description, prompt, subagent_type}`` (the same shape as
Claude's ``Task``; observed live: ``tool_call`` kind ``think`` with an empty rawInput,
then ``tool_call_update`` carrying it) becomes ``delegation.*`` through
:class:`~baton.providers.claude.TaskToolTracker`.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.events.extension import TurnContext
from baton.events.model import Payload
from baton.jsontypes import JsonMapping
from baton.providers.claude import TaskToolTracker, names_subagent
from baton.providers.inventory import OPENCODE_INVENTORY, CapabilityClaim, TableExtension


class OpenCodeExtension(TableExtension):
    """OpenCode's native detail → canonical payloads (see the module docstring)."""

    usage_unavailable_reason = "OpenCode reported no usage for this turn"

    def __init__(self) -> None:
        super().__init__(OPENCODE_INVENTORY)
        self.tasks = TaskToolTracker("opencode.task", names_subagent)
        self.observe("tool_call", self._tool)
        self.observe("tool_call_update", self._tool)

    def _tool(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        return self.tasks.tool_update(update, ctx.redaction)


_OBSERVED = "acp.md §5 offline run"
DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "questions": CapabilityClaim("unsupported", "no question method over ACP"),
    "plans": CapabilityClaim("unsupported", "no plan-approval method over ACP (plan is a mode)"),
    "child_activity": CapabilityClaim(
        "unsupported", "subagent sessions are internal to OpenCode; only the task tool is visible"
    ),
    "subagent_tasks": CapabilityClaim(
        "partial",
        "task tool → delegation.started when its rawInput names subagent_type, "
        "delegation.completed when it ends (observed live, tests/providers/test_opencode_live.py); "
        "no model or duration is reported",
    ),
    "images": CapabilityClaim("unsupported", "no image-generation events over ACP"),
    "files_diffs": CapabilityClaim(
        "partial",
        f"write/edit tool calls with rawInput filePath/content and rawOutput ({_OBSERVED}); "
        "generic tool layer",
    ),
    "steering": CapabilityClaim("unsupported", "no steering method over ACP"),
    "queueing": CapabilityClaim("unsupported", "no queue method over ACP"),
    "cancellation": CapabilityClaim(
        "partial", "session/cancel through the runner; not qualified live"
    ),
    "settlement": CapabilityClaim(
        "partial",
        "prompt result ends the turn; chunks may arrive after end_turn (opencode #17505), "
        "tolerated by the runner",
    ),
    "session_continuity": CapabilityClaim("partial", f"session/load replays history ({_OBSERVED})"),
    "discovery": CapabilityClaim("partial", f"session/list returns titled sessions ({_OBSERVED})"),
    "fork_resume": CapabilityClaim(
        "partial",
        f"sessionCapabilities advertise fork and resume ({_OBSERVED}); baton does not fork",
    ),
    "modes": CapabilityClaim(
        "implemented", f"mode config option build|plan via select_config ({_OBSERVED})"
    ),
    "model_selection": CapabilityClaim(
        "implemented",
        f"model config option via select_config; session/set_model still accepted ({_OBSERVED})",
    ),
    "prompt_media": CapabilityClaim(
        "unverified", "promptCapabilities as advertised; not probed here"
    ),
    "mcp": CapabilityClaim("partial", f"mcpCapabilities http and sse advertised ({_OBSERVED})"),
    "hooks_memory": CapabilityClaim("unsupported", "no hook or memory events over ACP"),
    "subagent_questions": CapabilityClaim("unsupported", "subagents are internal to OpenCode"),
    "goals_lineage": CapabilityClaim(
        "unsupported", "no goal protocol; fork is advertised but baton keeps no lineage"
    ),
}

__all__ = ["DECLARATIONS", "OpenCodeExtension"]
