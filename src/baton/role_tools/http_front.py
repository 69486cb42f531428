"""The team loop's role tools over streamable HTTP, for agents that advertise it.

``http://HOST:PORT/mcp/<slot>`` with ``Authorization: Bearer <credential>``: the
slot in the path and the credential must match (:mod:`baton.role_tools.credentials`),
else 401 with the reason (404 for a slot nobody serves). ``HOST`` is loopback on one
machine; in cluster mode it is the coordinator's cluster address (``[cluster]
hub_address``), so role actors on other hosts reach it: plain HTTP, for a trusted
network (the bearer credential is per role session and dies with it). A request body
over :data:`MAX_BODY` is refused (413 when announced, the request dropped when it
grows past it), never truncated; the token is never logged. Each (slot, session) gets its
own ``mcp`` streamable-HTTP session manager over the same server the stdio shim reaches
(:mod:`baton.role_tools.hub`), stateless (no MCP session id: a restarted cluster
coordinator's hub serves the next request of an agent that lived on); rotating the slot's
credential stops the old session's manager. uvicorn serves it in the team loop's event loop without touching its
signals (``baton up`` owns SIGINT/SIGTERM), and only once a session needs it.

On a cluster a worker's role actor relays its agent's calls instead (``/calls/<slot>``: the
key of a call it recorded in the store, delivered once; ``/read/<slot>``: a reading tool),
with the same bearer credential (:mod:`baton.role_tools.delivery`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from baton.role_tools.credentials import Credentials, Refusal, SlotGrant

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["MAX_BODY", "HttpFront"]

log = logging.getLogger(__name__)

_SLOT_PATH = re.compile(r"/(mcp|calls|read)/([^/]{1,128})/?")
MAX_BODY = 8 * 1024 * 1024
"""The largest request body (a JSON-RPC message; tool arguments are <= 512 KiB), as the
hub's socket bounds a line."""
MAX_RELAYED = 1024 * 1024
"""The largest relayed request (``/calls``: a key; ``/read``: a reading tool's arguments)."""

