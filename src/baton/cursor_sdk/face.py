"""The ACP agent side of the ``cursor-sdk`` transport: ACP requests → Cursor SDK calls.

The runner speaks ACP to every agent; this is the agent it speaks to when the profile's
transport is ``cursor-sdk``. It runs in baton's event loop, on the other end of in-memory
pipes (:mod:`baton.cursor_sdk.transport`), and drives the real ``cursor-sdk`` client
against a bridge process:

``initialize``
    waits for the bridge's ready line, connects the SDK client, checks the bridge speaks
    ``sdk.v1`` (``GetVersion``) and advertises ``session/resume``, stdio MCP, text prompts
    and one auth method (a bound ``CURSOR_API_KEY``);
``session/new``
    ``CreateAgent`` (local, in the session's cwd, the profile's model, the mode's tools and,
    in ``ask``, baton's custom tools); no key bound is ACP's auth-required error, so baton
    exits 3 with the reason; the agent's id is the session id;
``session/resume``
    ``ResumeAgent`` of that id (after a restart; the agent lives in the bridge's state
    root), with the same options (the SDK does not persist tools);
``session/prompt``
    one ``Send`` with the session's MCP servers (every send: the role's tools are always
    there); each envelope of the run stream becomes ACP ``session/update``s
    (:class:`~baton.providers.cursor_sdk.translate.RunTranslator`), the run's end the
    prompt's stop reason (or its error), its usage the response's ``usage``;
``session/cancel``
    ``CancelRun`` of the running run (or of the next one, when it is still starting);
``session/set_mode``
    ``ResumeAgent`` with the other mode's tools, then ``current_mode_update``.

Errors the SDK raises become JSON-RPC errors with the SDK's code and message (an
authentication failure is auth-required, an unknown agent resource-not-found).

Length: one ACP method per handler over one SDK agent, and the error mapping they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from baton.acp import jsonrpc
from baton.acp.connection import JsonRpcConnection, NoDeferral
from baton.acp.framing import FrameError
from baton.acp.jsonrpc import Request, RpcError
from baton.cursor_sdk.client import PINNED_VERSION, TapTransport, load_sdk, sdk_version
from baton.cursor_sdk.discovery import BridgeEndpoint
from baton.cursor_sdk.options import prompt_text, sdk_mcp_servers
from baton.cursor_sdk.tools import HostTools
from baton.errors import AgentError, AgentStartError, FrameHandlingError
from baton.jsontypes import JsonValue
from baton.providers.cursor_sdk.tables import CUSTOM_TOOLS, MODES, ModeSpec
from baton.providers.cursor_sdk.translate import STOP_REASONS, RunEnd, RunTranslator

__all__ = ["AUTH_METHOD", "PROTOCOL", "CursorSdkFace", "FaceSettings"]

log = logging.getLogger(__name__)

PROTOCOL: Final = "sdk.v1"
AUTH_METHOD: Final = "cursor-api-key"
UNARY_TIMEOUT: Final = 60.0


@dataclass(frozen=True, slots=True)
class FaceSettings:
    """What the profile decides for every session of the transport."""

    model: str
    mode: str
    api_key: str | None
    """The bound ``CURSOR_API_KEY``, sent per request (never in the bridge's environment,
    where its shell tool could read it); ``None``: none bound."""


def _auth_hint() -> str:
    return (
        "no Cursor API key is bound — bind CURSOR_API_KEY "
        '(credentials = ["CURSOR_API_KEY"] in a [profiles.NAME] that extends cursor-sdk)'
    )


class CursorSdkFace(NoDeferral):
    """One session's ACP agent over one SDK client (see the module docstring)."""

    def __init__(
        self,
        settings: FaceSettings,
        *,
        ready: Awaitable[BridgeEndpoint],
        cwd: Path,
    ) -> None:
        self.settings = settings
        self.sdk = load_sdk()
        self._ready = ready
        self.cwd = cwd
        self.mode: ModeSpec = MODES[settings.mode if settings.mode in MODES else "ask"]
        self.conn: JsonRpcConnection | None = None
        self.client: Any = None
        self.tap: TapTransport | None = None
        self.agent: Any = None
        self.session_id: str | None = None
        self.mcp: dict[str, dict[str, Any]] = {}
        self.translator = RunTranslator()
        self.run: Any = None
        self._cancel_next = False
        self._cancels: set[asyncio.Task[None]] = set()
        self.bridge: dict[str, Any] = {}
        self.tools = HostTools(
            peer=self._peer, session_id=lambda: self.session_id, cwd=lambda: self.cwd
        )

    # --------------------------------------------------------------- the handler

    async def on_request(self, request: Request) -> Awaitable[JsonValue]:
        handlers: Mapping[str, Callable[[Any], Awaitable[Any]]] = {
            "initialize": self._initialize,
            "session/new": self._new,
            "session/resume": self._resume,
            "session/prompt": self._prompt,
            "session/set_mode": self._set_mode,
        }
        handler = handlers.get(request.method)
        if handler is None:
            raise RpcError.method_not_found(request.method)
        return self._guarded(handler(request.params))

    async def on_notification(self, method: str, params: JsonValue) -> None:
        if method == "session/cancel":
            self._cancel()

    async def on_protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        log.warning("cursor-sdk transport: the runner sent a bad frame: %s", error)

    async def on_fault(self, error: FrameHandlingError) -> None:
        log.error("cursor-sdk transport: %s", error)

    async def _guarded(self, call: Awaitable[Any]) -> Any:
        """An SDK error as the JSON-RPC error the runner maps (code and message kept)."""
        errors = self.sdk.errors
        try:
            return await call
        except errors.AuthenticationError as exc:
            raise RpcError(jsonrpc.AUTH_REQUIRED, f"Cursor refused the API key: {exc}") from exc
        except errors.AgentNotFoundError as exc:
            raise RpcError(jsonrpc.RESOURCE_NOT_FOUND, f"cursor-sdk: {exc}") from exc
        except errors.CursorSDKError as exc:
            raise RpcError(jsonrpc.INTERNAL_ERROR, f"cursor-sdk: {exc}") from exc

    async def _peer(self, method: str, params: Any) -> Any:
        if self.conn is None:
            raise AgentError("the cursor-sdk transport has no connection to the runner")
        return await self.conn.request(method, params)

    async def _update(self, update: Mapping[str, Any]) -> None:
        assert self.conn is not None
        await self.conn.notify("session/update", {"sessionId": self.session_id, "update": update})

    # ----------------------------------------------------------------- methods

    async def _initialize(self, params: Any) -> dict[str, Any]:
        try:
            endpoint = await self._ready
        except AgentStartError as exc:  # a ready line refused: its reason is the answer
            raise RpcError(jsonrpc.INTERNAL_ERROR, f"the bridge cannot be used: {exc}") from exc
        inner = self.sdk.client.AsyncConnectTransport(
            endpoint.url, endpoint.auth_token, unary_timeout=UNARY_TIMEOUT, stream_timeout=None
        )
        self.tap = TapTransport(inner)
        # The guard this flag lifts protects a *shared* remote bridge (run-scoped calls such
        # as CancelRun carry no key). This bridge is baton's own private process, as with the
        # SDK's launch_bridge (which sets it too); baton still passes the bound key on every
        # call that takes one and refuses to create an agent without it (:meth:`_open`), so
        # baton's own environment is never read for a key.
        self.client = self.sdk.client.AsyncClient(
            transport=self.tap, allow_api_key_env_fallback=True
        )
        version = await self.client.get_version()
        protocol = version.get("protocolVersion")
        if protocol != PROTOCOL:
            raise RpcError(
                jsonrpc.INTERNAL_ERROR,
                f"the bridge speaks {str(protocol)[:40]!r}, baton speaks {PROTOCOL}",
            )
        self.bridge = {
            "bridgeVersion": str(version.get("bridgeVersion", ""))[:64],
            "protocolVersion": PROTOCOL,
            "capabilities": [str(c)[:64] for c in version.get("capabilities") or []][:64],
            "client": f"cursor-sdk {sdk_version() or '?'} (baton pins {PINNED_VERSION})",
        }
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": False,
                "sessionCapabilities": {"resume": {}},
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
            },
            "authMethods": [
                {
                    "id": AUTH_METHOD,
                    "name": "Cursor API key",
                    "description": "bind CURSOR_API_KEY in the profile's credentials",
                }
            ],
            "agentInfo": {
                "name": "cursor-sdk-bridge",
                "title": "Cursor SDK bridge",
                "version": self.bridge["bridgeVersion"] or "unknown",
            },
            "_meta": {"cursorSdk": self.bridge},
        }

    def _agent_options(self, mode: ModeSpec) -> Any:
        types = self.sdk.types
        custom = None
        if mode.custom_tools:
            custom = {
                name: types.CustomTool(
                    execute=self._executor(name),
                    description=spec.description,
                    input_schema=dict(spec.input_schema),
                )
                for name, spec in CUSTOM_TOOLS.items()
            }
        return types.AgentOptions(
            model=self.settings.model,
            api_key=self.settings.api_key,
            name="baton",
            local=types.LocalAgentOptions(cwd=str(self.cwd), custom_tools=custom),
            tools=list(mode.tools) if mode.tools is not None else None,
        )

    def _executor(self, name: str) -> Callable[[Mapping[str, Any], Any], Awaitable[Any]]:
        async def execute(args: Mapping[str, Any], context: Any) -> Any:
            return await self.tools.run(name, args, getattr(context, "tool_call_id", None))

        return execute

    def _session_result(self) -> dict[str, Any]:
        return {
            "modes": {
                "currentModeId": self.mode.id,
                "availableModes": [m.advertised() for m in MODES.values()],
            },
            "configOptions": [
                {
                    "id": "model",
                    "name": "Model",
                    "category": "model",
                    "type": "select",
                    "currentValue": self.settings.model,
                    "options": [{"value": self.settings.model, "name": self.settings.model}],
                }
            ],
            "_meta": {"cursorSdk": {"agentId": self.session_id, **self.bridge}},
        }

    def _open(self, params: Any) -> None:
        if not isinstance(params, Mapping) or not isinstance(params.get("cwd"), str):
            raise RpcError(jsonrpc.INVALID_PARAMS, "cwd must be a string")
        self.cwd = Path(params["cwd"])
        self.mcp = sdk_mcp_servers(params.get("mcpServers"))
        if self.client is None:
            raise RpcError(jsonrpc.INVALID_REQUEST, "initialize first")
        if not self.settings.api_key:
            raise RpcError(jsonrpc.AUTH_REQUIRED, _auth_hint())

    async def _new(self, params: Any) -> dict[str, Any]:
        self._open(params)
        self.agent = await self.client.create_agent(self._agent_options(self.mode))
        self.session_id = str(self.agent.agent_id)
        return {"sessionId": self.session_id, **self._session_result()}

    async def _resume(self, params: Any) -> dict[str, Any]:
        self._open(params)
        agent_id = params.get("sessionId")
        if not isinstance(agent_id, str) or not agent_id:
            raise RpcError(jsonrpc.INVALID_PARAMS, "sessionId must be a string")
        self.agent = await self.client.resume_agent(agent_id, self._agent_options(self.mode))
        self.session_id = str(self.agent.agent_id or agent_id)
        return self._session_result()

    async def _set_mode(self, params: Any) -> dict[str, Any]:
        mode_id = params.get("modeId") if isinstance(params, Mapping) else None
        if not isinstance(mode_id, str) or mode_id not in MODES:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"unknown mode {str(mode_id)[:80]!r}")
        if self.agent is None:
            raise RpcError(jsonrpc.INVALID_REQUEST, "no session")
        mode = MODES[mode_id]
        self.agent = await self.client.resume_agent(self.session_id, self._agent_options(mode))
        self.mode = mode
        await self._update({"sessionUpdate": "current_mode_update", "currentModeId": mode.id})
        return {}

    async def _prompt(self, params: Any) -> dict[str, Any]:
        if self.agent is None or self.tap is None:
            raise RpcError(jsonrpc.INVALID_REQUEST, "no session")
        text = prompt_text(params.get("prompt") if isinstance(params, Mapping) else None)
        self.translator.begin_run()
        self.tap.envelopes.clear()
        options = {"mcp_servers": self.mcp} if self.mcp else None
        run = await self.agent.send(text, options)
        self.run = run
        if self._cancel_next:
            self._cancel()
        try:
            async for _event in run:
                envelope = self.tap.envelopes.popleft() if self.tap.envelopes else {}
                translated = self.translator.feed(envelope)
                for update in translated.updates:
                    await self._update(update)
        finally:
            self.run = None
            self._cancel_next = False
        end = self.translator.end or RunEnd("error", None, "the run stream ended without a result")
        stop = STOP_REASONS.get(end.status)
        if stop is None:
            detail = ": ".join(x for x in (end.error_code, end.error_message) if x)
            raise RpcError(
                jsonrpc.INTERNAL_ERROR,
                f"the Cursor run ended {end.status}" + (f" ({detail})" if detail else ""),
                {"cursorSdk": {"status": end.status, "errorCode": end.error_code}},
            )
        answer: dict[str, Any] = {"stopReason": stop}
        usage = self.translator.prompt_usage()
        if usage is not None:
            answer["usage"] = usage
        return answer

    def _cancel(self) -> None:
        run = self.run
        if run is None or not getattr(run, "id", ""):
            self._cancel_next = True
            return
        task = asyncio.create_task(self._cancel_run(run), name="cursor-sdk-cancel")
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel_run(self, run: Any) -> None:
        try:
            await run.cancel()
        except self.sdk.errors.CursorSDKError as exc:  # already over, or the bridge is gone
            log.warning("cursor-sdk: CancelRun failed: %s", exc)

    # ---------------------------------------------------------------- closing

    async def close(self, *, polite: bool) -> None:
        """Release the agent and the client; ``polite``: tell the bridge first."""
        for task in list(self._cancels):
            task.cancel()
        client, self.client = self.client, None
        if client is None:
            return
        errors = self.sdk.errors
        if polite:
            with contextlib.suppress(errors.CursorSDKError, TimeoutError):
                if self.agent is not None:
                    await asyncio.wait_for(self.agent.close(), 5)
            with contextlib.suppress(errors.CursorSDKError, TimeoutError):
                await asyncio.wait_for(client.shutdown(grace_seconds=0), 5)
        with contextlib.suppress(errors.CursorSDKError, TimeoutError, OSError):
            await asyncio.wait_for(client.aclose(), 5)
