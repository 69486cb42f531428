"""The ``cursor-sdk`` provider extension: the transport's vendor updates, sans-I/O.

The stable ACP variants the transport produces (transcript chunks, tool calls, ``plan``,
``current_mode_update``) are the generic normalizer's. What the SDK streams without an
ACP counterpart arrives as the ``cursor_sdk_*`` variants of
:mod:`~baton.providers.cursor_sdk.translate`; this extension maps each to a canonical
payload (a subagent → ``delegation.*``, the rest → ``provider.notice`` ``info`` with the
native message kept raw by the normalizer). The SDK's tool name rides in ``_meta``
(``cursor-sdk/tool``): a name outside :data:`~.tables.TOOL_KINDS` is flagged once per
name. Usage comes in the prompt response; a run without it is reported unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from baton.events.bounds import clip_text, measured
from baton.events.extension import TurnContext, require
from baton.events.model import (
    DelegationChild,
    DelegationCompleted,
    DelegationStarted,
    Payload,
)
from baton.jsontypes import JsonMapping
from baton.providers.cursor_sdk.tables import TOOL_KINDS
from baton.providers.inventory import (
    CURSOR_SDK_INVENTORY,
    TableExtension,
    UpdateHandler,
    notice,
)

__all__ = ["SOURCE", "CursorSdkExtension"]

SOURCE = "cursor-sdk.task"


def _message(update: JsonMapping) -> Mapping[str, Any]:
    return require(update.get("message"), Mapping, "message")  # type: ignore[no-any-return]


def _thinking(update: JsonMapping) -> str:
    message = _message(update)
    duration = message.get("thinking_duration_ms", message.get("thinkingDurationMs"))
    ms = measured(duration)
    shown = f"{int(ms)} ms" if ms is not None else "an unknown time"
    return f"cursor-sdk: thinking took {shown}"


def _system(update: JsonMapping) -> str:
    message = _message(update)
    model = message.get("model")
    model_id = model.get("id") if isinstance(model, Mapping) else None
    tools = message.get("tools")
    count = len(tools) if isinstance(tools, list) else 0
    return f"cursor-sdk: the run offers {count} tools" + (
        f" with model {clip_text(str(model_id), 80)}" if model_id else ""
    )


def _summary(update: JsonMapping) -> str:
    return "cursor-sdk summary: " + clip_text(str(_message(update).get("text") or ""), 2000)


def _request(update: JsonMapping) -> str:
    request_id = _message(update).get("request_id")
    return f"cursor-sdk: the run's request id is {clip_text(str(request_id or '?'), 160)}"


def _block(update: JsonMapping) -> str:
    block = require(update.get("block"), Mapping, "block")
    return (
        f"cursor-sdk: an assistant content block of type "
        f"{clip_text(str(block.get('type') or '?'), 80)!r} is not text; kept raw"
    )


_INFO_NOTICES: Mapping[str, tuple[str, Callable[[JsonMapping], str]]] = {
    "cursor_sdk_thinking_completed": ("thinking_completed", _thinking),
    "cursor_sdk_system": ("agent_init", _system),
    "cursor_sdk_summary": ("summary", _summary),
    "cursor_sdk_request": ("request_id", _request),
    "cursor_sdk_block": ("content_block", _block),
}
"""The variants that become an ``info`` notice: (its category, what it says)."""


def _info_notice(
    variant: str, category: str, describe: Callable[[JsonMapping], str]
) -> UpdateHandler:
    def handle(update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        return [notice(category, describe(update), ctx=ctx, severity="info", variant=variant)]

    return handle


class CursorSdkExtension(TableExtension):
    """The ``cursor-sdk`` family's extension (see the module docstring)."""

    usage_unavailable_reason = "the Cursor SDK reported no token usage for this run"

    def __init__(self) -> None:
        super().__init__(CURSOR_SDK_INVENTORY)
        self.on_update("cursor_sdk_subagent", self._subagent)
        for variant, (category, describe) in _INFO_NOTICES.items():
            self.on_update(variant, _info_notice(variant, category, describe))
        self.on_meta("cursor-sdk/tool", self._tool_name)

    # ------------------------------------------------------------------ updates

    def _subagent(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        call_id = clip_text(str(require(update.get("toolCallId"), str, "toolCallId")), 160)
        args = update.get("args")
        args = args if isinstance(args, Mapping) else {}
        status = str(update.get("status") or "in_progress")
        kind = args.get("subagentType")
        role = None
        if isinstance(kind, Mapping):
            role = str(kind.get("name") or kind.get("kind") or "") or None
        description = args.get("description")
        child = DelegationChild(
            child_id=call_id,
            role=clip_text(role, 200) if role else None,
            description=clip_text(ctx.redaction.text(description), 500)
            if isinstance(description, str)
            else None,
            model=clip_text(str(args["model"]), 200)
            if isinstance(args.get("model"), str)
            else None,
            agent_id=clip_text(str(args["agentId"]), 160)
            if isinstance(args.get("agentId"), str)
            else None,
            status=status,
            parent_tool_call_id=call_id,
        )
        if status in ("completed", "failed"):
            return [DelegationCompleted(source=SOURCE, children=[child])]
        return [DelegationStarted(source=SOURCE, children=[child])]

    # --------------------------------------------------------------------- meta

    def _tool_name(
        self, key: str, value: Any, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        name = str(value)
        if name in TOOL_KINDS or not self._first_time("tool", name):
            return []
        return [
            notice(
                "unclassified",
                f"cursor-sdk: tool {clip_text(name, 120)!r} is not in baton's tool table; "
                "reported as kind 'other', kept raw",
                ctx=ctx,
                variant=str(update.get("sessionUpdate") or "tool_call"),
            )
        ]
