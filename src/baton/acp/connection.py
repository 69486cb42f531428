"""The asyncio JSON-RPC peer over an agent's stdio.

Inbound order is the contract: one reader loop decodes frames and dispatches them
*inline*, so ``session/update`` notifications reach the handler in arrival order
(the SDK's task-per-message dispatch can reorder them). Inbound requests are
*started* inline too (so a permission request is recorded in order), and answered
from a task, so a request waiting for a human never stalls the update stream.
Responses to our own requests resolve futures directly in the reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from baton.acp import jsonrpc
from baton.acp.framing import DEFAULT_MAX_LINE_BYTES, Frame, FrameError, LineDecoder, encode_message
from baton.acp.jsonrpc import JsonRpcId, Notification, Request, Response, RpcError
from baton.acp.transport import ByteReader, ByteWriter
from baton.errors import AgentExited, AgentTimeout, RemoteCallError, RemoteProtocolError

READ_CHUNK = 256 * 1024

logger = logging.getLogger(__name__)

FrameObserver = Callable[[str, dict[str, Any]], None]
"""Called with ("client"|"agent", message) for every frame: the trace tap."""

FrameHook = Callable[[], Awaitable[None] | None]
"""Called before each inbound frame (a malformed one too) is handled: the agent spoke.
What it returns, if anything, is awaited first (the running turn's ``turn.resumed``)."""


class InboundHandler(Protocol):
    """What the connection needs from the client side above it."""

    async def on_notification(self, method: str, params: Any) -> None:
        """Handle one notification; awaited inline, so keep it short (enqueue, reduce)."""

    def on_request(self, request: Request) -> Awaitable[Any]:
        """Start handling a request; the awaitable's value is the result.

        Raise :class:`RpcError` (here or from the awaitable) to answer with an error.
        """

    async def on_protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        """A frame or message that could not be processed (already skipped)."""

    async def on_response_written(self, request_id: JsonRpcId, ok: bool) -> None:
        """Our answer to ``request_id`` has been written to the agent's pipe."""

    async def on_batch_end(self) -> None:
        """Every frame of one read has been dispatched (a point to flush coalesced text)."""


class ConnectionClosed(AgentExited):
    """The agent's stdout closed while a request was outstanding."""


class JsonRpcConnection:
    """One JSON-RPC peer: send requests with deadlines, dispatch inbound in order."""

    def __init__(
        self,
        reader: ByteReader,
        writer: ByteWriter,
        handler: InboundHandler,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        observer: FrameObserver | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._handler = handler
        self._decoder = LineDecoder(max_line_bytes)
        self._observer = observer
        self._ids = itertools.count()
        self._pending: dict[JsonRpcId, tuple[str, asyncio.Future[Any]]] = {}
        self._request_tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()
        self._close_reason: BaseException | None = None
        self.frames_in = 0
        self.bytes_in = 0
        self.on_frame: FrameHook | None = None

    # ------------------------------------------------------------------ outbound

    async def send(self, message: dict[str, Any]) -> None:
        if self._observer is not None:
            self._observer("client", message)
        data = encode_message(message)
        if self._writer.is_closing():
            raise ConnectionClosed("agent stdin is closed", returncode=None)
        self._writer.write(data)
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise ConnectionClosed(f"agent stdin closed: {exc}", returncode=None) from exc

    async def send_request(self, method: str, params: Any) -> asyncio.Future[Any]:
        """Send a request; the returned future resolves with its result or typed error."""
        if self._closed.is_set():
            raise self._closed_error(method)
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = (method, future)
        try:
            await self.send(jsonrpc.request(msg_id, method, params))
        except BaseException:
            self._pending.pop(msg_id, None)
            raise
        future.add_done_callback(lambda _f: self._pending.pop(msg_id, None))
        return future

    async def request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; errors come back typed."""
        future = await self.send_request(method, params)
        if timeout is None:
            return await future
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise AgentTimeout(
                f"{method} got no answer within {timeout:g}s", operation=method, seconds=timeout
            ) from None

    async def notify(self, method: str, params: Any) -> None:
        await self.send(jsonrpc.notification(method, params))

    # ------------------------------------------------------------------- inbound

    async def run(self) -> None:
        """Read until EOF; then fail every outstanding request. Never raises for bad input."""
        try:
            while True:
                chunk = await self._reader.read(READ_CHUNK)
                if not chunk:
                    break
                self.bytes_in += len(chunk)
                for item in self._decoder.feed(chunk):
                    await self._dispatch_frame(item)
                await self._handler.on_batch_end()
            for leftover in self._decoder.close():
                await self._handler.on_protocol_error(leftover)
        finally:
            self._shutdown(ConnectionClosed("agent closed its stdout", returncode=None))
            for task in list(self._request_tasks):
                task.cancel()
            if self._request_tasks:
                await asyncio.gather(*self._request_tasks, return_exceptions=True)

    async def _dispatch_frame(self, item: Frame | FrameError) -> None:
        if self.on_frame is not None and (first := self.on_frame()) is not None:
            await first
        if isinstance(item, FrameError):
            await self._handler.on_protocol_error(item)
            return
        self.frames_in += 1
        message = item.message
        if self._observer is not None:
            self._observer("agent", message)
        kind = jsonrpc.classify(message)
        if isinstance(kind, Notification):
            await self._handler.on_notification(kind.method, kind.params)
        elif isinstance(kind, Response) and kind.id is not None:
            self._resolve(kind)
        elif isinstance(kind, Response):
            error = kind.error or {}
            await self._handler.on_protocol_error(
                jsonrpc.Invalid(
                    "the agent answered a request it could not read: "
                    f"{error.get('message', '')} (code {error.get('code')})",
                    response=True,
                )
            )
        elif isinstance(kind, Request):
            self._start_request(kind)
        else:
            await self._handler.on_protocol_error(kind)
            if kind.response:
                self._fail(kind)
            elif kind.id is not None:
                await self._answer_error(kind.id, jsonrpc.INVALID_REQUEST, kind.reason)

    def _resolve(self, response: Response) -> None:
        entry = self._pending.get(response.id) if response.id is not None else None
        if entry is None:
            return  # late answer to a request we stopped waiting for
        method, future = entry
        if future.done():
            return
        if response.error is not None:
            err = response.error
            future.set_exception(
                RemoteCallError(
                    method, int(err["code"]), str(err.get("message", "")), err.get("data")
                )
            )
        else:
            future.set_result(response.result)

    def _fail(self, invalid: jsonrpc.Invalid) -> None:
        """A malformed answer to one of our requests fails that request (the agent's fault)."""
        entry = self._pending.get(invalid.id) if invalid.id is not None else None
        if entry is not None and not entry[1].done():
            method, future = entry
            future.set_exception(
                RemoteProtocolError(f"{method}: the agent's answer is malformed: {invalid.reason}")
            )

    def _start_request(self, request: Request) -> None:
        try:
            awaitable = self._handler.on_request(request)
        except RpcError as exc:
            awaitable = _raise_later(exc)
        task = asyncio.create_task(
            self._answer(request, awaitable), name=f"answer-{request.method}"
        )
        self._request_tasks.add(task)
        task.add_done_callback(self._request_tasks.discard)

    async def _answer(self, request: Request, awaitable: Awaitable[Any]) -> None:
        try:
            value = await awaitable
        except RpcError as exc:
            await self._answer_error(request.id, exc.code, exc.message, exc.data)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler bug must still answer the agent, and be seen
            logger.exception("handler for %s failed", request.method)
            await self._answer_error(request.id, jsonrpc.INTERNAL_ERROR, f"client error: {exc}")
            return
        try:
            await self.send(jsonrpc.result(request.id, value))
        except ConnectionClosed:
            await self._handler.on_response_written(request.id, False)
            return
        await self._handler.on_response_written(request.id, True)

    async def _answer_error(
        self, msg_id: JsonRpcId, code: int, message: str, data: Any = None
    ) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.send(jsonrpc.error(msg_id, code, message, data))

    # ---------------------------------------------------------------- lifecycle

    def _closed_error(self, method: str) -> BaseException:
        reason = self._close_reason
        if isinstance(reason, AgentExited):
            return ConnectionClosed(f"{method}: {reason}", returncode=reason.returncode)
        return ConnectionClosed(f"{method}: connection closed", returncode=None)

    def _shutdown(self, reason: BaseException) -> None:
        if self._closed.is_set():
            return
        self._close_reason = reason
        self._closed.set()
        for method, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(self._closed_error(method))

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def fail_pending(self, error: BaseException) -> None:
        """Fail every outstanding request now (e.g. the process exited)."""
        self._shutdown(error)


async def _raise_later(exc: RpcError) -> Any:
    raise exc


def protocol_error_text(error: FrameError | jsonrpc.Invalid) -> str:
    if isinstance(error, FrameError):
        return f"{error.kind}: {error.detail}"
    return f"invalid message: {error.reason}"


__all__ = [
    "ConnectionClosed",
    "FrameObserver",
    "InboundHandler",
    "JsonRpcConnection",
    "RemoteProtocolError",
    "protocol_error_text",
]
