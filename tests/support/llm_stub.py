"""A scripted OpenAI-compatible chat-completions endpoint on loopback (standard library only).

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
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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
class Text:
    text: str


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = "call_1"


@dataclass(frozen=True)
class Hang:
    """Stream ``first`` then stall until released (then send ``rest``) or disconnected."""

    first: str = "Working on it"
    rest: str = " ... done."


@dataclass(frozen=True)
class Fail:
    status: int = 500
    message: str = "scripted failure"


Reply = Text | ToolCall | Hang | Fail


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any
    reply: str = ""  # what the stub answered: "models", "text", "tool:write", "title", ...


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


@dataclass
class LLMStub:
    """The stub server. Start with ``with LLMStub(...) as stub:`` or :meth:`start`/:meth:`stop`."""

    cwd: str | Path | None = None
    script: str | Callable[[ChatRequest], Reply] = "write"
    file_name: str = "hello.txt"
    file_content: str = "hello from the scripted model\n"
    text: str = "Done: the file is written."
    title: str = "Fake title"
    requests: list[RecordedRequest] = field(default_factory=list)
    #: Set when a client disconnected while a ``hang`` reply was stalled (e.g. on cancel).
    aborted: threading.Event = field(default_factory=threading.Event)
    #: Set when a ``hang`` reply has sent its first chunk and is stalling.
    stalled: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._changed = threading.Condition()
        self._released = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._calls = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LLMStub:
        stub = self

        class Handler(_Handler):
            owner = stub

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> LLMStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def release(self) -> None:
        """Let stalled ``hang`` replies finish."""
        self._released.set()

    # -- inspection ----------------------------------------------------------------------------

    def wait_for_replies(self, *labels: str, timeout: float = 10.0) -> list[str]:
        """Block until the completion replies include ``labels`` (as a multiset); return them.

        E.g. ``stub.wait_for_replies("fail", "fail")`` waits for two failed calls. Raises
        ``TimeoutError`` after ``timeout`` seconds. From asyncio use ``asyncio.to_thread``.
        """

        def satisfied() -> bool:
            replies = self.replies()
            return all(replies.count(label) >= labels.count(label) for label in set(labels))

        with self._changed:
            if not self._changed.wait_for(satisfied, timeout):
                raise TimeoutError(f"stub replies {self.replies()} lack {labels}")
        return self.replies()

    def completions(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def replies(self) -> list[str]:
        return [r.reply for r in self.completions()]

    # -- scripting -----------------------------------------------------------------------------

    def decide(self, req: ChatRequest) -> Reply:
        if req.is_title_request:
            return Text(self.title)
        script = self.script
        if callable(script):
            return script(req)
        if script in ("hang", "slow"):
            return Hang()
        if script == "fail":
            return Fail()
        if script == "write" and self.cwd is not None and not req.has_tool_result:
            path = str(Path(self.cwd) / self.file_name)
            if "write" in req.tool_names:
                return ToolCall("write", {"filePath": path, "content": self.file_content})
            if "edit" in req.tool_names:
                args = {"filePath": path, "oldString": "", "newString": self.file_content}
                return ToolCall("edit", args)
        if script not in ("write", "text"):
            raise ValueError(f"unknown script {script!r}")
        return Text(self.text)

    def _next_call(self) -> int:
        with self._lock:
            n = self._calls
            self._calls += 1
            return n


class _Handler(BaseHTTPRequestHandler):
    owner: LLMStub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing --------------------------------------------------------------------------------

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: Any, reply: str) -> None:
        with self.owner._changed:
            self.owner.requests.append(RecordedRequest(self.command, self.path, body, reply))
            self.owner._changed.notify_all()

    # -- endpoints -------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._record(None, "models")
            created = int(time.time())
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": MODEL_ID, "object": "model", "created": created, "owned_by": "stub"}
                    ],
                },
            )
        else:
            self._record(None, "404")
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        body = self._read_body()
        if not self.path.rstrip("/").endswith("/chat/completions") or not isinstance(body, dict):
            self._record(body, "404")
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        req = ChatRequest(body, self.owner._next_call())
        reply = self.owner.decide(req)
        label = {
            Text: "text",
            Hang: "hang",
            Fail: "fail",
        }.get(type(reply), "")
        if isinstance(reply, ToolCall):
            label = f"tool:{reply.name}"
        if req.is_title_request:
            label = "title"
        self._record(body, label)
        if isinstance(reply, Fail):
            self._send_json(
                reply.status,
                {"error": {"message": reply.message, "type": "server_error", "code": None}},
            )
            return
        model = str(body.get("model") or MODEL_ID)
        if req.stream:
            self._stream(reply, model, req.index)
        else:
            self._whole(reply, model, req.index)

    # -- answers -----------------------------------------------------------------------------------

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
            if not self._stall():
                return
            message["content"] = reply.first + reply.rest
        else:
            message["content"] = reply.text
        self._send_json(
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
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bool:
            obj = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            obj.update(extra)
            return self._sse(json.dumps(obj))

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
            if not self._stall():
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
        self._sse("[DONE]")

    def _sse(self, data: str) -> bool:
        try:
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()
        except OSError:
            return False
        return True

    def _stall(self) -> bool:
        """Wait for release; False if the client went away or the stub is stopping."""
        owner = self.owner
        owner.stalled.set()
        sock = self.connection
        while not owner._released.is_set():
            if owner._stopping.is_set():
                return False
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)  # b"" means the peer closed
                except OSError:
                    peek = b""
                if not peek:
                    owner.aborted.set()
                    return False
        return True