Relayed = Callable[[str, str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""``(kind, slot, request) -> answer`` for ``/calls/<slot>`` and ``/read/<slot>``."""


class HttpFront:
    """Loopback streamable HTTP: ``/mcp/<slot>`` with ``Authorization: Bearer <credential>``."""

    def __init__(
        self,
        credentials: Credentials,
        server_for: Callable[[str], Awaitable[Any]],  # the slot's mcp Server (generic)
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        relayed: Relayed | None = None,
    ) -> None:
        self.credentials = credentials
        self.server_for = server_for
        self.relayed = relayed
        """A worker's role actor relaying its agent's calls (``/calls``, ``/read``)."""
        self.host, self.port = host, port
        self.base_url = ""
        self._managers: dict[tuple[str, int], tuple[Any, asyncio.Event, asyncio.Task[None]]] = {}
        self._lock = asyncio.Lock()
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._socket: Any = None

    async def start(self) -> None:
        import socket

        import uvicorn

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(64)
        sock.setblocking(False)
        self._socket = sock
        shown = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        self.base_url = f"http://{shown}:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = _quiet_server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="baton-mcp-http")

    @property
    def bound_port(self) -> int:
        """The port it listens on (chosen by the kernel when asked for 0)."""
        return int(self._socket.getsockname()[1]) if self._socket is not None else 0

    async def stop(self) -> None:
        tasks = [task for _, _, task in self._managers.values()]
        for key in list(self._managers):
            self._stop_manager(key)
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=5)
        if self._socket is not None:
            self._socket.close()

    def drop(self, slot: str, keep: int | None) -> None:
        for key in list(self._managers):
            if key[0] == slot and key[1] != keep:
                self._stop_manager(key)

    def _stop_manager(self, key: tuple[str, int]) -> None:
        _, stop, _ = self._managers.pop(key)
        stop.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        match = _SLOT_PATH.fullmatch(scope.get("path", ""))
        if match is None:
            await _deny(send, 404, "NOT_FOUND", "baton serves role tools at /mcp/<slot>")
            return
        token = _bearer(scope.get("headers") or [])
        verdict = self.credentials.check(unquote(match.group(2)), token)
        if isinstance(verdict, Refusal):
            log.warning("role MCP request refused: %s", verdict.message)
            status = 404 if verdict.code == "UNKNOWN_SLOT" else 401
            await _deny(send, status, verdict.code, verdict.message)
            return
        if match.group(1) != "mcp":
            await self._relay(match.group(1), verdict, receive, send)
            return
        if _declared_length(scope.get("headers") or []) > MAX_BODY:
            await _deny(send, 413, "TOO_LARGE", f"a request body is at most {MAX_BODY} bytes")
            return
        manager = await self._manager(verdict)
        if manager is None:  # the slot's session was replaced meanwhile
            await _deny(send, 401, "CREDENTIAL_REPLACED", "this session of the slot was replaced")
            return
        await manager.handle_request(scope, _bounded(receive), send)

    async def _relay(self, kind: str, grant: SlotGrant, receive: Receive, send: Send) -> None:
        """A relayed call (``POST``, a JSON object): its answer, as JSON."""
        if self.relayed is None:
            await _deny(send, 404, "NOT_FOUND", "this hub takes no relayed calls")
            return
        body = b""
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > MAX_RELAYED:
                await _deny(
                    send, 413, "TOO_LARGE", f"a relayed call is at most {MAX_RELAYED} bytes"
                )
                return
            if not message.get("more_body"):
                break
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            await _deny(send, 400, "BAD_REQUEST", "a relayed call is a JSON object")
            return
        answer = await self.relayed(kind, grant.slot, request)
        data = json.dumps(answer, ensure_ascii=False).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _manager(self, grant: SlotGrant) -> Any:
        """The session manager of ``grant``'s slot session; None once it is not current."""
        key = (grant.slot, grant.generation)
        async with self._lock:
            held = self._managers.get(key)
            if held is None:
                server = await self.server_for(grant.slot)
                if self.credentials.generation(grant.slot) != grant.generation:
                    return None  # rotated while the server was being built: drop() ran
                from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

                # Stateless: every request stands alone (its bearer checked above), so an
                # agent whose coordinator restarted goes on with the new one's hub at the
                # same address; an MCP session id would die with the old process.
                manager = StreamableHTTPSessionManager(app=server, stateless=True)
                ready, stop = asyncio.Event(), asyncio.Event()
                task = asyncio.create_task(_hold(manager, ready, stop), name=f"mcp-http-{key[0]}")
                held = self._managers[key] = (manager, stop, task)
                await ready.wait()
        return held[0]


async def _hold(manager: Any, ready: asyncio.Event, stop: asyncio.Event) -> None:
    async with manager.run():
        ready.set()
        await stop.wait()


def _declared_length(headers: Any) -> int:
    """The body's announced ``content-length`` (0 when absent; unreadable counts as too big)."""
    for name, value in headers:
        if name.lower() == b"content-length":
            text = bytes(value).decode("latin-1").strip()
            return int(text) if text.isdigit() and len(text) < 16 else MAX_BODY + 1
    return 0


def _bounded(receive: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    """``receive`` that turns a body growing past :data:`MAX_BODY` into a disconnect (the
    request is dropped, never handed on cut short)."""
    seen = 0

    async def bounded() -> Any:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY:
                log.warning("role MCP request dropped: its body passed %d bytes", MAX_BODY)
                return {"type": "http.disconnect"}
        return message

    return bounded


def _bearer(headers: Any) -> str:
    for name, value in headers:
        if name.lower() == b"authorization":
            text = bytes(value).decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip()
    return ""


async def _deny(send: Callable[..., Any], status: int, code: str, message: str) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message, "data": code}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _quiet_server(config: Any) -> Any:
    """A uvicorn server without its signal capture: ``baton up`` owns SIGINT/SIGTERM."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer(config)
