"""A scripted Anthropic Messages endpoint on loopback, for ``claude-agent-acp`` offline.

Point the agent at it with ``ANTHROPIC_BASE_URL=<stub.origin>`` (no ``/v1``: the SDK adds it
and calls ``/v1/messages?beta=true``) and any ``ANTHROPIC_API_KEY``::

    with AnthropicStub(cwd=workspace) as stub:
        env = {"ANTHROPIC_BASE_URL": stub.origin, "ANTHROPIC_API_KEY": "sk-local"}

Endpoints: ``POST /v1/messages`` (streamed as SSE: ``message_start``, ``ping``,
``content_block_start``/``_delta``/``_stop`` with ``text_delta`` or ``input_json_delta``,
``message_delta`` with the stop reason and usage, ``message_stop``; or one JSON message when
``stream`` is false), ``POST /v1/messages/count_tokens`` and ``GET /v1/models``.

The default script ``"write"``: if the request offers the ``Write`` tool and the conversation
has no ``tool_result`` yet, one ``tool_use`` of ``Write`` ``{file_path, content}``; otherwise
text. Requests without tools (Claude Code's title and prompt-suggestion calls) are answered
with :attr:`AnthropicStub.side_text` whatever the script, labelled ``side``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.support.model_server import (
    Fail,
    Hang,
    ModelRequest,
    Reply,
    ScriptedHandler,
    ScriptedServer,
    Text,
    ToolCall,
    reply_label,
)

__all__ = ["MODEL_ID", "AnthropicStub", "MessagesRequest"]

MODEL_ID = "claude-scripted"
USAGE = {"input_tokens": 12, "output_tokens": 7}


@dataclass(frozen=True)
class MessagesRequest(ModelRequest):
    """A parsed ``/v1/messages`` body with helpers for scripts."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [m for m in self.body.get("messages") or [] if isinstance(m, dict)]

    def blocks(self, block_type: str) -> list[dict[str, Any]]:
        out = []
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, list):
                out.extend(
                    b for b in content if isinstance(b, dict) and b.get("type") == block_type
                )
        return out

    @property
    def has_tool_result(self) -> bool:
        return bool(self.blocks("tool_result"))

    @property
    def is_side_request(self) -> bool:
        """A call with no tools: titles, prompt suggestions, summaries."""
        return not self.tool_names

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


class _MessagesHandler(ScriptedHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/").endswith("/v1/models"):
            self.record(None, "models")
            model = {
                "id": MODEL_ID,
                "type": "model",
                "display_name": "Scripted",
                "created_at": "2026-01-01T00:00:00Z",
            }
            self.send_json(
                200, {"data": [model], "has_more": False, "first_id": MODEL_ID, "last_id": MODEL_ID}
            )
        else:
            self.not_found()

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/v1/messages/count_tokens"):
            self.record(body, "count_tokens")
            self.send_json(200, {"input_tokens": USAGE["input_tokens"]})
            return
        if not path.endswith("/v1/messages") or not isinstance(body, dict):
            self.not_found(body)
            return
        req = MessagesRequest(body, self.owner.next_call())
        reply = self.owner.decide(req)
        self.record(body, "side" if req.is_side_request else reply_label(reply))
        if isinstance(reply, Fail):
            self.send_json(
                reply.status,
                {"type": "error", "error": {"type": "api_error", "message": reply.message}},
            )
            return
        model = str(body.get("model") or MODEL_ID)
        if req.stream:
            self._stream(reply, model, req.index)
        else:
            self._whole(reply, model, req.index)

    def _whole(self, reply: Text | ToolCall | Hang, model: str, index: int) -> None:
        if isinstance(reply, Hang):
            if not self.stall():
                return
            reply = Text(reply.first + reply.rest)
        if isinstance(reply, ToolCall):
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": reply.call_id,
                    "name": reply.name,
                    "input": reply.arguments,
                }
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": reply.text}], "end_turn"
        self.send_json(
            200,
            {
                "id": f"msg_{index:04d}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": dict(USAGE),
            },
        )

    def _event(self, name: str, **fields: Any) -> bool:
        return self.sse(json.dumps({"type": name, **fields}), event=name)

    def _stream(self, reply: Text | ToolCall | Hang, model: str, index: int) -> None:
        self.start_sse()
        message = {
            "id": f"msg_{index:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": USAGE["input_tokens"], "output_tokens": 1},
        }
        if not self._event("message_start", message=message) or not self._event("ping"):
            return
        if isinstance(reply, ToolCall):
            block = {"type": "tool_use", "id": reply.call_id, "name": reply.name, "input": {}}
            arguments = json.dumps(reply.arguments)
            half = len(arguments) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in (arguments[:half], arguments[half:])
            ]
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            text = reply.first if isinstance(reply, Hang) else reply.text
            half = max(1, len(text) // 2)
            deltas = [
                {"type": "text_delta", "text": part} for part in (text[:half], text[half:]) if part
            ]
            stop = "end_turn"
        if not self._event("content_block_start", index=0, content_block=block):
            return
        for delta in deltas:
            if not self._event("content_block_delta", index=0, delta=delta):
                return
        if isinstance(reply, Hang):
            if not self.stall():
                return
            rest = {"type": "text_delta", "text": reply.rest}
            if not self._event("content_block_delta", index=0, delta=rest):
                return
        if not self._event("content_block_stop", index=0):
            return
        if not self._event(
            "message_delta",
            delta={"stop_reason": stop, "stop_sequence": None},
            usage={"output_tokens": USAGE["output_tokens"]},
        ):
            return
        self._event("message_stop")


@dataclass
class AnthropicStub(ScriptedServer):
    handler = _MessagesHandler
    model_path = "/v1/messages"
    side_text: str = "Scripted title"

    def decide(self, req: MessagesRequest) -> Reply:
        if req.is_side_request:
            return Text(self.side_text)
        return self.scripted(req, self._write)

    def _write(self, req: MessagesRequest) -> Reply:
        if self.cwd is not None and not req.has_tool_result and "Write" in req.tool_names:
            return ToolCall(
                "Write",
                {"file_path": self.target_path(), "content": self.file_content},
                call_id=f"toolu_{req.index:04d}",
            )
        return Text(self.text)
