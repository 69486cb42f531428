"""JSON-RPC 2.0 for the agent side of ACP: decoded frames in, typed messages out (no I/O).

Framing (lines, the size bound, UTF-8/JSON decoding, encoding), the classification rules
and the error codes are baton's one implementation in :mod:`baton.acp.framing` and
:mod:`baton.acp.jsonrpc` (so this agent reads a message exactly as baton's client does).
This module adds what an *agent* needs on top: every possible input becomes a message or
an `Invalid` carrying the exact JSON-RPC error to answer (a request's params must be an
object), so the connection never has to catch parse failures.
"""

from dataclasses import dataclass, field
from typing import Any

from baton.acp import jsonrpc
from baton.acp.framing import Frame, FrameError, decode_line
from baton.acp.framing import encode_message as encode
from baton.acp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    RpcError,
)
from baton.jsontypes import JsonObject

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
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "encode",
    "error_response",
    "frame_message",
    "parse_message",
    "result_response",
]

RequestId = int | str


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
    frame = decode_line(line)
    if frame is None:
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: empty line"))
    return frame_message(frame)


def frame_message(frame: Frame | FrameError) -> Incoming:
    """Classify one decoded frame from :class:`baton.acp.framing.LineDecoder`."""
    if isinstance(frame, FrameError):
        if frame.kind == "oversized":
            return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: line too long"))
        if frame.kind == "not_object":
            return Invalid(
                None, RpcError(INVALID_REQUEST, "Invalid Request: expected a JSON object")
            )
        return Invalid(None, RpcError(PARSE_ERROR, f"Parse error: {frame.detail}"))
    return _classify(frame.message)


def _classify(message: JsonObject) -> Incoming:
    kind = jsonrpc.classify(message)
    if isinstance(kind, jsonrpc.Request):
        params = {} if kind.params is None else kind.params
        if not isinstance(params, dict):
            return Invalid(kind.id, RpcError(INVALID_PARAMS, "Invalid params: expected an object"))
        return Request(kind.id, kind.method, params)
    if isinstance(kind, jsonrpc.Notification):
        return Notification(kind.method, kind.params if isinstance(kind.params, dict) else {})
    if isinstance(kind, jsonrpc.Response):
        if kind.error is None:
            return Response(kind.id, result=kind.result)
        error = kind.error
        return Response(
            kind.id, error=RpcError(error["code"], str(error.get("message", "")), error.get("data"))
        )
    if kind.response:  # a malformed answer to one of our calls fails that call
        return Response(
            kind.id, error=RpcError(INTERNAL_ERROR, f"malformed response: {kind.reason}")
        )
    return Invalid(kind.id, RpcError(INVALID_REQUEST, f"Invalid Request: {kind.reason}"))


result_response = jsonrpc.result
"""A success response (baton's one builder)."""


def error_response(request_id: RequestId | None, error: RpcError) -> JsonObject:
    """An error response (``id`` null when the request's id could not be read)."""
    return jsonrpc.error(request_id, error.code, error.message, error.data)
