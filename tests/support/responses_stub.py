"""A scripted OpenAI Responses endpoint on loopback, for Zed ``codex-acp`` offline.

Codex speaks only the Responses API (``wire_api = "responses"``). Point its provider at
``<stub.base_url>`` (``http://127.0.0.1:PORT/v1``)::

    with ResponsesStub(cwd=workspace) as stub:
        config = codex_config(stub.base_url)   # tests.support.agents

Endpoints: ``POST /v1/responses`` streamed as SSE (``response.created``,
``response.output_item.added``, text or argument deltas, ``response.output_item.done``,
``response.completed`` with usage) and ``GET /v1/models``.

The default script ``"write"``, for a conversation with no tool output yet: with the freeform
``apply_patch`` tool on offer, a patch adding :attr:`file_name`; else with ``exec_command``, a
shell command writing it with ``sandbox_permissions: "require_escalated"`` (without bubblewrap
Codex cannot sandbox a command, and an escalated one asks the client first); otherwise text.
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

__all__ = ["MODEL_ID", "ResponsesRequest", "ResponsesStub", "shell_quote"]

MODEL_ID = "scripted"
USAGE = {
    "input_tokens": 21,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 30,
}
_TOOL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@dataclass(frozen=True)
class ResponsesRequest(ModelRequest):
    """A parsed ``/v1/responses`` body with helpers for scripts."""

    @property
    def input_items(self) -> list[dict[str, Any]]:
        items = self.body.get("input")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    @property
    def has_tool_result(self) -> bool:
        return any(i.get("type") in _TOOL_OUTPUTS for i in self.input_items)

    def tool_outputs(self) -> list[str]:
        return [str(i.get("output")) for i in self.input_items if i.get("type") in _TOOL_OUTPUTS]


class _ResponsesHandler(ScriptedHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            self.record(None, "models")
            self.send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": MODEL_ID, "object": "model", "owned_by": "stub"}],
                },
            )
        else:
            self.not_found()

    def do_POST(self) -> None:
        body = self.read_body()
        if not self.path.split("?")[0].rstrip("/").endswith("/responses") or not isinstance(
            body, dict
        ):
            self.not_found(body)
            return
        req = ResponsesRequest(body, self.owner.next_call())
        reply = self.owner.decide(req)
        self.record(body, reply_label(reply))
        if isinstance(reply, Fail):
            self.send_json(
                reply.status,
                {"error": {"message": reply.message, "type": "server_error", "code": None}},
            )
            return
        self._stream(reply, str(body.get("model") or MODEL_ID), req.index)

    def _event(self, name: str, **fields: Any) -> bool:
        return self.sse(json.dumps({"type": name, **fields}), event=name)

    def _stream(self, reply: Text | ToolCall | Hang, model: str, index: int) -> None:
        self.start_sse()
        response: dict[str, Any] = {
            "id": f"resp_{index:04d}",
            "object": "response",
            "created_at": 1767225600,
            "status": "in_progress",
            "model": model,
            "output": [],
        }
        if not self._event("response.created", response=response):
            return
        if isinstance(reply, ToolCall):
            item = self._tool_item(reply, index)
            added = {**item, "status": "in_progress"}
            if reply.custom:
                added["input"] = ""
            else:
                added["arguments"] = ""
            if not self._event("response.output_item.added", output_index=0, item=added):
                return
            if not self._event("response.output_item.done", output_index=0, item=item):
                return
        else:
            item_id = f"msg_{index:04d}"
            text = reply.first if isinstance(reply, Hang) else reply.text
            added = {
                "type": "message",
                "id": item_id,
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            if not self._event("response.output_item.added", output_index=0, item=added):
                return
            if not self._delta(item_id, text):
                return
            if isinstance(reply, Hang):
                if not self.stall():
                    return
                if not self._delta(item_id, reply.rest):
                    return
                text += reply.rest
            item = {
                **added,
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            if not self._event("response.output_item.done", output_index=0, item=item):
                return
        done = {**response, "status": "completed", "output": [item], "usage": dict(USAGE)}
        self._event("response.completed", response=done)

    def _delta(self, item_id: str, text: str) -> bool:
        return self._event(
            "response.output_text.delta",
            item_id=item_id,
            output_index=0,
            content_index=0,
            delta=text,
        )

    @staticmethod
    def _tool_item(reply: ToolCall, index: int) -> dict[str, Any]:
        if reply.custom:
            return {
                "type": "custom_tool_call",
                "id": f"ctc_{index:04d}",
                "status": "completed",
                "call_id": reply.call_id,
                "name": reply.name,
                "input": str(reply.arguments.get("input", "")),
            }
        item = {
            "type": "function_call",
            "id": f"fc_{index:04d}",
            "status": "completed",
            "call_id": reply.call_id,
            "name": reply.name,
            "arguments": json.dumps(reply.arguments),
        }
        if reply.namespace is not None:
            item["namespace"] = reply.namespace
        return item


@dataclass
class ResponsesStub(ScriptedServer):
    handler = _ResponsesHandler
    model_path = "/v1/responses"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.origin}/v1"

    def decide(self, req: ResponsesRequest) -> Reply:
        return self.scripted(req, self._write)

    def _write(self, req: ResponsesRequest) -> Reply:
        if self.cwd is None or req.has_tool_result:
            return Text(self.text)
        call_id = f"call_{req.index:04d}"
        if "apply_patch" in req.tool_names:
            lines = "".join(f"+{line}\n" for line in self.file_content.splitlines())
            patch = f"*** Begin Patch\n*** Add File: {self.target_path()}\n{lines}*** End Patch\n"
            return ToolCall("apply_patch", {"input": patch}, call_id=call_id, custom=True)
        if "exec_command" in req.tool_names:
            command = f"printf %s {shell_quote(self.file_content)} > {shell_quote(self.file_name)}"
            return ToolCall(
                "exec_command",
                {
                    "cmd": command,
                    "workdir": str(self.cwd),
                    "sandbox_permissions": "require_escalated",
                    "justification": "Write the file the user asked for.",
                },
                call_id=call_id,
            )
        return Text(self.text)
