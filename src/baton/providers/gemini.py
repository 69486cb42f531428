"""Gemini CLI (``gemini --acp``): stable ACP only, plus what it asks of the client.

Gemini adds no vendor variants or methods; what sets it apart is on the client side:
it reads and writes files through the client's ``fs/*`` methods when the client
advertises them (the runner's, workspace-contained) and streams history back as
ordinary updates on ``session/load``. Its inventory (:data:`GEMINI_INVENTORY
<baton.providers.inventory.GEMINI_INVENTORY>`) comes from an older snapshot of its
ACP sources than the pinned 0.61.0, so most capability cells are ``unverified``.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.providers.inventory import GEMINI_INVENTORY, CapabilityClaim, TableExtension

_SRC = "gemini-cli zed-integration (older snapshot)"


class GeminiExtension(TableExtension):
    """Nothing beyond stable ACP; the inventory still makes unknown events visible."""

    usage_unavailable_reason = "Gemini CLI reported no usage for this turn"

    def __init__(self) -> None:
        super().__init__(GEMINI_INVENTORY)


DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "questions": CapabilityClaim("unsupported", f"no question method over ACP ({_SRC})"),
    "plans": CapabilityClaim("unsupported", f"no plan-approval method over ACP ({_SRC})"),
    "child_activity": CapabilityClaim("unsupported", f"no subagent events over ACP ({_SRC})"),
    "subagent_tasks": CapabilityClaim("unsupported", f"no subagent task events over ACP ({_SRC})"),
    "images": CapabilityClaim("unsupported", f"no image-generation events over ACP ({_SRC})"),
    "files_diffs": CapabilityClaim(
        "partial",
        f"edit tool calls carry diff content (fileName/originalContent/newContent, {_SRC}); "
        "fs/write_text_file goes through the runner",
    ),
    "steering": CapabilityClaim("unsupported", f"a new prompt aborts the pending one ({_SRC})"),
    "queueing": CapabilityClaim("unsupported", "no queue method over ACP"),
    "cancellation": CapabilityClaim(
        "partial", f"session/cancel aborts the pending prompt ({_SRC})"
    ),
    "settlement": CapabilityClaim("unverified", "prompt result ends the turn; not qualified live"),
    "session_continuity": CapabilityClaim(
        "partial", f"loadSession advertised; history streamed back on session/load ({_SRC})"
    ),
    "discovery": CapabilityClaim("unverified", "session/list not seen in the inspected sources"),
    "fork_resume": CapabilityClaim("unverified", "not advertised in the inspected sources"),
    "modes": CapabilityClaim(
        "unverified", "modes are newer than the inspected sources; select_config applies"
    ),
    "model_selection": CapabilityClaim(
        "unverified",
        "the inspected sources use unstable session/set_model; select_config offers it only when "
        "legacy models are advertised",
    ),
    "prompt_media": CapabilityClaim(
        "partial",
        f"image, audio and embedded context advertised ({_SRC}); conversion is the runner's",
    ),
    "mcp": CapabilityClaim("partial", f"session mcpServers over stdio/HTTP/SSE ({_SRC})"),
    "usage": CapabilityClaim("unverified", f"no usage_update in the inspected sources ({_SRC})"),
    "hooks_memory": CapabilityClaim("unsupported", "no hook or memory events over ACP"),
    "subagent_questions": CapabilityClaim("unsupported", f"no subagents over ACP ({_SRC})"),
    "session_metadata": CapabilityClaim(
        "unverified", f"no session_info_update in the inspected sources ({_SRC})"
    ),
    "goals_lineage": CapabilityClaim("unsupported", f"no goal or lineage protocol ({_SRC})"),
}

__all__ = ["DECLARATIONS", "GeminiExtension"]
