"""A scripted OpenAI-compatible chat-completions endpoint on loopback (standard library only).

The shared server plumbing is :mod:`tests.support.model_server`.

Real agents (OpenCode) are pointed at it so that their turns are deterministic and offline::

    with LLMStub(cwd=workspace) as stub:
        config = {"provider": {"local": {"options": {"baseURL": stub.base_url}}}}
        ...
        assert stub.requests[-1].path == "/v1/chat/completions"

Endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions``. Each completion call is answered
by the *script*, one of:

``"write"`` (default)
    If the request offers a tool named ``write`` (or only ``edit``) and the conversation has no
    tool result yet, one tool call writing :attr:`LLMStub.file_content` to
    ``<cwd>/<file_name>``; otherwise the plain text :attr:`LLMStub.text`.
``"text"``
    Always plain text.
``"hang"`` (alias ``"slow"``)
    Stream one text chunk, then stall until :meth:`LLMStub.release` (then finish normally) or
    until the client disconnects (:attr:`LLMStub.aborted` is set) or the stub stops.
``"fail"``
    HTTP 500 with an OpenAI-style error body, every time (agents tend to retry forever).
a callable ``(ChatRequest) -> Reply``
    Full control; return :class:`Text`, :class:`ToolCall`, :class:`Hang` or :class:`Fail`.

Tool-less requests whose system prompt asks for a *title* (OpenCode's session-title
generation) are answered with :attr:`LLMStub.title` whatever the script. Answers stream as SSE
(``data: {chat.completion.chunk}`` lines, a final chunk with ``finish_reason`` and ``usage``,
then ``data: [DONE]``) when the request has ``"stream": true``, plain JSON otherwise.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.model_server import (
    Fail,
    Hang,
    RecordedRequest,
    Reply,
    ScriptedHandler,
    ScriptedServer,
    Text,
    ToolCall,
    reply_label,
)

__all__ = [
    "ChatRequest",
    "Fail",
    "Hang",
    "LLMStub",
    "RecordedRequest",
    "Reply",
    "Text",
    "ToolCall",
]

MODEL_ID = "scripted"


@dataclass(frozen=True)
class ChatRequest:
    """A parsed ``/v1/chat/completions`` body with helpers for scripts."""

    body: dict[str, Any]
    index: int  # 0-based count of completion calls before this one

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages") or []
        return [m for m in msgs if isinstance(m, dict)]

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                names.append(fn["name"])
        return names

    @property
    def has_tool_result(self) -> bool:
        return any(m.get("role") == "tool" for m in self.messages)

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    def system_text(self) -> str:
        return "\n".join(
            _content_text(m.get("content")) for m in self.messages if m.get("role") == "system"
        )

    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _content_text(m.get("content"))
        return ""

    @property
    def is_title_request(self) -> bool:
        return not self.tool_names and "title" in self.system_text().lower()


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class _ChatHandler(ScriptedHandler):
    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self.record(None, "models")
            created = int(time.time())
            self.send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": MODEL_ID, "object": "model", "created": created, "owned_by": "stub"}
                    ],
                },
            )
        else:
            self.not_found()

    def do_POST(self) -> None:
        body = self.read_body()
        if not self.path.rstrip("/").endswith("/chat/completions") or not isinstance(body, dict):
            self.not_found(body)
            return
        req = ChatRequest(body, self.owner.next_call())
        reply = self.owner.decide(req)
        self.record(body, "title" if req.is_title_request else reply_label(reply))
        if isinstance(reply, Fail):
            self.send_json(
                reply.status,
                {"error": {"message": reply.message, "type": "server_error", "code": None}},
            )
            return
        model = str(body.get("model") or MODEL_ID)
        if req.stream:
            self._stream(reply, model, req.index)
        else:
            self._whole(reply, model, req.index)

    @staticmethod
    def _usage() -> dict[str, int]:
        return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

    def _whole(self, reply: Text | ToolCall | Hang, model: str, index: int) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if isinstance(reply, ToolCall):
            message["tool_calls"] = [
                {
                    "id": reply.call_id,
                    "type": "function",
                    "function": {"name": reply.name, "arguments": json.dumps(reply.arguments)},
                }
            ]
            finish = "tool_calls"
        elif isinstance(reply, Hang):
            if not self.stall():
                return
            message["content"] = reply.first + reply.rest
        else:
            message["content"] = reply.text
        self.send_json(
            200,
            {
                "id": f"chatcmpl-{index}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": self._usage(),
            },
        )

    def _stream(self, reply: Text | ToolCall | Hang, model: str, index: int) -> None:
        self.start_sse()
        base = {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bool:
            obj = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            obj.update(extra)
            return self.sse(json.dumps(obj))

        if not chunk({"role": "assistant", "content": ""}):
            return
        finish = "stop"
        if isinstance(reply, ToolCall):
            call = {
                "index": 0,
                "id": reply.call_id,
                "type": "function",
                "function": {"name": reply.name, "arguments": json.dumps(reply.arguments)},
            }
            if not chunk({"tool_calls": [call]}):
                return
            finish = "tool_calls"
        elif isinstance(reply, Hang):
            if not chunk({"content": reply.first}):
                return
            if not self.stall():
                return
            if not chunk({"content": reply.rest}):
                return
        else:
            # Two pieces, so clients see a real stream.
            half = max(1, len(reply.text) // 2)
            for piece in (reply.text[:half], reply.text[half:]):
                if piece and not chunk({"content": piece}):
                    return
        if not chunk({}, finish, usage=self._usage()):
            return
        self.sse("[DONE]")


@dataclass
class LLMStub(ScriptedServer):
    """The chat-completions server (see the module docstring for scripts)."""

    handler = _ChatHandler
    model_path = "/chat/completions"
    title: str = "Fake title"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.origin}/v1"

    def decide(self, req: ChatRequest) -> Reply:
        if req.is_title_request:
            return Text(self.title)
        return self.scripted(req, self._write)

    def _write(self, req: ChatRequest) -> Reply:
        if self.cwd is not None and not req.has_tool_result:
            path = str(Path(self.cwd) / self.file_name)
            if "write" in req.tool_names:
                return ToolCall("write", {"filePath": path, "content": self.file_content})
            if "edit" in req.tool_names:
                args = {"filePath": path, "oldString": "", "newString": self.file_content}
                return ToolCall("edit", args)
        return Text(self.text)
