"""JSON-RPC 2.0 message classification, sans-I/O: the one reading of the spec.

Turns decoded objects into :class:`Request`, :class:`Notification`,
:class:`Response` or :class:`Invalid`, and builds outgoing messages. baton's client
connection and its built-in agent (:mod:`baton.agents.builtin.jsonrpc`) share these
rules, so both ends of a baton conversation read a message the same way:

* a missing ``"jsonrpc"`` member is tolerated (real agents omit it harmlessly); any
  other value than ``"2.0"`` is invalid;
* an id is a string or an integer (never a boolean or a float); a request's id is
  never ``null``; a response's id is ``null`` only for an error that answers an
  unreadable request (a parse error), as the spec says;
* a response has exactly one of ``result`` and ``error``; an error is an object with an
  integer ``code``.

An :class:`Invalid` says whether it was an answer to one of our requests
(``response=True``: fail that request) or something to answer with an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.errors import BatonError
from baton.jsontypes import JsonObject, JsonValue

__all__ = [
    "AUTH_REQUIRED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "Invalid",
    "JsonRpcId",
    "Message",
    "Notification",
    "Request",
    "Response",
    "RpcError",
    "classify",
    "error",
    "notification",
    "request",
    "result",
]

JsonRpcId = int | str

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


@dataclass(frozen=True, slots=True)
class Request:
    id: JsonRpcId
    method: str
    params: Any


@dataclass(slots=True)  # not frozen: one per frame of a flood, and a frozen init costs 3x
class Notification:
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Response:
    id: JsonRpcId | None
    """``None`` only for an error answering a request whose id could not be read."""
    result: Any = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A JSON object that is not a valid JSON-RPC message; ``id`` if one was readable."""

    reason: str
    id: JsonRpcId | None = None
    response: bool = False
    """It was shaped as an answer to one of our requests (fail that one, do not answer)."""


Message = Request | Notification | Response | Invalid


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def classify(obj: JsonObject) -> Message:
    """Classify one decoded JSON object."""
    is_response = "method" not in obj and ("result" in obj or "error" in obj)
    version = obj.get("jsonrpc", "2.0")
    if version != "2.0":
        return Invalid(
            f"unsupported jsonrpc version {version!r}", _id_or_none(obj), response=is_response
        )
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str) or not method:
            return Invalid("method must be a non-empty string", _id_or_none(obj))
        params = obj.get("params")
        if "id" in obj:
            if not _valid_id(obj["id"]):
                return Invalid("request id must be a string or an integer")
            return Request(obj["id"], method, params)
        return Notification(method, params)
    if is_response:
        return _response(obj)
    if "id" in obj:
        return Invalid("neither a request, a notification nor a response", _id_or_none(obj))
    return Invalid("neither a request, a notification nor a response")


def _response(obj: dict[str, Any]) -> Message:
    msg_id = obj.get("id")
    if msg_id is not None and not _valid_id(msg_id):
        return Invalid("response id must be a string or an integer", response=True)
    if "result" in obj and "error" in obj:
        return Invalid("a response needs exactly one of result and error", msg_id, response=True)
    if "error" in obj:
        error = obj["error"]
        if not isinstance(error, dict) or type(error.get("code")) is not int:
            return Invalid("error must be an object with an integer code", msg_id, response=True)
        return Response(msg_id, error=error)
    if msg_id is None:
        return Invalid("a result needs the id of its request", response=True)
    return Response(msg_id, result=obj["result"])


def _id_or_none(obj: dict[str, Any]) -> JsonRpcId | None:
    value = obj.get("id")
    return value if _valid_id(value) else None


def request(msg_id: JsonRpcId, method: str, params: JsonValue) -> JsonObject:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: JsonValue) -> JsonObject:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(msg_id: JsonRpcId, value: JsonValue) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: JsonRpcId | None, code: int, message: str, data: JsonValue = None) -> JsonObject:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": err}


class RpcError(BatonError):
    """Raised by an inbound request handler to answer with a JSON-RPC error.

    The constructors carry ACP's code for each case, with its standard message first
    (``Resource not found: …``: some agents read the message, not only the code).
    """

    def __init__(self, code: int, message: str, data: JsonValue = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        """-32601: nobody serves this method here."""
        return cls(METHOD_NOT_FOUND, f"Method not found: {method}")

    @classmethod
    def invalid_params(cls, detail: str) -> RpcError:
        """-32602: the params do not fit the method (a type, a range, a missing member)."""
        return cls(INVALID_PARAMS, f"Invalid params: {detail}")

    @classmethod
    def not_found(cls, detail: str) -> RpcError:
        """-32002: well-formed params naming something that is not there (a session, a
        file, a terminal)."""
        return cls(RESOURCE_NOT_FOUND, f"Resource not found: {detail}")

    @classmethod
    def internal(cls, detail: str) -> RpcError:
        """-32603: the request was fine and the one answering failed."""
        return cls(INTERNAL_ERROR, f"Internal error: {detail}")
