"""Builders for the ACP ``session/update`` payloads and content blocks the agent sends.

Plain dicts in wire shape (camelCase keys, snake_case discriminators), built in one place so
every update has the same form live and on replay.
"""

from collections.abc import Sequence
from typing import Literal

from baton.jsontypes import JsonValue

from .jsonrpc import JsonObject

__all__ = [
    "PERMISSION_OPTIONS",
    "PlanStatus",
    "ToolKind",
    "ToolStatus",
    "agent_message",
    "block_content",
    "diff_content",
    "plan",
    "text_block",
    "text_content",
    "tool_call",
    "tool_call_update",
    "user_message",
]

PlanStatus = Literal["pending", "in_progress", "completed"]
ToolKind = Literal["execute", "edit", "other"]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]

PERMISSION_OPTIONS: tuple[JsonObject, ...] = (
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Allow always", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
)


def text_block(text: str) -> JsonObject:
    """A text ContentBlock."""
    return {"type": "text", "text": text}


def block_content(block: JsonObject) -> JsonObject:
    """Tool-call content wrapping any ContentBlock."""
    return {"type": "content", "content": block}


def text_content(text: str) -> JsonObject:
    """Tool-call content wrapping a text block."""
    return block_content(text_block(text))


def diff_content(path: str, old_text: str | None, new_text: str) -> JsonObject:
    """Tool-call diff content (``oldText`` None means a new file)."""
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def plan(entries: Sequence[tuple[str, PlanStatus]]) -> JsonObject:
    """The whole plan (ACP plans are always sent in full)."""
    return {
        "sessionUpdate": "plan",
        "entries": [
            {"content": content, "priority": "medium", "status": status}
            for content, status in entries
        ],
    }


def agent_message(text: str, message_id: str) -> JsonObject:
    """A complete agent message as one chunk."""
    return {
        "sessionUpdate": "agent_message_chunk",
        "content": text_block(text),
        "messageId": message_id,
    }


def user_message(text: str, message_id: str) -> JsonObject:
    """The user's prompt, as replayed by `session/load`."""
    return {
        "sessionUpdate": "user_message_chunk",
        "content": text_block(text),
        "messageId": message_id,
    }


def tool_call(
    tool_call_id: str,
    title: str,
    kind: ToolKind,
    raw_input: JsonObject,
    *,
    locations: Sequence[str] = (),
    content: Sequence[JsonObject] = (),
) -> JsonObject:
    """A new tool call, pending."""
    update: JsonObject = {
        "sessionUpdate": "tool_call",
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": raw_input,
    }
    if locations:
        update["locations"] = [{"path": path} for path in locations]
    if content:
        update["content"] = list(content)
    return update


def tool_call_update(
    tool_call_id: str,
    *,
    status: ToolStatus | None = None,
    content: Sequence[JsonObject] | None = None,
    raw_input: JsonObject | None = None,
    raw_output: JsonValue = None,
) -> JsonObject:
    """Changed fields of a tool call (a list given here replaces the previous one)."""
    update: JsonObject = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id}
    if status is not None:
        update["status"] = status
    if content is not None:
        update["content"] = list(content)
    if raw_input is not None:
        update["rawInput"] = raw_input
    if raw_output is not None:
        update["rawOutput"] = raw_output
    return update
