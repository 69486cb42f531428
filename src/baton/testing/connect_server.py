"""A small Connect (JSON) server over HTTP/1.1, for the scripted Cursor bridge.

The Connect protocol as the ``cursor-sdk`` client speaks it: a unary call is
``POST /<service>/<Method>`` with ``Content-Type: application/json`` answered by one JSON
object; a server stream is ``application/connect+json``, the request one envelope and the
answer a sequence of envelopes (``flags``, a 4-byte length, JSON), the last one flagged
end-of-stream and carrying an ``error`` if the call failed. Every call needs the bearer
token and ``Connect-Protocol-Version: 1``. asyncio and h11, nothing else; an observer
sees every message both ways (the scripted bridge records its traffic with it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import h11

from baton.errors import BatonError
from baton.jsontypes import JsonMapping, JsonObject

__all__ = ["ConnectError", "ConnectServer", "Observer", "sdk_error_details"]

END_STREAM: Final = 0x02
MAX_BODY: Final = 16 << 20

Unary = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Stream = Callable[[dict[str, Any]], AsyncIterator[dict[str, Any]]]
Observer = Callable[[str, str, str, Any], None]
"""``(service, method, kind, message)``: kind ``request``, ``response``, ``stream``, ``error``."""

_HTTP_STATUS = {
    "invalid_argument": 400,
    "failed_precondition": 400,
    "out_of_range": 400,
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "already_exists": 409,
    "aborted": 409,
    "resource_exhausted": 429,
    "canceled": 499,
    "internal": 500,
    "unknown": 500,
    "data_loss": 500,
    "unimplemented": 501,
    "unavailable": 503,
    "deadline_exceeded": 504,
}

_SDK_CODES = {
    "SDK_ERROR_CODE_UNAUTHORIZED": 1,
    "SDK_ERROR_CODE_AGENT_NOT_FOUND": 6,
    "SDK_ERROR_CODE_RUN_NOT_FOUND": 7,
    "SDK_ERROR_CODE_VALIDATION_ERROR": 8,
    "SDK_ERROR_CODE_AGENT_BUSY": 15,
    "SDK_ERROR_CODE_RUN_NOT_CANCELLABLE": 17,
    "SDK_ERROR_CODE_INTERNAL_ERROR": 20,
}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sdk_error_details(sdk_code: str, message: str) -> JsonObject:
    """A Connect error detail carrying ``sdk.v1.SdkErrorDetails`` (binary and debug JSON)."""
    text = message.encode()
    value = b"\x10" + _varint(_SDK_CODES.get(sdk_code, 0)) + b"\x1a" + _varint(len(text)) + text
    return {
        "type": "sdk.v1.SdkErrorDetails",
        "value": base64.b64encode(value).decode().rstrip("="),
        "debug": {"sdkErrorCode": sdk_code, "message": message},
    }


class ConnectError(BatonError):
    """Answer the call with this Connect error (``code`` as Connect spells it)."""

    def __init__(self, code: str, message: str, sdk_code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.sdk_code = sdk_code

    def to_json(self) -> JsonObject:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.sdk_code:
            body["details"] = [sdk_error_details(self.sdk_code, self.message)]
        return body


def envelope(message: JsonMapping, *, end: bool = False) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return bytes([END_STREAM if end else 0]) + struct.pack(">I", len(body)) + body


@dataclass(kw_only=True, eq=False)
class ConnectServer:
    """Serves unary and server-streaming methods keyed ``"Service/Method"``."""

    token: str
    unary: Mapping[str, Unary]
    streams: Mapping[str, Stream]
    observer: Observer | None = None
    _server: asyncio.Server | None = field(default=None, init=False)

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._connection, host, port)
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def _see(self, path: str, kind: str, message: Any) -> None:
        if self.observer is not None:
            service, _, method = path.rpartition("/")
            self.observer(service, method, kind, message)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await _read_request(conn, reader)
                if request is None:
                    return
                await self._handle(conn, writer, request, body)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _handle(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        body: bytes,
    ) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        path = request.target.decode().lstrip("/")
        streaming = headers.get("content-type", "").startswith("application/connect+json")
        try:
            if not secrets.compare_digest(headers.get("authorization", ""), f"Bearer {self.token}"):
                raise ConnectError("unauthenticated", "missing or wrong bearer token")
            if headers.get("connect-protocol-version") != "1":
                raise ConnectError("invalid_argument", "Connect-Protocol-Version must be 1")
            message = _one_envelope(body) if streaming else json.loads(body or b"{}")
            if not isinstance(message, dict):
                raise ConnectError("invalid_argument", "the request is not a JSON object")
        except (ConnectError, ValueError) as exc:
            error = (
                exc if isinstance(exc, ConnectError) else ConnectError("invalid_argument", str(exc))
            )
            self._see(path, "error", error.to_json())
            await _send_unary_error(conn, writer, error)
            return
        self._see(path, "request", message)
        if streaming:
            await self._stream(conn, writer, path, message)
        else:
            await self._unary(conn, writer, path, message)

    async def _unary(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, path: str, message: dict[str, Any]
    ) -> None:
        handler = self.unary.get(path)
        try:
            if handler is None:
                raise ConnectError("unimplemented", f"{path} is not implemented by this bridge")
            answer = await handler(message)
        except ConnectError as exc:
            self._see(path, "error", exc.to_json())
            await _send_unary_error(conn, writer, exc)
            return
        self._see(path, "response", answer)
        data = json.dumps(answer).encode()
        await _send(
            conn,
            writer,
            _response(200, "application/json", len(data)),
            h11.Data(data=data),
            h11.EndOfMessage(),
        )

    async def _stream(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, path: str, message: dict[str, Any]
    ) -> None:
        handler = self.streams.get(path)
        await _send(conn, writer, _response(200, "application/connect+json", None))
        end: dict[str, Any] = {}
        try:
            if handler is None:
                raise ConnectError("unimplemented", f"{path} is not implemented by this bridge")
            async for item in handler(message):
                self._see(path, "stream", item)
                await _send(conn, writer, h11.Data(data=envelope(item)))
        except ConnectError as exc:
            end = {"error": exc.to_json()}
            self._see(path, "error", end["error"])
        await _send(conn, writer, h11.Data(data=envelope(end, end=True)), h11.EndOfMessage())


def _response(status: int, content_type: str, length: int | None) -> h11.Response:
    headers = [("Content-Type", content_type), ("Connect-Protocol-Version", "1")]
    if length is not None:
        headers.append(("Content-Length", str(length)))
    return h11.Response(status_code=status, headers=headers)


async def _send_unary_error(
    conn: h11.Connection, writer: asyncio.StreamWriter, error: ConnectError
) -> None:
    data = json.dumps(error.to_json()).encode()
    status = _HTTP_STATUS.get(error.code, 500)
    await _send(
        conn,
        writer,
        _response(status, "application/json", len(data)),
        h11.Data(data=data),
        h11.EndOfMessage(),
    )


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, *events: Any) -> None:
    for event in events:
        data = conn.send(event)
        if data:
            writer.write(data)
    await writer.drain()


async def _read_request(
    conn: h11.Connection, reader: asyncio.StreamReader
) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data and conn.their_state is h11.IDLE:
                return None, b""
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY:
                raise h11.RemoteProtocolError("request body too large")
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None, b""


def _one_envelope(body: bytes) -> Any:
    if len(body) < 5:
        raise ValueError("a streaming request needs one envelope")
    length = struct.unpack(">I", body[1:5])[0]
    if len(body) != 5 + length:
        raise ValueError("a streaming request carries exactly one envelope")
    return json.loads(body[5:])
