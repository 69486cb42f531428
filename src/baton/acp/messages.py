"""The few ACP messages baton sends and reads, as plain data: builders and parsers.

baton sends ``initialize``, ``session/new``, ``session/resume``, ``session/load``,
``session/prompt`` and ``session/cancel``, and acts on three answers. Loading the
ACP SDK's pydantic models for that costs most of a second at start-up, so they are
built and read here, with the SDK (``agent-client-protocol``, pinned) kept as the
test oracle (``tests/acp/test_messages_oracle.py``): the same answers are accepted
and rejected, and the values baton reads are the same.

The SDK's reading rules, followed here:

* an authoritative field (``protocolVersion``, ``sessionId``, ``stopReason``) that is
  missing or malformed rejects the answer (:class:`MalformedAnswer`; the caller maps it
  to :class:`~baton.errors.RemoteProtocolError`);
* a descriptive field that is malformed falls back to its default (capabilities,
  ``agentInfo``, ``_meta``, usage, modes) and a malformed ``authMethods`` item is
  skipped, as the SDK's ``salvage_on_error`` / ``skip_invalid_items`` do;
* scalars are read in pydantic's lax mode (``"1"`` and ``True`` are the integer 1,
  ``"yes"`` is true), keys by their wire name or else their Python name;
* unknown fields are kept: each parsed answer carries its raw dict.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from baton.errors import RemoteProtocolError
from baton.jsontypes import JsonMapping, JsonObject, JsonValue

__all__ = [
    "PROTOCOL_VERSION",
    "STOP_REASONS",
    "AgentCapabilities",
    "InitializeAnswer",
    "MalformedAnswer",
    "NewSessionAnswer",
    "PromptAnswer",
    "cancel_params",
    "initialize_params",
    "new_session_params",
    "parse_initialize",
    "parse_new_session",
    "parse_prompt",
    "reopen_params",
]

PROTOCOL_VERSION = 1

STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})

_MAX_U16 = 65535
_INT_TEXT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?", re.ASCII)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class MalformedAnswer(RemoteProtocolError):
    """An answer's authoritative field is missing or malformed (the agent's fault);
    :func:`baton.acp.client.parse` names the method it answered."""


# -- outbound ----------------------------------------------------------------


def initialize_params(*, client_meta: JsonMapping, version: str) -> JsonObject:
    """``initialize``: baton serves files and terminals, and says who it is."""
    capabilities: dict[str, Any] = {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": True,
        "auth": {"terminal": False},
    }
    if client_meta:
        capabilities["_meta"] = dict(client_meta)
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": "baton", "title": "baton", "version": version},
    }


def new_session_params(
    *,
    cwd: str,
    mcp_servers: Sequence[JsonMapping],
    meta: JsonMapping | None = None,
) -> JsonObject:
    """``session/new``; MCP server entries go out as given (vendor fields included);
    ``meta``: the profile's ``_meta`` for the agent (e.g. Claude's setting sources)."""
    params: dict[str, Any] = {"cwd": cwd, "mcpServers": [dict(s) for s in mcp_servers]}
    if meta:
        params["_meta"] = dict(meta)
    return params


def reopen_params(
    *,
    session_id: str,
    cwd: str,
    mcp_servers: Sequence[JsonMapping],
    meta: JsonMapping | None = None,
) -> JsonObject:
    """``session/resume`` and ``session/load`` take the same params."""
    return {
        "sessionId": session_id,
        **new_session_params(cwd=cwd, mcp_servers=mcp_servers, meta=meta),
    }


def cancel_params(session_id: str) -> JsonObject:
    return {"sessionId": session_id}


# -- inbound -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentCapabilities:
    """The capabilities the handshake acts on."""

    load_session: bool = False
    resume: bool = False
    """``sessionCapabilities.resume`` is advertised (an object, even ``{}``)."""
    mcp_http: bool = False
    """``mcpCapabilities.http``: the agent connects to MCP servers over HTTP."""


@dataclass(frozen=True, slots=True)
class InitializeAnswer:
    protocol_version: int
    capabilities: AgentCapabilities | None
    """``None`` when the agent sent ``agentCapabilities: null``."""
    auth_method_ids: tuple[str, ...] = ()
    agent_info: dict[str, Any] | None = None
    """``{name, title?, version, _meta?}`` when well-formed, else ``None``."""
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewSessionAnswer:
    session_id: str
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PromptAnswer:
    stop_reason: str
    raw: dict[str, Any] = field(default_factory=dict)


def parse_initialize(raw: JsonValue) -> InitializeAnswer:
    answer = _object(raw)
    version = _lax_int(_get(answer, "protocolVersion", "protocol_version", _MISSING))
    if version is None or not 0 <= version <= _MAX_U16:
        raise MalformedAnswer("protocolVersion: an integer from 0 to 65535 is required")
    caps = _get(answer, "agentCapabilities", "agent_capabilities", {})
    methods = _get(answer, "authMethods", "auth_methods", [])
    if methods is not None and not isinstance(methods, list):
        raise MalformedAnswer("authMethods: a list is required")
    return InitializeAnswer(
        protocol_version=version,
        capabilities=None if caps is None else _capabilities(caps),
        auth_method_ids=tuple(i for i in map(_auth_method_id, methods or []) if i is not None),
        agent_info=_implementation(_get(answer, "agentInfo", "agent_info", None)),
        raw=answer,
    )


def parse_new_session(raw: JsonValue) -> NewSessionAnswer:
    answer = _object(raw)
    session_id = _get(answer, "sessionId", "session_id", _MISSING)
    if not isinstance(session_id, str):
        raise MalformedAnswer("sessionId: a string is required")
    options = _get(answer, "configOptions", "config_options", None)
    if options is not None and not isinstance(options, list):
        raise MalformedAnswer("configOptions: a list is required")
    return NewSessionAnswer(session_id, answer)


def parse_prompt(raw: JsonValue) -> PromptAnswer:
    answer = _object(raw)
    reason = _get(answer, "stopReason", "stop_reason", _MISSING)
    if not isinstance(reason, str) or reason not in STOP_REASONS:
        raise MalformedAnswer(f"stopReason: one of {', '.join(sorted(STOP_REASONS))} is required")
    return PromptAnswer(reason, answer)


_MISSING: Any = object()


def _object(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise MalformedAnswer(f"an object is required, not {type(raw).__name__}")
    return raw


def _get(obj: Mapping[str, Any], alias: str, name: str, default: Any) -> Any:
    """A field by its wire name, else its Python name (the SDK populates by either)."""
    if alias in obj:
        return obj[alias]
    return obj.get(name, default)


def _lax_int(value: Any) -> int | None:
    """pydantic's lax integer, or ``None`` for what it refuses."""
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if _INT_TEXT.fullmatch(text):
            return int(text.split(".", 1)[0])
    return None


