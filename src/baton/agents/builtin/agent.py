"""The ACP surface of the runbook agent: handshake, sessions, prompts, cancellation.

Params are read with the ACP schema's meaning of each error (:mod:`baton.acp.params`): a
member of the wrong type or missing is *invalid params* (-32602, e.g. a numeric
``sessionId``), a well-formed session id that names no session is *resource not found*
(-32002); types are checked before anything is looked up.

One turn runs at a time per session. A prompt arriving while another runs replaces it: the
running turn is cancelled (and answers ``cancelled``) before the new one starts. A prompt still
waiting for its turn when a newer prompt or ``session/cancel`` arrives answers ``cancelled``
without running.
"""

import asyncio
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime

import baton
from baton.acp import params as acp_params
from baton.jsontypes import JsonValue

from .channel import Channel
from .config import AgentConfig
from .connection import Connection, NotificationHandler, RequestHandler
from .jsonrpc import JsonObject, RpcError
from .mcp_client import McpHub, parse_servers
from .steps import StepContext
from .store import SessionStore, StoredSession, TurnRecord, new_session_id
from .turn import run_turn

__all__ = ["AGENT_CAPABILITIES", "BuiltinAgent"]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
LIST_PAGE = 100

AGENT_CAPABILITIES: JsonObject = {
    "loadSession": True,
    "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
    "mcpCapabilities": {"http": False, "sse": False},
    "sessionCapabilities": {"list": {}},
}
MODES: JsonObject = {
    "currentModeId": "runbook",
    "availableModes": [
        {
            "id": "runbook",
            "name": "Runbook",
            "description": "Run the fenced steps of each prompt in order",
        }
    ],
}


