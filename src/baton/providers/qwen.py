"""Qwen Code (``qwen --acp``): a Gemini CLI fork, so Gemini's shape, all unverified.

Qwen Code is the one agent here that takes an OpenAI-compatible endpoint directly
(``OPENAI_BASE_URL``), which makes it the cheapest live check once a stub exists. Until
then every entry of :data:`QWEN_INVENTORY <baton.providers.inventory.QWEN_INVENTORY>` is
``inferred`` from Gemini's, and the capability matrix says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.providers.inventory import QWEN_INVENTORY, Claim, TableExtension

_WHY = "inferred from Gemini CLI (Qwen Code is a fork); not observed"


class QwenExtension(TableExtension):
    """Nothing beyond stable ACP; the inventory still makes unknown events visible."""

    usage_unavailable_reason = "Qwen Code reported no usage for this turn"

    def __init__(self) -> None:
        super().__init__(QWEN_INVENTORY)


DECLARATIONS: Mapping[str, Claim] = {
    row: Claim("unverified", _WHY)
    for row in (
        "questions",
        "plans",
        "child_activity",
        "subagent_tasks",
        "images",
        "files_diffs",
        "steering",
        "queueing",
        "cancellation",
        "settlement",
        "session_continuity",
        "discovery",
        "fork_resume",
        "modes",
        "model_selection",
        "prompt_media",
        "mcp",
        "usage",
        "hooks_memory",
        "subagent_questions",
        "goals_lineage",
        "session_metadata",
    )
}

__all__ = ["DECLARATIONS", "QwenExtension"]
