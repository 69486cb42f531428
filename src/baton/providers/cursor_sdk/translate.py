"""The Cursor SDK's run stream → ACP ``session/update`` payloads, sans-I/O.

The ``cursor-sdk`` transport (:mod:`baton.cursor_sdk`) presents a Cursor SDK agent as an
ACP agent, so that what it streams takes the same normalizer path as every ACP agent
(:mod:`baton.events.acp_normalizer` plus :class:`~.extension.CursorSdkExtension`). This
module is that mapping, one envelope at a time (``RunStreamMessage`` in proto3 JSON, as
the bridge sends it):

* ``sdkMessage`` ``assistant`` text → ``agent_message_chunk`` (one message id per stretch
  of text between other events, so the normalizer coalesces the SDK's per-delta messages);
  ``thinking`` text → ``agent_thought_chunk``; ``user`` → ``user_message_chunk``;
* ``tool_call`` (running → completed | error) → ACP ``tool_call`` then
  ``tool_call_update`` with the tool kind of :data:`~.tables.TOOL_KINDS`, ``rawInput``
  (args), ``rawOutput`` (result), locations and, for writes, a diff; the SDK's tool name
  travels in ``_meta`` (``cursor-sdk/tool``) so an unknown name is flagged; an
  ``updateTodos`` call is also an ACP ``plan``; a ``task`` call (a subagent) also a
  ``cursor_sdk_subagent`` update;
* ``usage`` → summed into the turn's usage (the prompt response's ``usage``, with its
  provenance in ``_meta``); ``status`` and ``result`` → how the run ended;
* ``thinking`` completion (duration only), ``system``, ``task`` (summary), ``request``
  → vendor updates the extension maps (``cursor_sdk_*``);
* anything else (an SDK message type, an envelope kind not listed) →
  ``cursor_sdk:<type>``: not in the inventory, so it becomes ``provider.notice``
  ``unclassified`` with the whole envelope kept raw. Nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from baton.jsontypes import JsonMapping, JsonObject
from baton.providers.cursor_sdk.tables import tool_kind

__all__ = [
    "META_TOOL",
    "STOP_REASONS",
    "VENDOR_UPDATES",
    "RunEnd",
    "RunTranslator",
    "Translated",
]

META_TOOL: Final = "cursor-sdk/tool"
"""The ``_meta`` key on tool updates holding the SDK's tool name."""

VENDOR_UPDATES: Final = (
    "cursor_sdk_thinking_completed",
    "cursor_sdk_system",
    "cursor_sdk_summary",
    "cursor_sdk_request",
    "cursor_sdk_subagent",
    "cursor_sdk_block",
)
"""The ``sessionUpdate`` variants this mapping adds to stable ACP (see the inventory)."""

STOP_REASONS: Mapping[str, str] = {"finished": "end_turn", "cancelled": "cancelled"}
"""A run's terminal status → the ACP stop reason; ``error`` and ``expired`` fail the turn."""

