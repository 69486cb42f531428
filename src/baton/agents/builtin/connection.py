"""The agent's end of a JSON-RPC connection: dispatch in arrival order, ordered writes.

Lines are handled synchronously as they arrive: a notification runs to completion, a request
starts its handler task and a response settles the matching outgoing call. Handlers that record
their state before their first ``await`` therefore see messages in wire order. Writes go out in
call order; a dead peer closes the connection instead of raising into the agent.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from baton.acp.framing import Frame, FrameError
from baton.errors import BuiltinAgentError

from .jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    Invalid,
    JsonObject,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
    error_response,
    frame_message,
    result_response,
)
from .stdio import Output

__all__ = [
    "Connection",
    "ConnectionClosed",
    "NotificationHandler",
    "OutgoingCall",
    "RequestHandler",
]

log = logging.getLogger(__name__)

RequestHandler = Callable[[JsonObject], Awaitable[Any]]
NotificationHandler = Callable[[JsonObject], None]
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class ConnectionClosed(BuiltinAgentError):
    """The client went away before answering."""


@dataclass(frozen=True, slots=True)
class OutgoingCall:
    """A request we sent: its id (to withdraw it) and the future of its result."""

    id: int
    result: "asyncio.Future[Any]"


class Connection:
    """Routes incoming lines to handlers and carries our own requests to the client."""

    def __init__(self, output: Output, spawn: Spawn) -> None:
        self._output = output
        self._spawn = spawn
        self._requests: Mapping[str, RequestHandler] = {}
        self._notifications: Mapping[str, NotificationHandler] = {}
        self._pending: dict[RequestId, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._closed = False
        self.lost = asyncio.Event()

    def route(
        self,
        requests: Mapping[str, RequestHandler],
        notifications: Mapping[str, NotificationHandler],
    ) -> None:
        """Install the method tables (before the first line is received)."""
        self._requests = requests
        self._notifications = notifications

    def receive(self, frame: Frame | FrameError) -> None:
        """Handle one decoded input line (or the error a bad line became)."""
        match frame_message(frame):
            case Request() as request:
                self._spawn(self._answer(request))
            case Notification(method=method, params=params):
                self._notify_handler(method, params)
            case Response() as response:
                self._settle(response)
            case Invalid(id=request_id, error=error):
                log.warning("rejecting input line: %s", error.message)
                self._write(error_response(request_id, error))

    async def notify(self, method: str, params: JsonObject) -> None:
        """Send a notification and wait until the pipe has room again."""
        self._write({"jsonrpc": "2.0", "method": method, "params": params})
        await self._drain()

    def call(self, method: str, params: JsonObject) -> OutgoingCall:
        """Send a request; the returned future fails with `RpcError` or `ConnectionClosed`."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        call_id = self._next_id
        self._next_id += 1
        if self._closed:
            future.set_exception(ConnectionClosed(method))
            return OutgoingCall(call_id, future)
        self._pending[call_id] = future
        self._write({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params})
        return OutgoingCall(call_id, future)

    def withdraw(self, call: OutgoingCall) -> None:
        """Stop waiting for ``call`` and ask the client to drop it (``$/cancel_request``)."""
        if self._pending.pop(call.id, None) is None:
            return
        if not call.result.done():
            call.result.cancel()
        self._write(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": call.id}}
        )

    def close(self) -> None:
        """Fail every outstanding call; later writes are dropped; `lost` is set."""
        self._closed = True
        self.lost.set()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed("the client went away"))

    async def _answer(self, request: Request) -> None:
        handler = self._requests.get(request.method)
        if handler is None:
            error = RpcError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
            self._write(error_response(request.id, error))
            await self._drain()
            return
        try:
            result = await handler(request.params)
        except RpcError as exc:
            self._write(error_response(request.id, exc))
        except Exception as exc:  # a handler's bug answers -32603, never ends the agent
            log.exception("%s failed", request.method)
            self._write(
                error_response(request.id, RpcError(INTERNAL_ERROR, f"Internal error: {exc}"))
            )
        else:
            self._write(result_response(request.id, result))
        await self._drain()

    def _notify_handler(self, method: str, params: JsonObject) -> None:
        handler = self._notifications.get(method)
        if handler is None:
            log.debug("ignoring notification %s", method)
            return
        try:
            handler(params)
        except Exception:  # no answer to send: a handler bug is logged
            log.exception("notification %s failed", method)

    def _settle(self, response: Response) -> None:
        future = self._pending.pop(response.id, None) if response.id is not None else None
        if future is None or future.done():
            log.debug("ignoring response to unknown request %r", response.id)
        elif response.error is not None:
            future.set_exception(response.error)
        else:
            future.set_result(response.result)

    def _write(self, message: JsonObject) -> None:
        if self._closed:
            return
        try:
            data = encode(message)
        except (TypeError, ValueError) as exc:
            log.exception("cannot encode a message")
            if "id" not in message or "method" in message:
                return
            error = RpcError(INTERNAL_ERROR, f"Internal error: unencodable result: {exc}")
            data = encode(error_response(message["id"], error))
        try:
            self._output.write(data)
        except OSError as exc:
            log.warning("client stdout is gone: %s", exc)
            self.close()

    async def _drain(self) -> None:
        if self._closed:
            return
        try:
            await self._output.drain()
        except (OSError, RuntimeError) as exc:
            log.warning("client stdout is gone: %s", exc)
            self.close()
