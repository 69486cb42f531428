"""The asyncio JSON-RPC peer over an agent's stdio.

Inbound order is the contract: one reader loop decodes frames and dispatches them
*inline*, so ``session/update`` notifications reach the handler in arrival order
(the SDK's task-per-message dispatch can reorder them). An inbound request is
*admitted* inline too (:meth:`InboundHandler.on_request`: whatever changes state, such
as recording a permission request, happens before the next frame), and only its
answer is awaited in a task, so a request waiting for a human never stalls the update
stream. Responses to our own requests resolve futures directly in the reader.

Each frame is handled in isolation: if handling one raises (a bug in baton), that
frame gets a typed error (:class:`~baton.errors.FrameHandlingError`, reported through
:meth:`InboundHandler.on_fault`; a request is answered with an internal error) and the
reader goes on, so a bug never reads as "the agent exited".

A handler may defer what a run of notifications emits (a flood is handled per run,
not per update): the run ends before any other frame of the same read
(:meth:`InboundHandler.on_run_end`, so a response resolves only after the updates sent
before it) and at the end of the read (:meth:`InboundHandler.on_batch_end`).

Length: the reader loop, the writer and the pending requests they share; the handler
protocol is the contract of both.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from baton.acp import jsonrpc
from baton.acp.framing import (
    DEFAULT_MAX_LINE_BYTES,
    Frame,
    FrameError,
    LineDecoder,
    decode_line,
    encode_message,
)
from baton.acp.jsonrpc import JsonRpcId, Notification, Request, Response, RpcError
from baton.acp.transport import ByteReader, ByteWriter
from baton.errors import (
    AgentExited,
    AgentTimeout,
    FrameHandlingError,
    RemoteCallError,
    RemoteProtocolError,
)
from baton.jsontypes import JsonObject, JsonValue

READ_CHUNK = 256 * 1024

logger = logging.getLogger(__name__)

FrameObserver = Callable[[str, dict[str, Any]], None]
"""Called with ("client"|"agent", message) for every frame: the trace tap."""

FrameHook = Callable[[], Awaitable[None] | None]
"""Called once per read that holds frames (a malformed one too), before the first is
handled: the agent spoke (every frame of one read arrived at the same moment, so once
per read says all a silence watch needs, at a twentieth of the calls of a flood). What
it returns, if anything, is awaited first (the running turn's ``turn.resumed``)."""


class InboundHandler(Protocol):
    """What the connection needs from the client side above it."""

    async def on_notification(self, method: str, params: JsonValue) -> None:
        """Handle one notification; awaited inline, so keep it short (enqueue, reduce).

        What it emits may wait for :meth:`on_run_end`, called before any other frame
        that follows notifications, or for :meth:`on_batch_end`."""

    async def on_request(self, request: Request) -> Awaitable[JsonValue]:
        """Admit a request, in arrival order; the returned awaitable's value is the result.

        Awaited inline before the next frame: do here everything that changes state
        (normalize, record, emit). The awaitable is awaited in a task and may wait (for
        a human, a terminal's exit). Raise :class:`RpcError` (here or from the
        awaitable) to answer with an error.
        """

    async def on_protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        """A frame or message that could not be processed (already skipped)."""

    async def on_response_written(self, request_id: JsonRpcId, ok: bool) -> None:
        """Our answer to ``request_id`` has been written to the agent's pipe."""

    async def on_run_end(self) -> None:
        """A request, a response or a bad frame follows notifications in the same read:
        emit what they deferred, so that it comes first."""

    async def on_batch_end(self) -> None:
        """Every frame of one read has been dispatched (a point to flush coalesced text)."""

    async def on_fault(self, error: FrameHandlingError) -> None:
        """Handling one frame raised (a bug in baton): make it visible; the reader goes on."""


class NoDeferral:
    """The three hooks of :class:`InboundHandler` that a handler which defers nothing and
    waits for no written answer leaves empty (the login handshake, the Cursor SDK face).
    Stateless: a handler inherits the no-ops, not attributes."""

    async def on_response_written(self, request_id: JsonRpcId, ok: bool) -> None:
        return None

    async def on_run_end(self) -> None:
        return None

    async def on_batch_end(self) -> None:
        return None


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
        self._run: tuple[str, int] | None = None  # the run's last notification: method, frame
        self.on_frame: FrameHook | None = None

    # ------------------------------------------------------------------ outbound

    async def send(self, message: JsonObject) -> None:
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

    async def send_request(self, method: str, params: JsonValue) -> asyncio.Future[JsonValue]:
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

    async def request(
        self, method: str, params: JsonValue, *, timeout: float | None = None
    ) -> JsonValue:
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

    async def notify(self, method: str, params: JsonValue) -> None:
        await self.send(jsonrpc.notification(method, params))

    # ------------------------------------------------------------------- inbound

    async def run(self) -> None:
        """Read until EOF; then fail every outstanding request. Never raises for bad input."""
        reason = "agent closed its stdout"
        try:
            while True:
                chunk = await self._reader.read(READ_CHUNK)
                if not chunk:
                    break
                self.bytes_in += len(chunk)
                lines = self._decoder.lines(chunk)
                if lines and self.on_frame is not None:
                    await self._isolated(None, self._heard())
                for line in lines:
                    item = line if isinstance(line, FrameError) else decode_line(line)
                    if item is not None:
                        await self._dispatch_isolated(item)
                await self._run_end(self._handler.on_batch_end())
            for leftover in self._decoder.close():
                await self._isolated(None, self._handler.on_protocol_error(leftover))
        except asyncio.CancelledError:
            reason = "connection closed by baton"
            raise
        except Exception as exc:  # reading the pipe failed (handling frames cannot raise)
            reason = f"reading the agent's stdout failed: {type(exc).__name__}"
            raise
        finally:
            self._shutdown(ConnectionClosed(reason, returncode=None))
            for task in list(self._request_tasks):
                task.cancel()
            if self._request_tasks:
                await asyncio.gather(*self._request_tasks, return_exceptions=True)

    async def _dispatch_isolated(self, item: Frame | FrameError) -> None:
        """One frame, in isolation: a fault while handling it is reported, never raised."""
        if isinstance(item, Frame):
            self.frames_in += 1
        try:
            if isinstance(item, FrameError):
                if self._run is not None:
                    await self._run_end(self._handler.on_run_end())
                await self._handler.on_protocol_error(item)
                return
            message = item.message
            if self._observer is not None:
                self._observer("agent", message)
            kind = jsonrpc.classify(message)
            if isinstance(kind, Notification):  # a flood's frames: no coroutine in between
                self._run = (kind.method, self.frames_in)
                await self._handler.on_notification(kind.method, kind.params)
            else:
                if self._run is not None:  # what the notifications before it said comes first
                    await self._run_end(self._handler.on_run_end())
                await self._dispatch_message(kind)
        except Exception as exc:  # a bug in baton: this frame's error, not the connection's
            await self._report(_method_of(item.message) if isinstance(item, Frame) else None, exc)

    async def _run_end(self, step: Awaitable[None]) -> None:
        """End the run (``step``: the handler's end of it); a fault is the run's last frame's."""
        run, self._run = self._run, None
        await self._isolated(run[0] if run else None, step, run[1] if run else None)

    async def _isolated(
        self, method: str | None, step: Awaitable[None], frame: int | None = None
    ) -> None:
        try:
            await step
        except Exception as exc:  # a bug in baton: this frame's error, not the connection's
            await self._report(method, exc, frame)

    async def _report(self, method: str | None, exc: Exception, frame: int | None = None) -> None:
        error = FrameHandlingError(method, self.frames_in if frame is None else frame, exc)
        error.__cause__ = exc
        logger.error("%s", error, exc_info=exc)
        try:
            await self._handler.on_fault(error)
        except Exception:  # the report itself failed (a broken store): the log has it
            logger.exception("reporting %s failed", error)

    async def _heard(self) -> None:
        if self.on_frame is not None and (first := self.on_frame()) is not None:
            await first

    async def _dispatch_message(self, kind: Request | Response | jsonrpc.Invalid) -> None:
        """Everything but a notification."""
        if isinstance(kind, Response) and kind.id is not None:
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
            await self._start_request(kind)
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

    async def _start_request(self, request: Request) -> None:
        """Admit inline (arrival order); answer from a task (it may wait for a human)."""
        frame = self.frames_in
        method = request.method[:MAX_METHOD_CHARS]
        try:
            awaitable = await self._handler.on_request(request)
        except RpcError as exc:
            awaitable = _raise_later(exc)
        except Exception as exc:  # a bug in baton: answered, reported, the reader goes on
            await self._report(method, exc, frame)
            awaitable = _raise_later(_internal_error(method))
        task = asyncio.create_task(self._answer(request, awaitable, frame), name="answer-request")
        self._request_tasks.add(task)
        task.add_done_callback(self._request_tasks.discard)

    async def _answer(self, request: Request, awaitable: Awaitable[Any], frame: int) -> None:
        try:
            value = await awaitable
        except RpcError as exc:
            await self._answer_error(request.id, exc.code, exc.message, exc.data)
            return
        except Exception as exc:  # a handler bug must still answer the agent, and be seen
            method = request.method[:MAX_METHOD_CHARS]
            await self._report(method, exc, frame)
            error = _internal_error(method)
            await self._answer_error(request.id, error.code, error.message)
            return
        try:
            await self.send(jsonrpc.result(request.id, value))
            ok = True
        except ConnectionClosed:
            ok = False
        try:
            await self._handler.on_response_written(request.id, ok)
        except Exception as exc:  # a hook's bug is reported for this frame
            await self._report(request.method[:MAX_METHOD_CHARS], exc, frame)

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


def _internal_error(method: str) -> RpcError:
    """What the agent is told when baton failed on its request (no detail: it is ours)."""
    return RpcError(jsonrpc.INTERNAL_ERROR, f"internal error in the client handling {method}")


MAX_METHOD_CHARS = 200


def _method_of(message: Any) -> str | None:
    """A frame's method for a fault report (bounded: it is the agent's text)."""
    method = message.get("method") if isinstance(message, dict) else None
    if isinstance(method, str):
        return method[:MAX_METHOD_CHARS]
    return "response" if isinstance(message, dict) and "id" in message else None


def protocol_error_text(error: FrameError | jsonrpc.Invalid) -> str:
    if isinstance(error, FrameError):
        return f"{error.kind}: {error.detail}"
    return f"invalid message: {error.reason}"


__all__ = [
    "ConnectionClosed",
    "FrameObserver",
    "InboundHandler",
    "JsonRpcConnection",
    "NoDeferral",
    "RemoteProtocolError",
    "protocol_error_text",
]