def utc_now() -> str:
    """An ISO 8601 UTC timestamp with milliseconds, as ACP's ``updatedAt`` expects."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class _Session:
    """A session open in this process."""

    record: StoredSession
    hub: McpHub | None
    always_allowed: set[str] = field(default_factory=set)
    turn_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    generation: int = 0
    running: asyncio.Event | None = None

    def cancel(self) -> None:
        """Cancel the running turn and any prompt still waiting for its turn."""
        self.generation += 1
        if self.running is not None:
            self.running.set()


class BuiltinAgent:
    """Handlers for the ACP methods the agent implements."""

    def __init__(self, connection: Connection, config: AgentConfig) -> None:
        self._connection = connection
        self._config = config
        self._store = SessionStore(config.state_dir)
        self._sessions: dict[str, _Session] = {}
        self._client_writes_files = False

    def routes(self) -> tuple[dict[str, RequestHandler], dict[str, NotificationHandler]]:
        """The method tables for `Connection.route`."""
        requests: dict[str, RequestHandler] = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/list": self.list_sessions,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
        }
        return requests, {"session/cancel": self.cancel}

    async def initialize(self, params: JsonObject) -> JsonObject:
        """Answer version 1 whatever the client asked (the client decides) and remember its fs."""
        if acp_params.optional_uint(params, "protocolVersion", maximum=0xFFFF) is None:
            raise RpcError.invalid_params("protocolVersion is required")
        capabilities = params.get("clientCapabilities")
        fs = capabilities.get("fs") if isinstance(capabilities, dict) else None
        self._client_writes_files = isinstance(fs, dict) and fs.get("writeTextFile") is True
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                **AGENT_CAPABILITIES,
                "mcpCapabilities": {"http": self._config.mcp_http, "sse": False},
            },
            "agentInfo": {
                "name": "baton-builtin",
                "title": "baton runbook agent",
                "version": baton.__version__,
            },
            "authMethods": [],
        }

    async def new_session(self, params: JsonObject) -> JsonObject:
        """Open and persist a new session."""
        cwd = _cwd(params)
        hub = _hub(params, cwd, http=self._config.mcp_http)
        now = utc_now()
        record = StoredSession(session_id=new_session_id(), cwd=cwd, created_at=now, updated_at=now)
        self._sessions[record.session_id] = _Session(record, hub)
        self._store.save(record)
        return {"sessionId": record.session_id, "modes": MODES}

    async def load_session(self, params: JsonObject) -> JsonObject:
        """Reopen a stored session and replay its history as ``session/update``s."""
        session_id = acp_params.session_id(params)
        cwd = _cwd(params)
        hub = _hub(params, cwd, http=self._config.mcp_http)
        record = self._store.load(session_id)
        if record is None:
            raise RpcError.not_found(f"session {session_id!r}")
        previous = self._sessions.get(record.session_id)
        session = _Session(record, hub)
        self._sessions[record.session_id] = session
        async with session.turn_lock:
            if previous is not None:
                await _retire(previous)
            for turn in record.turns:
                for update in turn.updates:
                    await self._connection.notify(
                        "session/update", {"sessionId": record.session_id, "update": update}
                    )
            if record.cwd != cwd:
                record.cwd = cwd
                self._store.save(record)
        return {}

    async def list_sessions(self, params: JsonObject) -> JsonObject:
        """Stored sessions, newest first, optionally only those of ``cwd``; pages of 100."""
        cwd = acp_params.optional_text(params, "cwd")
        cursor = acp_params.optional_text(params, "cursor")
        if cursor is not None and not cursor.isdigit():
            raise RpcError.invalid_params(f"unknown cursor {cursor!r}")
        start = int(cursor or 0)
        records = self._store.list(cwd)
        result: JsonObject = {"sessions": [r.summary() for r in records[start : start + LIST_PAGE]]}
        if start + LIST_PAGE < len(records):
            result["nextCursor"] = str(start + LIST_PAGE)
        return result

    async def set_mode(self, params: JsonObject) -> JsonObject:
        """Accept the one mode there is."""
        mode_id = acp_params.required_text(params, "modeId")
        self._session(params)
        if mode_id != "runbook":
            raise RpcError.invalid_params(f"unknown mode {mode_id!r}")
        return {}

    async def prompt(self, params: JsonObject) -> JsonObject:
        """Run one turn; a newer prompt or a cancel ends it with ``cancelled``."""
        text = prompt_text(params.get("prompt"))
        session = self._session(params)
        session.cancel()
        generation = session.generation
        async with session.turn_lock:
            if generation != session.generation:
                return {"stopReason": "cancelled"}
            cancel = asyncio.Event()
            session.running = cancel
            try:
                record = session.record
                number = record.turn_count + 1
                record.turn_count = number
                ctx = StepContext(
                    channel=Channel(
                        connection=self._connection, session_id=record.session_id, cancel=cancel
                    ),
                    cwd=record.cwd,
                    hub=session.hub,
                    client_writes_files=self._client_writes_files,
                    always_allowed=session.always_allowed,
                    timeout=self._config.step_timeout,
                    kill_grace=self._config.kill_grace,
                )
                result = await run_turn(ctx, number, text)
            finally:
                session.running = None
            record.title = record.title or result.title
            record.add_turn(TurnRecord(number, result.replay), utc_now())
            self._store.save(record)
        return {"stopReason": result.stop_reason}

    def cancel(self, params: JsonObject) -> None:
        """``session/cancel``: stop the session's running turn (unknown sessions are ignored)."""
        session_id = params.get("sessionId")
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None:
            session.cancel()

    async def shutdown(self) -> None:
        """Cancel every turn, wait for them to wind down, close MCP connections."""
        sessions = list(self._sessions.values())
        await asyncio.gather(*(_retire(s) for s in sessions))

    def _session(self, params: JsonObject) -> _Session:
        """The open session ``sessionId`` names: a string (else invalid params) naming an
        open session (else resource not found)."""
        session_id = acp_params.session_id(params)
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError.not_found(f"session {session_id!r} is not open")
        return session


async def _retire(session: _Session) -> None:
    """Stop a session's work and close its MCP servers."""
    session.cancel()
    async with session.turn_lock:
        pass
    if session.hub is not None:
        await session.hub.aclose()


def prompt_text(blocks: JsonValue) -> str:
    """The runbook text of a prompt: its text blocks, a newline between blocks (the other
    blocks are read as nothing; each must still be a content block)."""
    if not isinstance(blocks, list):
        raise RpcError.invalid_params("prompt must be an array of content blocks")
    texts: list[str] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise RpcError.invalid_params(f"prompt[{index}] must be a content block with a type")
        if block["type"] == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise RpcError.invalid_params(f"prompt[{index}].text must be a string")
            texts.append(text)
    joined = ""
    for text in texts:
        if joined and not joined.endswith("\n"):
            joined += "\n"
        joined += text
    return joined


def _cwd(params: JsonObject) -> str:
    cwd = acp_params.required_text(params, "cwd")
    if not os.path.isabs(cwd):
        raise RpcError.invalid_params(f"cwd must be an absolute path, not {cwd!r}")
    return cwd


def _hub(params: JsonObject, cwd: str, *, http: bool) -> McpHub | None:
    try:
        servers = parse_servers(params.get("mcpServers"), http=http)
    except ValueError as exc:
        raise RpcError.invalid_params(str(exc)) from exc
    return McpHub(servers, cwd) if servers else None
