"""The daemon's role tools over loopback streamable HTTP, for agents that advertise it.

``http://127.0.0.1:PORT/mcp/<slot>`` with ``Authorization: Bearer <credential>``: the
slot in the path and the credential must match (:mod:`baton.coordination.hub_auth`),
else 401 with the reason (404 for a slot nobody serves). Each (slot, session) gets its
own ``mcp`` streamable-HTTP session manager over the same server the stdio shim reaches
(:mod:`baton.coordination.mcp_hub`); rotating the slot's credential stops the old
session's manager. uvicorn serves it in the daemon's event loop without touching its
signals (``baton up`` owns SIGINT/SIGTERM), and only once a session needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote

from baton.coordination.hub_auth import Credentials, Grant, Refusal

__all__ = ["HttpFront"]

log = logging.getLogger(__name__)

_SLOT_PATH = re.compile(r"/mcp/([^/]{1,128})/?")


class HttpFront:
    """Loopback streamable HTTP: ``/mcp/<slot>`` with ``Authorization: Bearer <credential>``."""

    def __init__(
        self, credentials: Credentials, server_for: Callable[[str], Awaitable[Any]]
    ) -> None:
        self.credentials = credentials
        self.server_for = server_for
        self.base_url = ""
        self._managers: dict[tuple[str, int], tuple[Any, asyncio.Event, asyncio.Task[None]]] = {}
        self._lock = asyncio.Lock()
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._socket: Any = None

    async def start(self) -> None:
        import socket

        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.setblocking(False)
        self._socket = sock
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
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

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        match = _SLOT_PATH.fullmatch(scope.get("path", ""))
        if match is None:
            await _deny(send, 404, "NOT_FOUND", "baton serves role tools at /mcp/<slot>")
            return
        token = _bearer(scope.get("headers") or [])
        verdict = self.credentials.check(unquote(match.group(1)), token)
        if isinstance(verdict, Refusal):
            log.warning("role MCP request refused: %s", verdict.message)
            status = 404 if verdict.code == "UNKNOWN_SLOT" else 401
            await _deny(send, status, verdict.code, verdict.message)
            return
        manager = await self._manager(verdict)
        if manager is None:  # the slot's session was replaced meanwhile
            await _deny(send, 401, "CREDENTIAL_REPLACED", "this session of the slot was replaced")
            return
        await manager.handle_request(scope, receive, send)

    async def _manager(self, grant: Grant) -> Any:
        """The session manager of ``grant``'s slot session; None once it is not current."""
        key = (grant.slot, grant.generation)
        async with self._lock:
            held = self._managers.get(key)
            if held is None:
                server = await self.server_for(grant.slot)
                if self.credentials.generation(grant.slot) != grant.generation:
                    return None  # rotated while the server was being built: drop() ran
                from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

                manager = StreamableHTTPSessionManager(app=server, session_idle_timeout=None)
                ready, stop = asyncio.Event(), asyncio.Event()
                task = asyncio.create_task(_hold(manager, ready, stop), name=f"mcp-http-{key[0]}")
                held = self._managers[key] = (manager, stop, task)
                await ready.wait()
        return held[0]


async def _hold(manager: Any, ready: asyncio.Event, stop: asyncio.Event) -> None:
    async with manager.run():
        ready.set()
        await stop.wait()


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
        def capture_signals(self) -> Any:
            yield

    return QuietServer(config)
