"""Reading a request's params with the ACP schema's meaning of each error.

Both ends of a baton conversation check what a request carries here: the client methods
baton serves (``fs/*``, ``terminal/*``, ``session/request_permission``) and the methods of
its built-in agent. The schema's error table, as these checks apply it:

* a member of the wrong JSON type, a required member missing (or ``null`` where the
  schema does not allow it), a number out of its range, params that are not an object:
  **invalid params** (-32602), naming the member;
* well-formed params naming something that is not there (a session, a file, a terminal):
  **resource not found** (-32002), raised by the caller (:meth:`RpcError.not_found`);
* a method nobody serves: **method not found** (-32601);
* a failure of the side answering: **internal error** (-32603).

Every function raises :class:`~baton.acp.jsonrpc.RpcError` and returns the value typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baton.acp.jsonrpc import RpcError
from baton.jsontypes import JsonMapping, JsonValue

__all__ = [
    "UINT32_MAX",
    "UINT64_MAX",
    "object_params",
    "optional_array",
    "optional_text",
    "optional_uint",
    "required_text",
    "session_id",
    "string_array",
]

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1


def object_params(params: JsonValue) -> JsonMapping:
    """The params object (ACP params are always an object)."""
    if not isinstance(params, Mapping):
        raise RpcError.invalid_params("params must be an object")
    return params


def required_text(params: JsonMapping, key: str, *, non_empty: bool = False) -> str:
    """A required string member."""
    value = params.get(key)
    if value is None:
        raise RpcError.invalid_params(f"{key} is required")
    if not isinstance(value, str):
        raise RpcError.invalid_params(f"{key} must be a string, not {_json_type(value)}")
    if non_empty and not value:
        raise RpcError.invalid_params(f"{key} must not be empty")
    return value


def optional_text(params: JsonMapping, key: str) -> str | None:
    """A string member that may be absent or ``null``."""
    value = params.get(key)
    if value is not None and not isinstance(value, str):
        raise RpcError.invalid_params(f"{key} must be a string, not {_json_type(value)}")
    return value


def session_id(params: JsonMapping) -> str:
    """``sessionId``: required in every session-scoped request, a non-empty string."""
    return required_text(params, "sessionId", non_empty=True)


def optional_uint(params: JsonMapping, key: str, *, maximum: int = UINT64_MAX) -> int | None:
    """A non-negative integer member (``uint32``/``uint64`` in the schema) or ``None``."""
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise RpcError.invalid_params(
            f"{key} must be an integer from 0 to {maximum}, not {_shown(value)}"
        )
    return value


def optional_array(params: JsonMapping, key: str) -> list[JsonValue] | None:
    """An array member that may be absent or ``null``."""
    value = params.get(key)
    if value is not None and not isinstance(value, list):
        raise RpcError.invalid_params(f"{key} must be an array, not {_json_type(value)}")
    return value


def string_array(params: JsonMapping, key: str) -> list[str]:
    """An optional array of strings (absent or ``null``: empty)."""
    items = optional_array(params, key) or []
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise RpcError.invalid_params(
                f"{key}[{index}] must be a string, not {_json_type(item)}"
            )
    return items


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return _json_type(value)
