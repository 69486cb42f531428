"""Stable ACP requests → the ledger's request documents (redacted, validated).

``session/request_permission`` and ``elicitation/create`` are stable ACP, owned by the
runner; vendor human requests (``cursor/ask_question``…) come from their provider
already as documents (:class:`~baton.events.extension.VendorOutcome`). Pure functions:
they raise :class:`~baton.request_model.errors.InvalidDocument` for a request baton cannot
present faithfully; the session answers the agent with an error and records the refusal.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.events.redaction import Redaction
from baton.jsontypes import JsonMapping, JsonValue
from baton.request_model.documents import (
    ElicitationRequest,
    ElicitationSchema,
    RequestDocument,
    parse_document,
)
from baton.request_model.errors import InvalidDocument

__all__ = [
    "elicitation_document",
    "permission_document",
]


def permission_document(
    params: JsonMapping,
    redaction: Redaction,
    *,
    known_title: str | None = None,
    known_kind: str | None = None,
) -> RequestDocument:
    """``session/request_permission`` params → a ``PermissionRequest``.

    Title and kind fall back to what the tool call's earlier updates said, since
    agents often send a minimal ``toolCall`` here.
    """
    tool_call = params.get("toolCall")
    if not isinstance(tool_call, Mapping):
        raise InvalidDocument("toolCall must be an object")
    raw_input = redaction.value(tool_call.get("rawInput"))
    command = raw_input.get("command") if isinstance(raw_input, dict) else None
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    diffs = [
        {
            "path": str(item.get("path", "")),
            "old_text": redaction.text(item["oldText"])
            if isinstance(item.get("oldText"), str)
            else None,
            "new_text": redaction.text(str(item.get("newText") or "")),
        }
        for item in tool_call.get("content") or []
        if isinstance(item, Mapping) and item.get("type") == "diff"
    ]
    locations = [
        {
            "path": str(loc.get("path", "")),
            "line": loc.get("line") if isinstance(loc.get("line"), int) else None,
        }
        for loc in tool_call.get("locations") or []
        if isinstance(loc, Mapping)
    ]
    options = params.get("options")
    if not isinstance(options, list) or not options:
        raise InvalidDocument("options must be a non-empty list")
    return parse_document(
        {
            "kind": "permission",
            "tool_call": {
                "tool_call_id": str(tool_call.get("toolCallId", "")),
                "title": redaction.text(str(tool_call.get("title") or known_title or "tool call")),
                "kind": str(tool_call.get("kind") or known_kind or "other"),
                "command": redaction.text(command) if isinstance(command, str) else None,
                "diffs": diffs,
                "locations": locations,
                "raw_input": raw_input,
            },
            "options": [
                {
                    "option_id": o.get("optionId"),
                    "name": redaction.text(str(o.get("name", ""))),
                    "kind": o.get("kind"),
                }
                for o in options
                if isinstance(o, Mapping)
            ],
        }
    )


def elicitation_document(params: JsonValue, redaction: Redaction) -> RequestDocument:
    """ACP ``elicitation/create`` (form mode) → an ``ElicitationRequest``."""
    if not isinstance(params, Mapping):
        raise InvalidDocument("params must be an object")
    if params.get("mode", "form") != "form":
        raise InvalidDocument("only form-mode elicitation is supported (url mode is declined)")
    schema = params.get("requestedSchema")
    if not isinstance(schema, Mapping):
        raise InvalidDocument("requestedSchema must be an object")
    return ElicitationRequest(
        message=redaction.text(str(params.get("message", ""))),
        requested_schema=ElicitationSchema.from_wire(schema),
        tool_call_id=str(params["toolCallId"]) if params.get("toolCallId") else None,
    )