_STATUS = {"running": "in_progress", "completed": "completed", "error": "failed"}
_TODO_STATUS = {"inProgress": "in_progress", "pending": "pending", "completed": "completed"}
_MAX_NAME = 120


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a run ended, from its ``result`` envelope (or the last ``status``)."""

    status: Literal["finished", "error", "cancelled", "expired"]
    error_code: str | None = None
    error_message: str | None = None


@dataclass(slots=True)
class Translated:
    """What one envelope became."""

    updates: list[dict[str, Any]] = field(default_factory=list)
    end: RunEnd | None = None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _status(value: Any) -> str:
    word = _text(value).removeprefix("RUN_LIFECYCLE_STATUS_").lower()
    return "error" if word == "unspecified" else word


class RunTranslator:
    """Per session: message ids across runs, open tool calls, the turn's usage."""

    def __init__(self) -> None:
        self._segment = 0
        self._chunk: str | None = None
        self._run = ""
        self._open: set[str] = set()
        self.usage: dict[str, int] = {}
        self.usage_reports = 0
        self.end: RunEnd | None = None

    def begin_run(self) -> None:
        """A new ``Send``: usage and the ending are per run."""
        self.usage = {}
        self.usage_reports = 0
        self.end = None
        self._chunk = None

    # ------------------------------------------------------------------ feeding

    def feed(self, envelope: JsonMapping) -> Translated:
        """One ``RunStreamMessage`` (proto3 JSON) → ACP updates and maybe the run's end."""
        out = Translated()
        if "sdkMessage" in envelope and isinstance(envelope["sdkMessage"], Mapping):
            self._message(envelope["sdkMessage"], envelope, out)
        elif "result" in envelope and isinstance(envelope["result"], Mapping):
            out.end = self.end = self._result(envelope["result"])
        elif "done" in envelope:
            pass  # the stream's own end marker: the run ended with its result
        else:
            kind = next((k for k in envelope if k != "offset"), "empty")
            out.updates.append(self._unknown(str(kind)[:_MAX_NAME], envelope))
        return out

    def _message(
        self, wrapper: Mapping[str, Any], envelope: Mapping[str, Any], out: Translated
    ) -> None:
        inner = wrapper.get("message")
        payload: Mapping[str, Any] = inner if isinstance(inner, Mapping) else wrapper
        kind = _text(payload.get("type")) or _text(wrapper.get("type"))
        run = _text(payload.get("run_id") or payload.get("runId"))
        if run:
            self._run = run
        if kind == "assistant":
            self._assistant(payload, out)
        elif kind == "thinking":
            self._thinking(payload, out)
        elif kind == "user":
            self._chunk = None
            for block in _blocks(payload):
                if block.get("type") == "text":
                    out.updates.append(
                        {
                            "sessionUpdate": "user_message_chunk",
                            "content": {"type": "text", "text": _text(block.get("text"))},
                        }
                    )
        elif kind == "tool_call":
            self._chunk = None
            out.updates.extend(self._tool(payload))
        elif kind == "usage":
            self._usage(payload, out)
        elif kind == "status":
            status = _status(payload.get("status"))
            if status in ("finished", "error", "cancelled", "expired"):
                message = _text(payload.get("message")) or None
                self.end = RunEnd(status, None, message)  # type: ignore[arg-type]
        elif kind in ("system", "task", "request"):
            self._chunk = None
            variant = {
                "system": "cursor_sdk_system",
                "task": "cursor_sdk_summary",
                "request": "cursor_sdk_request",
            }[kind]
            out.updates.append({"sessionUpdate": variant, "message": dict(payload)})
        else:
            self._chunk = None
            out.updates.append(self._unknown(kind[:_MAX_NAME] or "message", envelope))

    def _assistant(self, payload: Mapping[str, Any], out: Translated) -> None:
        for block in _blocks(payload):
            if block.get("type") == "text":
                out.updates.append(
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": _text(block.get("text"))},
                        "messageId": self._message_id("a"),
                    }
                )
            else:
                self._chunk = None
                out.updates.append({"sessionUpdate": "cursor_sdk_block", "block": dict(block)})

    def _thinking(self, payload: Mapping[str, Any], out: Translated) -> None:
        text = _text(payload.get("text"))
        if text:
            out.updates.append(
                {
                    "sessionUpdate": "agent_thought_chunk",
                    "content": {"type": "text", "text": text},
                    "messageId": self._message_id("t"),
                }
            )
            return
        self._chunk = None
        out.updates.append(
            {"sessionUpdate": "cursor_sdk_thinking_completed", "message": dict(payload)}
        )

    def _message_id(self, kind: str) -> str:
        if self._chunk != kind:
            self._segment += 1
            self._chunk = kind
        return f"{self._run or 'run'}/{kind}{self._segment}"

    # -------------------------------------------------------------------- tools

    def _tool(self, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
        call_id = _text(payload.get("call_id") or payload.get("callId"))
        name = _text(payload.get("name"))[:_MAX_NAME] or "unknown"
        args = payload.get("args")
        kind, _known = tool_kind(name, args)
        status = _STATUS.get(_text(payload.get("status")), "in_progress")
        first = call_id not in self._open
        self._open.add(call_id)
        if status in ("completed", "failed"):
            self._open.discard(call_id)
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call" if first else "tool_call_update",
            "toolCallId": call_id or "unknown",
            "status": status,
            "_meta": {META_TOOL: name},
        }
        if first:
            update["title"] = _title(name, args)
            update["kind"] = kind
        if "args" in payload:
            update["rawInput"] = args
            path = _path_of(name, args)
            if path:
                update["locations"] = [{"path": path}]
            diff = _diff_of(name, args, path)
            if diff is not None:
                update["content"] = [diff]
        if "result" in payload:
            update["rawOutput"] = payload.get("result")
        if isinstance(payload.get("truncated"), Mapping):
            update["_meta"]["cursor-sdk/truncated"] = dict(payload["truncated"])
        out = [update]
        if name == "updateTodos" and status == "completed" and isinstance(args, Mapping):
            plan = _plan(args)
            if plan is not None:
                out.append(plan)
        if name == "task":
            out.append(
                {
                    "sessionUpdate": "cursor_sdk_subagent",
                    "toolCallId": call_id,
                    "status": status,
                    "args": args if isinstance(args, Mapping) else {},
                }
            )
        return out

    # -------------------------------------------------------------------- usage

    def _usage(self, payload: Mapping[str, Any], out: Translated) -> None:
        usage = payload.get("usage")
        if not isinstance(usage, Mapping):
            out.updates.append({"sessionUpdate": "cursor_sdk:usage", "message": dict(payload)})
            return
        self.usage_reports += 1
        for src, dst in (
            ("inputTokens", "inputTokens"),
            ("outputTokens", "outputTokens"),
            ("cacheReadTokens", "cachedReadTokens"),
            ("cacheWriteTokens", "cachedWriteTokens"),
            ("totalTokens", "totalTokens"),
            ("reasoningTokens", "thoughtTokens"),
        ):
            value = _int(usage.get(src, usage.get(_snake(src))))
            if value is not None:
                self.usage[dst] = self.usage.get(dst, 0) + value

    def prompt_usage(self) -> JsonObject | None:
        """The run's usage for the ACP prompt response, with where it came from; ``None``
        when the SDK reported none (baton then says usage is unavailable, never zero)."""
        if not self.usage:
            return None
        return {
            **self.usage,
            "_meta": {
                "cursor-sdk/usage": {
                    "source": "Cursor SDK usage messages (turn-ended), summed over the run",
                    "runId": self._run,
                    "reports": self.usage_reports,
                }
            },
        }

    # ------------------------------------------------------------------- ending

    def _result(self, result: Mapping[str, Any]) -> RunEnd:
        nested = result.get("result")
        full = nested if isinstance(nested, Mapping) else {}
        status = _status(result.get("status") or full.get("status"))
        if status not in ("finished", "error", "cancelled", "expired"):
            status = "error"
        code = _text(full.get("errorCode") or result.get("errorCode")) or None
        message = _text(full.get("errorMessage")) or None
        if message is None and self.end is not None:
            message = self.end.error_message
        return RunEnd(status, code, message)  # type: ignore[arg-type]

    def _unknown(self, kind: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
        return {"sessionUpdate": f"cursor_sdk:{kind}", "envelope": dict(envelope)}


def _blocks(payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = payload.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():  # proto3 JSON writes int64 as a string
        return int(value)
    return None


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _path_of(name: str, args: Any) -> str:
    if not isinstance(args, Mapping):
        return ""
    if name == "mcp":
        inner = args.get("args")
        return _text(inner.get("path")) if isinstance(inner, Mapping) else ""
    return _text(args.get("path") or args.get("filePath"))


def _diff_of(name: str, args: Any, path: str) -> dict[str, Any] | None:
    """A write's new text as an ACP diff (the SDK gives no old text)."""
    if not path or not isinstance(args, Mapping):
        return None
    if name == "write" and isinstance(args.get("fileText"), str):
        return {"type": "diff", "path": path, "oldText": None, "newText": args["fileText"]}
    inner = args.get("args") if name == "mcp" else None
    if isinstance(inner, Mapping) and args.get("toolName") == "write_file":
        content = inner.get("content")
        if isinstance(content, str):
            return {"type": "diff", "path": path, "oldText": None, "newText": content}
    return None


def _title(name: str, args: Any) -> str:
    if not isinstance(args, Mapping):
        return name
    if name == "mcp":
        server = _text(args.get("providerIdentifier")) or "mcp"
        return f"{server}.{_text(args.get('toolName')) or '?'}"[:200]
    detail = _text(
        args.get("command") or args.get("path") or args.get("pattern") or args.get("description")
    )
    return f"{name} {detail}"[:200] if detail else name


def _plan(args: Mapping[str, Any]) -> dict[str, Any] | None:
    todos = args.get("todos")
    if not isinstance(todos, list):
        return None
    entries = []
    for todo in todos:
        if not isinstance(todo, Mapping):
            continue
        native = _text(todo.get("status"))
        entries.append(
            {
                "content": _text(todo.get("content")),
                "status": _TODO_STATUS.get(native, native or "pending"),
                "priority": "medium",
            }
        )
    return {"sessionUpdate": "plan", "entries": entries}
