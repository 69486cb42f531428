"""An httpx transport that streams an ASGI app's response as it is sent.

``httpx.ASGITransport`` (0.28) collects the whole body before returning, so an
endless SSE response would never come back. This transport runs the app in a
task and hands each ``http.response.body`` chunk to the response stream as it
arrives; closing the response tells the app the client disconnected
(``http.disconnect``) and waits for it to finish, so a test also proves the
server side cleans up. About as small as httpx's own ``MockTransport``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.types import ASGIApp, Message


class _Body(httpx.AsyncByteStream):
    def __init__(
        self, chunks: asyncio.Queue[bytes | None], task: asyncio.Task[None], gone: asyncio.Event
    ) -> None:
        self._chunks = chunks
        self._task = task
        self._gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._chunks.get()
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        self._gone.set()
        await asyncio.wait_for(self._task, 10)


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Like ``httpx.ASGITransport``, but the body streams (one request body chunk only)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": ("127.0.0.1", 123),
            "root_path": "",
        }
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        started: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        gone = asyncio.Event()
        sent_request = False

        async def receive() -> Message:
            nonlocal sent_request
            if not sent_request:
                sent_request = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.set_result(message)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    chunks.put_nowait(message["body"])
                if not message.get("more_body", False):
                    chunks.put_nowait(None)

        async def run() -> None:
            try:
                await self._app(scope, receive, send)
            except BaseException as exc:
                if not started.done():
                    started.set_exception(exc)
                raise
            finally:
                chunks.put_nowait(None)

        task = asyncio.create_task(run())
        start = await started
        return httpx.Response(
            start["status"], headers=start.get("headers", []), stream=_Body(chunks, task, gone)
        )
