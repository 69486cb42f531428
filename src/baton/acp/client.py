"""Typed ACP calls from the client side, and the one place their errors are mapped.

:class:`AcpClient` builds each outbound request and reads the answers that baton
acts on with :mod:`baton.acp.messages` (plain data, checked against the pinned ACP
SDK's models in tests; the SDK itself is not imported at run time), and turns what
comes back into baton's error tree once: a JSON-RPC ``-32000`` to a session call
becomes :class:`~baton.errors.AuthRequired` naming the advertised methods; an answer
that does not match the schema becomes :class:`~baton.errors.RemoteProtocolError`
(the agent's fault, chained to the parser's finding). Timeouts come typed from the
connection (:class:`~baton.errors.AgentTimeout`). Nothing here emits events or knows
a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import baton
from baton.acp import jsonrpc, messages
from baton.acp.connection import ConnectionClosed, JsonRpcConnection
from baton.acp.messages import PROTOCOL_VERSION, InitializeAnswer, PromptAnswer
from baton.errors import AuthRequired, RemoteCallError, RemoteProtocolError
from baton.jsontypes import JsonMapping, JsonValue

__all__ = ["PROTOCOL_VERSION", "AcpClient", "OpenedSession", "parse"]

_Answer = TypeVar("_Answer")


def parse(parser: Callable[[JsonValue], _Answer], raw: JsonValue, method: str) -> _Answer:
    """``parser(raw)``, or :class:`RemoteProtocolError`: only a malformed answer is the
    agent's fault; anything else raised here is baton's bug and propagates."""
    try:
        return parser(raw)
    except messages.MalformedAnswer as exc:
        raise RemoteProtocolError(
            f"{method}: the agent's answer does not match the ACP schema: {exc}"
        ) from exc


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
        self.initialized: InitializeAnswer | None = None

    @property
    def auth_methods(self) -> list[str]:
        if self.initialized is None:
            return []
        return list(self.initialized.auth_method_ids)

    async def call(
        self, method: str, params: JsonValue, *, timeout: float | None = None
    ) -> JsonValue:
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

    async def initialize(self, *, client_meta: JsonMapping, timeout: float) -> InitializeAnswer:
        params = messages.initialize_params(client_meta=client_meta, version=baton.__version__)
        raw = await self.call("initialize", params, timeout=timeout)
        init = parse(messages.parse_initialize, raw, "initialize")
        if init.protocol_version != PROTOCOL_VERSION:
            raise RemoteProtocolError(
                f"agent speaks ACP protocol version {init.protocol_version}; "
                f"baton speaks {PROTOCOL_VERSION}"
            )
        self.initialized = init
        return init

    async def new_session(
        self,
        *,
        cwd: str,
        mcp_servers: Sequence[JsonMapping],
        timeout: float,
        meta: JsonMapping | None = None,
    ) -> OpenedSession:
        params = messages.new_session_params(cwd=cwd, mcp_servers=mcp_servers, meta=meta)
        raw = await self.call("session/new", params, timeout=timeout)
        parsed = parse(messages.parse_new_session, raw, "session/new")
        return OpenedSession(parsed.session_id, parsed.raw)

    async def reopen_session(
        self,
        method: str,
        *,
        session_id: str,
        cwd: str,
        mcp_servers: Sequence[JsonMapping],
        timeout: float,
        meta: JsonMapping | None = None,
    ) -> OpenedSession:
        """``session/resume`` or ``session/load`` of ``session_id``."""
        if method not in ("session/resume", "session/load"):
            raise ValueError(f"not a way to reopen a session: {method!r}")
        params = messages.reopen_params(
            session_id=session_id, cwd=cwd, mcp_servers=mcp_servers, meta=meta
        )
        raw = await self.call(method, params, timeout=timeout)
        return OpenedSession(session_id, raw if isinstance(raw, dict) else {})

    async def start_prompt(
        self, session_id: str, blocks: Sequence[JsonMapping]
    ) -> asyncio.Future[JsonValue]:
        """Send ``session/prompt``; the future resolves with the raw answer or a typed error.

        Blocks go out as given (vendor block types included); the answer is checked
        with :meth:`prompt_response` by whoever awaits it.
        """
        return await self.conn.send_request(
            "session/prompt", {"sessionId": session_id, "prompt": [dict(b) for b in blocks]}
        )

    @staticmethod
    def prompt_response(raw: JsonValue) -> PromptAnswer:
        return parse(messages.parse_prompt, raw, "session/prompt")

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``; a connection already gone has nothing left to cancel."""
        if self.conn.closed:
            return
        with contextlib.suppress(ConnectionClosed):
            await self.conn.notify("session/cancel", messages.cancel_params(session_id))
