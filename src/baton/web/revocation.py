"""Open streams end when their session does (``baton serve --logout-all``).

A page's event streams stay open for hours; a session check at the start of a request
says nothing about minute ten. :func:`watched` serves a stream while asking, every
:data:`~baton.web.sessions.WATCH_S`, whether the session that opened it still holds,
and ends the response cleanly when it does not: the page's ``EventSource`` reconnects,
is refused, and the page says "log in again". With the validity cache
(:data:`~baton.web.sessions.CACHE_S`) a revocation from any process ends every stream
of the session within ``CACHE_S + WATCH_S`` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.aiotasks import cancel_and_wait
from baton.web.sessions import WATCH_S

__all__ = ["Check", "watched"]

Check = Callable[[], Awaitable[bool]]
"""Whether the request's session still holds (it reads the store at most every CACHE_S)."""


async def watched(app: ASGIApp, check: Check, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve a stream while its session holds; end it (cleanly) once it does not."""
    state = {"started": False, "done": False}

    async def tracked(message: Message) -> None:
        if message["type"] == "http.response.start":
            state["started"] = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            state["done"] = True
        await send(message)

    async def serve() -> None:
        await app(scope, receive, tracked)

    serving = asyncio.create_task(serve(), name="baton-web-watched")
    try:
        while not serving.done():
            await asyncio.wait({serving}, timeout=WATCH_S)
            if not serving.done() and not await check():
                break
    finally:
        if not serving.done():
            await cancel_and_wait([serving])
    if not serving.cancelled():
        serving.result()  # it ended by itself: its own outcome (or failure) stands
        return
    if state["started"] and not state["done"]:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif not state["started"]:
        ended = JSONResponse(
            {"error": "Unauthorized", "message": "the session ended: log in again"},
            status_code=401,
        )
        await ended(scope, receive, send)
