"""Qwen Code (``qwen --acp``): a Gemini CLI fork, run offline in the test suite.

Observed with qwen-code 0.24.4 against scripted chat completions
(``tests/integration/test_qwen_baton.py``): approval modes ``plan``, ``default``,
``auto-edit``, ``auto`` (an LLM classifier approves) and ``yolo`` as both ``modes`` and a
``mode`` config option, starting in ``auto``; in ``default`` it asks
``session/request_permission`` and writes through ``fs/write_text_file``. Its usage comes in
``_meta.usage`` of the ``agent_message_chunk`` that ends each model call, not in the prompt
result: :class:`QwenExtension` sums it per turn. Its own methods lack ACP's ``_`` prefix
(``qwen/notify/session/mode-update``, ``craft/drainMidTurnQueue``); they stay unclassified
(the request is answered method-not-found). The rest of the inventory is still inferred
from Gemini's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baton.events.extension import MalformedPayload, TurnContext
from baton.events.model import Payload, UsageReported
from baton.jsontypes import JsonMapping
from baton.providers.inventory import QWEN_INVENTORY, CapabilityClaim, TableExtension

_WHY = "inferred from Gemini CLI (Qwen Code is a fork); not observed"
_LIVE = "observed offline with qwen-code 0.24.4 (tests/integration/test_qwen_baton.py)"
_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
    "thoughtTokens": "thought_tokens",
    "cachedReadTokens": "cached_read_tokens",
}


class QwenExtension(TableExtension):
    """Qwen's per-call ``_meta.usage`` → one turn ``usage.reported``; the rest is stable ACP."""

    usage_unavailable_reason = "Qwen Code reported no usage for this turn"

    def __init__(self) -> None:
        super().__init__(QWEN_INVENTORY)
        self._usage: dict[str, int] = {}
        self.on_meta("usage", self._meta_usage)

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        self._usage = {}
        return []

    def _meta_usage(
        self, key: str, value: Any, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        if not isinstance(value, Mapping):
            raise MalformedPayload("_meta.usage is not an object")
        for native, field in _FIELDS.items():
            number = value.get(native)
            if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
                self._usage[field] = self._usage.get(field, 0) + number
        return []

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        if self._usage and not ctx.usage_reported:
            usage = UsageReported(available=True, scope="turn", **self._usage)
            self._usage = {}
            return [usage]
        return super().end_turn(ctx)


DECLARATIONS: Mapping[str, CapabilityClaim] = {
    **{
        row: CapabilityClaim("unverified", _WHY)
        for row in (
            "questions",
            "plans",
            "child_activity",
            "subagent_tasks",
            "images",
            "steering",
            "queueing",
            "settlement",
            "session_continuity",
            "discovery",
            "fork_resume",
            "model_selection",
            "prompt_media",
            "mcp",
            "hooks_memory",
            "subagent_questions",
            "goals_lineage",
            "session_metadata",
        )
    },
    "modes": CapabilityClaim(
        "implemented",
        f"plan/default/auto-edit/auto/yolo as a mode option; baton selects default ({_LIVE})",
    ),
    "usage": CapabilityClaim(
        "implemented", f"_meta.usage per model call, summed per turn ({_LIVE})"
    ),
    "files_diffs": CapabilityClaim(
        "partial", f"diff content on tool calls; writes through fs/write_text_file ({_LIVE})"
    ),
    "cancellation": CapabilityClaim("partial", f"session/cancel ends the turn cancelled ({_LIVE})"),
}

__all__ = ["DECLARATIONS", "QwenExtension"]
