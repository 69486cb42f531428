"""What every scripted model server shares: loopback HTTP, recording, SSE and stalls.

The three scripted servers speak one provider API each, so that a real agent from npm runs a
deterministic turn offline:

* :mod:`tests.support.llm_stub`: OpenAI chat completions (OpenCode, Qwen);
* :mod:`tests.support.anthropic_stub`: Anthropic Messages (``claude-agent-acp``);
* :mod:`tests.support.responses_stub`: OpenAI Responses (Zed ``codex-acp``).

Each answers a model call with what its *script* returns: :class:`Text`, :class:`ToolCall`,
:class:`Hang` (stream a first piece, then stall until :meth:`ScriptedServer.release` or until
the client goes away) or :class:`Fail` (an HTTP error). The API-specific part is only the
request view and the wire encoding; everything else (threaded server, the recorded requests,
waiting for replies, the stall that notices a disconnect) is here, once.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "Fail",
    "Hang",
    "ModelRequest",
    "RecordedRequest",
    "Reply",
    "ScriptedHandler",
    "ScriptedServer",
    "Text",
    "ToolCall",
]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = "call_1"
    custom: bool = False
    """A freeform (custom) tool: ``arguments["input"]`` is sent as raw text (Responses API)."""
    namespace: str | None = None
    """A tool inside a Responses-API ``namespace`` tool (codex offers MCP servers so)."""


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
class ModelRequest:
    """A parsed model-call body (Messages, Responses): the helpers scripts share."""

    body: dict[str, Any]
    index: int
    """0-based count of model calls before this one."""

    @property
    def tool_names(self) -> list[str]:
        return [
            t["name"]
            for t in self.body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        ]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any
    reply: str = ""  # what the server answered: "models", "text", "tool:write", "title", ...


def reply_label(reply: Reply) -> str:
    if isinstance(reply, ToolCall):
        return f"tool:{reply.name}"
    return {Text: "text", Hang: "hang", Fail: "fail"}[type(reply)]


@dataclass
class ScriptedServer:
    """Base of the scripted servers. Use ``with Server(...) as s:`` or :meth:`start`/:meth:`stop`.

    Subclasses set :attr:`handler` (a :class:`ScriptedHandler` subclass) and
    :attr:`model_path` (the path suffix of model calls, for :meth:`completions`).
    """

    handler: ClassVar[type[ScriptedHandler]]
    model_path: ClassVar[str]

    cwd: str | Path | None = None
    script: Any = "write"
    file_name: str = "hello.txt"
    file_content: str = "hello from the scripted model\n"
    text: str = "Done: the file is written."
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

    def start(self) -> Any:
        owner = self

        class Handler(self.handler):  # type: ignore[name-defined,misc]
            server_owner = owner

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

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    def release(self) -> None:
        """Let stalled ``hang`` replies finish."""
        self._released.set()

    # -- inspection ----------------------------------------------------------------------------

    def wait_for_replies(self, *labels: str, timeout: float = 10.0) -> list[str]:
        """Block until the model replies include ``labels`` (as a multiset); return them.

        Raises ``TimeoutError`` after ``timeout`` seconds. From asyncio use
        ``asyncio.to_thread``.
        """

        def satisfied() -> bool:
            replies = self.replies()
            return all(replies.count(label) >= labels.count(label) for label in set(labels))

        with self._changed:
            if not self._changed.wait_for(satisfied, timeout):
                raise TimeoutError(f"model replies {self.replies()} lack {labels}")
        return self.replies()

    def completions(self) -> list[RecordedRequest]:
        """The recorded model calls (not model listings, token counts or 404s)."""
        return [r for r in self.requests if r.path.split("?")[0].endswith(self.model_path)]

    def replies(self) -> list[str]:
        return [r.reply for r in self.completions()]

    def record(self, method: str, path: str, body: Any, reply: str) -> None:
        with self._changed:
            self.requests.append(RecordedRequest(method, path, body, reply))
            self._changed.notify_all()

    def next_call(self) -> int:
        with self._lock:
            n = self._calls
            self._calls += 1
            return n

    def scripted(self, request: Any, default: Callable[[Any], Reply]) -> Reply:
        """The reply of :attr:`script` for ``request`` (named scripts or a callable)."""
        script = self.script
        if callable(script):
            reply: Reply = script(request)
            return reply
        if script in ("hang", "slow"):
            return Hang()
        if script == "fail":
            return Fail()
        if script == "text":
            return Text(self.text)
        if script == "write":
            return default(request)
        raise ValueError(f"unknown script {script!r}")

    def target_path(self) -> str:
        assert self.cwd is not None, "the write script needs cwd"
        return str(Path(self.cwd) / self.file_name)


class ScriptedHandler(BaseHTTPRequestHandler):
    """HTTP plumbing of one request; subclasses implement ``do_GET``/``do_POST``."""

    server_owner: ClassVar[ScriptedServer]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    @property
    def owner(self) -> Any:
        return self.server_owner

    def read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, body: Any, reply: str) -> None:
        self.owner.record(self.command, self.path, body, reply)

    def not_found(self, body: Any = None) -> None:
        self.record(body, "404")
        self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, data: str, event: str | None = None) -> bool:
        """One SSE event; False when the client went away."""
        head = f"event: {event}\n" if event else ""
        try:
            self.wfile.write(f"{head}data: {data}\n\n".encode())
            self.wfile.flush()
        except OSError:
            return False
        return True

    def stall(self) -> bool:
        """Wait for release; False if the client went away or the server is stopping."""
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
