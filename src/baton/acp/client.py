"""Typed ACP calls from the client side, and the one place their errors are mapped.

:class:`AcpClient` builds each outbound request from ``agent-client-protocol``'s
models (pinned), validates the answers that baton acts on against them, and turns
what comes back into baton's error tree once: a JSON-RPC ``-32000`` to a session
call becomes :class:`~baton.errors.AuthRequired` naming the advertised methods; an
answer that does not match the schema becomes
:class:`~baton.errors.RemoteProtocolError` (the agent's fault, chained to the
validation error). Timeouts come typed from the connection
(:class:`~baton.errors.AgentTimeout`). Nothing here emits events or knows a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import acp.schema as acp_schema
from pydantic import BaseModel, ValidationError

import baton
from baton.acp import jsonrpc
from baton.acp.connection import ConnectionClosed, JsonRpcConnection
from baton.errors import AuthRequired, RemoteCallError, RemoteProtocolError

__all__ = ["PROTOCOL_VERSION", "AcpClient", "OpenedSession", "parse"]

PROTOCOL_VERSION = 1

_Model = TypeVar("_Model", bound=BaseModel)


def parse(model: type[_Model], raw: Any, method: str) -> _Model:
    """``raw`` as ``model``, or :class:`RemoteProtocolError`: only a validation failure
    is the agent's fault; anything else raised here is baton's bug and propagates."""
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        errors = exc.errors()
        detail = errors[0]["msg"] if errors else str(exc)
        raise RemoteProtocolError(
            f"{method}: the agent's answer does not match the ACP schema: {detail}"
        ) from exc


def _params(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True)


@dataclass(frozen=True, slots=True)
class OpenedSession:
    """What ``session/new``, ``session/load`` or ``session/resume`` returned."""

    session_id: str
    result: dict[str, Any]
    """The raw answer (modes, config options …), for settings and ``session.started``."""


class AcpClient:
    """The client side of one ACP connection, as typed calls."""

    def __init__(self, conn: JsonRpcConnection, *, agent_name: str) -> None:
        self.conn = conn
        self.agent_name = agent_name
        self.initialized: acp_schema.InitializeResponse | None = None

    @property
    def auth_methods(self) -> list[str]:
        if self.initialized is None:
            return []
        return [m.id for m in self.initialized.auth_methods or []]

    async def call(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        """One request with ACP's error mapping (the settings negotiation uses it too)."""
        try:
            return await self.conn.request(method, params, timeout=timeout)
        except RemoteCallError as exc:
            if exc.code == jsonrpc.AUTH_REQUIRED:
                methods = self.auth_methods
                raise AuthRequired(
                    f"{self.agent_name} requires authentication for {method} "
                    f"({exc.remote_message}); advertised methods: {', '.join(methods) or 'none'}",
                    auth_methods=methods,
                ) from exc
            raise

    async def initialize(
        self, *, client_meta: Mapping[str, Any], timeout: float
    ) -> acp_schema.InitializeResponse:
        request = acp_schema.InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=acp_schema.ClientCapabilities(
                fs=acp_schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
                field_meta=dict(client_meta) or None,
            ),
            client_info=acp_schema.Implementation(
                name="baton", title="baton", version=baton.__version__
            ),
        )
        raw = await self.call("initialize", _params(request), timeout=timeout)
        init = parse(acp_schema.InitializeResponse, raw, "initialize")
        if init.protocol_version != PROTOCOL_VERSION:
            raise RemoteProtocolError(
                f"agent speaks ACP protocol version {init.protocol_version}; "
                f"baton speaks {PROTOCOL_VERSION}"
            )
        self.initialized = init
        return init

    async def new_session(
        self, *, cwd: str, mcp_servers: Sequence[Mapping[str, Any]], timeout: float
    ) -> OpenedSession:
        # MCP server entries go out as given: the SDK's union would reshape them.
        params = _params(acp_schema.NewSessionRequest(cwd=cwd, mcp_servers=[]))
        params["mcpServers"] = [dict(s) for s in mcp_servers]
        raw = await self.call("session/new", params, timeout=timeout)
        parsed = parse(acp_schema.NewSessionResponse, raw, "session/new")
        return OpenedSession(parsed.session_id, raw if isinstance(raw, dict) else {})

    async def reopen_session(
        self,
        method: str,
        *,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[Mapping[str, Any]],
        timeout: float,
    ) -> OpenedSession:
        """``session/resume`` or ``session/load`` of ``session_id``."""
        model: type[BaseModel] = {
            "session/resume": acp_schema.ResumeSessionRequest,
            "session/load": acp_schema.LoadSessionRequest,
        }[method]
        params = _params(model(session_id=session_id, cwd=cwd, mcp_servers=[]))
        params["mcpServers"] = [dict(s) for s in mcp_servers]
        raw = await self.call(method, params, timeout=timeout)
        return OpenedSession(session_id, raw if isinstance(raw, dict) else {})

    async def start_prompt(
        self, session_id: str, blocks: Sequence[Mapping[str, Any]]
    ) -> asyncio.Future[Any]:
        """Send ``session/prompt``; the future resolves with the raw answer or a typed error.

        Blocks go out as given (vendor block types included); the answer is checked
        with :meth:`prompt_response` by whoever awaits it.
        """
        return await self.conn.send_request(
            "session/prompt", {"sessionId": session_id, "prompt": [dict(b) for b in blocks]}
        )

    @staticmethod
    def prompt_response(raw: Any) -> acp_schema.PromptResponse:
        return parse(acp_schema.PromptResponse, raw, "session/prompt")

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``; a connection already gone has nothing left to cancel."""
        if self.conn.closed:
            return
        with contextlib.suppress(ConnectionClosed):
            await self.conn.notify(
                "session/cancel", _params(acp_schema.CancelNotification(session_id=session_id))
            )
