"""JSON-RPC 2.0 framing for ACP over stdio: bytes in, typed messages out (no I/O).

One JSON object per ``\\n``-terminated line. Every possible input line maps to a message or to
an `Invalid` carrying the error to answer, so the connection never has to catch parse failures.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "Incoming",
    "Invalid",
    "JsonObject",
    "LineSplitter",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "encode",
    "error_response",
    "parse_message",
    "result_response",
]

JsonObject = dict[str, Any]
RequestId = int | str

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    """A JSON-RPC error to send back (raised by handlers, or received from the peer)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> JsonObject:
        """The ``error`` member of a response."""
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True, slots=True)
class Request:
    """A call that expects an answer carrying the same ``id``."""

    id: RequestId
    method: str
    params: JsonObject


@dataclass(frozen=True, slots=True)
class Notification:
    """A call without ``id``: never answered, even on error."""

    method: str
    params: JsonObject


@dataclass(frozen=True, slots=True)
class Response:
    """The peer's answer to one of our requests: ``error`` set, or ``result``."""

    id: RequestId | None
    result: Any = None
    error: RpcError | None = None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A line we cannot act on; answered with ``error`` (``id`` None when it is unknown)."""

    id: RequestId | None
    error: RpcError = field(compare=False)


Incoming = Request | Notification | Response | Invalid


def parse_message(line: bytes) -> Incoming:
    """Classify one input line (without its newline)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return Invalid(None, RpcError(PARSE_ERROR, f"Parse error: {exc}"))
    if not isinstance(message, dict):
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: expected a JSON object"))
    has_id = "id" in message
    raw_id = message.get("id")
    if has_id and not _valid_id(raw_id):
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: bad id"))
    if message.get("jsonrpc") != "2.0":
        return Invalid(raw_id, RpcError(INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"'))
    method = message.get("method")
    if method is None and ("result" in message or "error" in message):
        return _response(raw_id, message)
    if not isinstance(method, str):
        return Invalid(
            raw_id, RpcError(INVALID_REQUEST, "Invalid Request: method must be a string")
        )
    params = message.get("params", {})
    if params is None:
        params = {}
    if not has_id:
        return Notification(method, params if isinstance(params, dict) else {})
    if raw_id is None:
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: id must not be null"))
    if not isinstance(params, dict):
        return Invalid(raw_id, RpcError(INVALID_PARAMS, "Invalid params: expected an object"))
    return Request(raw_id, method, params)


def _valid_id(value: object) -> bool:
    return value is None or isinstance(value, str) or type(value) is int


def _response(raw_id: RequestId | None, message: JsonObject) -> Incoming:
    error = message.get("error")
    if error is None:
        return Response(raw_id, result=message.get("result"))
    if isinstance(error, dict) and type(error.get("code")) is int:
        return Response(
            raw_id, error=RpcError(error["code"], str(error.get("message", "")), error.get("data"))
        )
    return Response(raw_id, error=RpcError(INTERNAL_ERROR, f"malformed error: {error!r}"))


def encode(message: JsonObject) -> bytes:
    """One wire line: compact UTF-8 JSON (newlines inside strings are escaped) plus ``\\n``."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def result_response(request_id: RequestId, result: Any) -> JsonObject:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: RpcError) -> JsonObject:
    """An error response (``id`` null when the request's id could not be read)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}


class LineSplitter:
    """Split a byte stream into lines, bounding memory: an over-long line is reported, not kept."""

    def __init__(self, max_line: int) -> None:
        self._max = max_line
        self._parts: list[bytes] = []
        self._size = 0
        self._discarding = False

    def feed(self, data: bytes) -> Iterator[bytes | None]:
        """Yield the complete non-blank lines in ``data``; None once for each over-long line."""
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            chunk = data[start:end]
            start = end + 1
            if self._discarding or self._size + len(chunk) > self._max:
                if not self._discarding:
                    yield None
                self._discarding = False
            else:
                line = b"".join([*self._parts, chunk])
                if line.strip():
                    yield line
            self._parts.clear()
            self._size = 0
        rest = data[start:]
        if self._discarding or not rest:
            return
        if self._size + len(rest) > self._max:
            self._discarding = True
            self._parts.clear()
            self._size = 0
            yield None
            return
        self._parts.append(rest)
        self._size += len(rest)

    def finish(self) -> Iterator[bytes]:
        """At end of input, yield a last line that had no newline."""
        line = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        if line.strip() and not self._discarding:
            yield line
