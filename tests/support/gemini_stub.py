"""A scripted Gemini API endpoint on loopback, for Gemini CLI (``gemini --acp``) offline.

Point the agent at it with ``GOOGLE_GEMINI_BASE_URL=<stub.origin>`` and any ``GEMINI_API_KEY``
(Gemini CLI accepts a plain-HTTP base URL on loopback only)::

    with GeminiStub(cwd=workspace) as stub:
        env = {"GOOGLE_GEMINI_BASE_URL": stub.origin, "GEMINI_API_KEY": "x"}

Endpoints: ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` (SSE, one
``GenerateContentResponse`` per ``data:`` line, the last with ``finishReason`` and
``usageMetadata``), ``POST …:generateContent`` (one JSON response), ``POST …:countTokens`` and
``GET /v1beta/models``.

The default script ``"write"``: if the request offers the ``write_file`` function and the
conversation has no ``functionResponse`` yet, one ``functionCall`` of ``write_file``
``{file_path, content}``; otherwise text. Requests without tools (Gemini CLI's routing,
next-speaker and summary calls) are *side* requests: one asking for JSON
(``responseMimeType``) is answered with :attr:`GeminiStub.side_json`, any other with
:attr:`GeminiStub.side_text`, whatever the script.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.support.model_server import (
    Fail,
    Hang,
    ModelRequest,
    RecordedRequest,
    Reply,
    ScriptedHandler,
    ScriptedServer,
    Text,
    ToolCall,
    reply_label,
)

__all__ = ["MODEL_ID", "GeminiRequest", "GeminiStub"]

MODEL_ID = "gemini-2.5-flash"
USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}


@dataclass(frozen=True)
class GeminiRequest(ModelRequest):
    """A parsed ``generateContent`` body with helpers for scripts."""

    @property
    def tool_names(self) -> list[str]:
        names: list[str] = []
        for tool in self.body.get("tools") or []:
            declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
            for declaration in declarations or []:
                if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                    names.append(declaration["name"])
        return names

    def parts(self, key: str) -> list[dict[str, Any]]:
        """Every part of the conversation carrying ``key`` (``text``, ``functionResponse``)."""
        out: list[dict[str, Any]] = []
        for content in self.body.get("contents") or []:
            for part in content.get("parts") or [] if isinstance(content, dict) else []:
                if isinstance(part, dict) and key in part:
                    out.append(part)
        return out

    @property
    def has_tool_result(self) -> bool:
        return bool(self.parts("functionResponse"))

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``functionResponse`` objects of the conversation, oldest first."""
        return [p["functionResponse"] for p in self.parts("functionResponse")]

    @property
    def wants_json(self) -> bool:
        config = self.body.get("generationConfig")
        return isinstance(config, dict) and config.get("responseMimeType") == "application/json"

    @property
    def is_side_request(self) -> bool:
        return not self.tool_names


def _candidate(parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return candidate


def _response(parts: list[dict[str, Any]], finish: str | None, model: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "candidates": [_candidate(parts, finish)],
        "modelVersion": model,
        "responseId": "scripted",
    }
    if finish is not None:
        response["usageMetadata"] = dict(USAGE)
    return response


class _GeminiHandler(ScriptedHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            self.record(None, "models")
            self.send_json(200, {"models": [{"name": f"models/{MODEL_ID}"}]})
        else:
            self.not_found()

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path.split("?")[0]
        action = path.rpartition(":")[2]
        if action == "countTokens":
            self.record(body, "count_tokens")
            self.send_json(200, {"totalTokens": USAGE["promptTokenCount"]})
            return
        if action not in ("generateContent", "streamGenerateContent") or not isinstance(body, dict):
            self.not_found(body)
            return
        model = path.rpartition("/models/")[2].partition(":")[0] or MODEL_ID
        req = GeminiRequest(body, self.owner.next_call())
        reply = self.owner.decide(req)
        self.record(body, "side" if req.is_side_request else reply_label(reply))
        if isinstance(reply, Fail):
            error = {"code": reply.status, "message": reply.message, "status": "INTERNAL"}
            self.send_json(reply.status, {"error": error})
        elif action == "streamGenerateContent":
            self._stream(reply, model)
        else:
            self._whole(reply, model)

    def _whole(self, reply: Text | ToolCall | Hang, model: str) -> None:
        if isinstance(reply, Hang):
            if not self.stall():
                return
            reply = Text(reply.first + reply.rest)
        self.send_json(200, _response(_parts(reply), "STOP", model))

    def _stream(self, reply: Text | ToolCall | Hang, model: str) -> None:
        self.start_sse()
        if isinstance(reply, ToolCall):
            self.sse(json.dumps(_response(_parts(reply), "STOP", model)))
            return
        text = reply.first if isinstance(reply, Hang) else reply.text
        half = max(1, len(text) // 2)
        if not self.sse(json.dumps(_response([{"text": text[:half]}], None, model))):
            return
        if isinstance(reply, Hang):
            if not self.stall():
                return
            rest = reply.rest
        else:
            rest = text[half:]
        self.sse(json.dumps(_response([{"text": rest}], "STOP", model)))


def _parts(reply: Text | ToolCall) -> list[dict[str, Any]]:
    if isinstance(reply, ToolCall):
        call = {"name": reply.name, "args": reply.arguments, "id": reply.call_id}
        return [{"functionCall": call}]
    return [{"text": reply.text}]


@dataclass
class GeminiStub(ScriptedServer):
    handler = _GeminiHandler
    model_path = ":generateContent"
    side_text: str = "Scripted summary"
    side_json: dict[str, Any] = field(
        default_factory=lambda: {
            "reasoning": "scripted",
            "model_choice": "flash",
            "next_speaker": "user",
        }
    )

    def completions(self) -> list[RecordedRequest]:
        """The recorded model calls, streamed or not."""
        return [
            r
            for r in self.requests
            if r.path.split("?")[0].endswith((":generateContent", ":streamGenerateContent"))
        ]

    def decide(self, req: GeminiRequest) -> Reply:
        if req.is_side_request:
            return Text(json.dumps(self.side_json) if req.wants_json else self.side_text)
        return self.scripted(req, self._write)

    def _write(self, req: GeminiRequest) -> Reply:
        if self.cwd is not None and not req.has_tool_result and "write_file" in req.tool_names:
            return ToolCall(
                "write_file",
                {"file_path": self.target_path(), "content": self.file_content},
                call_id=f"call_{req.index:04d}",
            )
        return Text(self.text)