def _lax_bool(value: Any, default: bool = False) -> bool:
    """pydantic's lax boolean; what it refuses is ``default`` (the SDK salvages)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return default


def _capabilities(caps: Any) -> AgentCapabilities:
    if not isinstance(caps, dict):
        return AgentCapabilities()
    session = _get(caps, "sessionCapabilities", "session_capabilities", None)
    resume = _get(session, "resume", "resume", None) if isinstance(session, dict) else None
    mcp = _get(caps, "mcpCapabilities", "mcp_capabilities", None)
    return AgentCapabilities(
        load_session=_lax_bool(_get(caps, "loadSession", "load_session", False)),
        resume=isinstance(resume, dict),
        mcp_http=isinstance(mcp, dict) and _lax_bool(mcp.get("http", False)),
    )


def _auth_method_id(item: Any) -> str | None:
    """Every ACP auth method has a string ``id`` and ``name``; others are skipped."""
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        method_id = item.get("id")
        return method_id if isinstance(method_id, str) else None
    return None


def _implementation(info: Any) -> dict[str, Any] | None:
    """``agentInfo`` as the SDK dumps it (known fields only), or ``None`` if malformed."""
    if not isinstance(info, dict):
        return None
    name, version = info.get("name"), info.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return None
    out: dict[str, Any] = {"name": name}
    title = info.get("title")
    if isinstance(title, str):
        out["title"] = title
    out["version"] = version
    meta = _get(info, "_meta", "field_meta", None)
    if isinstance(meta, dict):
        out["_meta"] = meta
    return out
