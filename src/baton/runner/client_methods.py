"""The client side of ACP: what baton answers when the agent calls or notifies it.

:class:`ClientMethods` is the connection's :class:`~baton.acp.connection.InboundHandler`
for one session, in arrival order:

* ``session/update`` → the normalizer → events (late updates flagged on their turn,
  foreign sessions kept apart, ``session/load`` history counted, not re-emitted);
* ``session/request_permission``, ``elicitation/create`` and vendor human requests
  (``cursor/ask_question``, ``cursor/create_plan``) → the request broker: one path of
  fence, ledger, reply; ``delivered`` only once the reply reached the agent;
* ``fs/*`` and ``terminal/*`` → contained to the workspace (refusals are events); a
  client fs write is a ``file.written`` event (path, bytes, SHA-256), and writes and
  terminals are audited (:class:`~baton.runner.approvals.ApprovalGuard`) like the
  decisions the broker records;
* every other vendor method → the provider extension, or ``method not found``;
* frames that are not messages → ``harness.diagnostic``.

Arrival order holds for requests too: :meth:`ClientMethods.on_request` *admits* a
request inline (normalizes it, records it in the ledger, emits its events) and returns
only what is left to wait for (a human's answer, a terminal's exit), so a request's
events come before those of the frames after it, and a waiting request never stalls
the stream.

Every error answered carries ACP's code for the case (:mod:`baton.acp.params` has the
table): params that do not fit the schema, *invalid params* (-32602); a session, file or
terminal that is not there, *resource not found* (-32002; a missing file is no security
matter); a vendor method nobody handles, *method not found* (-32601); the filesystem
failing under a valid request, *internal error* (-32603). Security refusals stay
refusals (-32602, ``Invalid params: refused: …``) and are the only errors that make ``security.*``
events. An error raised for any other reason is baton's bug and reaches the connection,
which answers the agent with an internal error and reports it for that frame
(:meth:`on_fault`: a ``harness.diagnostic`` of category ``internal``); the reader and
the turn go on.

Length: one handler per ACP client method, and each is the only copy of its rule.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.acp import jsonrpc
from baton.acp import params as acp_params
from baton.acp.connection import protocol_error_text
from baton.acp.framing import FrameError
from baton.acp.jsonrpc import JsonRpcId, Request, RpcError
from baton.agent_profile import MissingFileReads
from baton.errors import FrameHandlingError, LocalProtocolError, SecurityError
from baton.events.acp_normalizer import AcpNormalizer, Draft
from baton.events.bounds import clip_text
from baton.events.model import FileWritten, HarnessDiagnostic, SecurityPathRefused
from baton.jsontypes import JsonObject, JsonValue
from baton.providers.registry import ErrorReply
from baton.request_model.documents import RequestDocument
from baton.request_model.errors import InvalidDocument, PayloadTooLarge
from baton.requests import replies
from baton.requests.ledger import RequestRecord
from baton.runner import client_fs
from baton.runner.request_documents import elicitation_document, permission_document
from baton.runner.requests_broker import Admission, RequestBroker, RequestContext, Resolution
from baton.runner.session_events import SessionEvents
from baton.runner.terminals import TerminalManager
from baton.security.paths import display_path

if TYPE_CHECKING:
    from baton.runner.approvals import ApprovalGuard

__all__ = ["SERVED_METHODS", "ClientMethods"]

MAX_KNOWN_SESSIONS = 256
FS_METHODS = frozenset({"fs/read_text_file", "fs/write_text_file"})
TERMINAL_METHODS = frozenset(
    {
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
)
HUMAN_METHODS = frozenset({"session/request_permission", "elicitation/create"})
SERVED_METHODS = FS_METHODS | TERMINAL_METHODS | HUMAN_METHODS
"""The ACP client methods baton serves (every other request: method not found, unless a
provider extension claims it)."""


@dataclass(kw_only=True, eq=False)
class ClientMethods:
    """Inbound agent messages of one session, routed in arrival order."""

    events: SessionEvents
    normalizer: AcpNormalizer
    requests: RequestBroker
    terminals: TerminalManager
    workspace: Path
    connection_id: str
    now_ms: Callable[[], float]
    approvals: ApprovalGuard | None = None
    missing_file_reads: MissingFileReads = "not-found"
    """``empty``: a read of a file that is not there answers ``{"content": ""}``
    (:attr:`AgentProfile.missing_file_reads <baton.agent_profile.AgentProfile>`)."""
    replaying: bool = field(default=False, init=False)
    """While ``session/load`` replays history: count updates, do not re-emit them."""
    replayed: int = field(default=0, init=False)
    _empty_answered: bool = field(default=False, init=False)
    _answered: dict[JsonRpcId, RequestRecord] = field(default_factory=dict, init=False)
    """Answered requests whose reply is being written to the agent."""
    _recording: dict[JsonRpcId, RequestRecord] = field(default_factory=dict, init=False)
    """Replies the agent has, whose ``delivered`` is being committed."""
    _replies: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)
    _written: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=256), init=False
    )
    """Ids of our latest answers on the agent's pipe (a cancel waits for pending ones)."""
    _reply_waiters: dict[str, asyncio.Event] = field(default_factory=dict, init=False)
    _other_sessions: collections.OrderedDict[str, None] = field(
        default_factory=collections.OrderedDict, init=False
    )
    """Other session ids the agent sent updates for (children): fs and terminal
    requests may name them (bounded, oldest forgotten first)."""

    # ---------------------------------------------------------- InboundHandler

    async def on_notification(self, method: str, params: JsonValue) -> None:
        if method == "session/update":
            await self.update(params)
        elif method == "$/cancel_request":
            await self.events.notice(
                "cancel_request",
                "agent withdrew a request",
                method=method,
                severity="info",
                raw=params,
            )
        else:
            await self.vendor(method, params, has_id=False)  # a notification: nothing to wait

    async def on_request(self, request: Request) -> Awaitable[JsonValue]:
        """Admit now, in arrival order; the awaitable is the rest (waiting for an answer)."""
        method, params = request.method, request.params
        if method == "session/request_permission":
            return await self.permission(request.id, params)
        if method in FS_METHODS:
            return _ready(await self.fs(method, params))
        if method in TERMINAL_METHODS:
            return await self.terminal(method, params)
        if method == "elicitation/create":
            return await self.elicitation(request.id, params)
        return await self.vendor(method, params, has_id=True, msg_id=request.id)

    async def on_fault(self, error: FrameHandlingError) -> None:
        """baton failed on one frame: a visible ``internal`` diagnostic naming the method
        and the frame's position (never the frame's text); the turn goes on."""
        redactor = self.events.redactor
        cause = error.cause
        detail = clip_text(redactor.text(f"{type(cause).__name__}: {cause}"), 500)
        await self.events.emit(
            HarnessDiagnostic(
                category="internal",
                summary=clip_text(
                    redactor.text(f"{error}; baton skipped that frame and reads on ({detail})")
                ),
                method=clip_text(redactor.text(error.method), 200) if error.method else None,
                frame=error.frame,
            )
        )

    async def on_protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        redactor = self.events.redactor
        await self.events.emit(
            HarnessDiagnostic(
                category="protocol",
                summary=clip_text(redactor.text(protocol_error_text(error))),
                stderr_preview=redactor.text(error.preview)
                if isinstance(error, FrameError)
                else "",
            )
        )

    async def on_response_written(self, request_id: JsonRpcId, ok: bool) -> None:
        """Exactly once: ``delivered`` only after the reply reached the agent's pipe."""
        key = str(request_id)
        self._written.append(key)
        waiter = self._reply_waiters.get(key)
        if waiter is not None:
            waiter.set()
        record = self._answered.pop(request_id, None)
        try:
            if record is not None and ok:
                self._recording[request_id] = record
                await self.requests.delivered(record, self.events.for_turn(record.turn_id))
        finally:
            self._recording.pop(request_id, None)
            async with self._replies:
                self._replies.notify_all()

    async def replies_settled(self, turn_id: str, grace: float) -> None:
        """Before a turn's end cancels its open requests (an agent answers the prompt as soon
        as it has read our last reply, which may be before we recorded it): a reply already
        written is recorded ``delivered`` first, and one still being written gets ``grace``
        seconds to get there; what is still unwritten then is cancelled with the turn."""

        def of_turn(entries: dict[JsonRpcId, RequestRecord]) -> bool:
            return any(record.turn_id == turn_id for record in entries.values())

        async with self._replies:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._replies.wait_for(lambda: not of_turn(self._answered)), grace
                )
            await self._replies.wait_for(lambda: not of_turn(self._recording))

    async def replies_written(self, records: Sequence[RequestRecord], timeout: float) -> None:
        """Until the answers to these requests of ours are on the agent's pipe (bounded):
        ACP has the client answer pending requests before ``session/cancel``."""
        ids = [
            r.jsonrpc_id
            for r in records
            if r.connection_id == self.connection_id and r.jsonrpc_id is not None
        ]
        waits = [asyncio.ensure_future(self._reply_written(i)) for i in ids]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout)
            for task in pending:
                task.cancel()

    async def _reply_written(self, msg_id: JsonRpcId) -> None:
        key = str(msg_id)
        if key in self._written:
            return
        event = self._reply_waiters.setdefault(key, asyncio.Event())
        try:
            await event.wait()
        finally:
            self._reply_waiters.pop(key, None)

    async def on_run_end(self) -> None:
        """What the run's updates deferred comes before the frame that follows them."""
        await self.events.drafts(())

    async def on_batch_end(self) -> None:
        """Show only what cannot be half a secret (the rest waits for the next read); then
        the views write this read's events at once."""
        await self.events.drafts(self.normalizer.flush_ready())
        self.events.emitter.batch_end()

    # ---------------------------------------------------------------- updates

    async def update(self, params: JsonValue) -> None:
        if self.replaying:
            self.replayed += 1
            return
        events = self.events
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        own = events.agent_session_id
        if own is not None and session_id not in (None, own):
            self._remember_session(str(session_id))
            drafts = self.normalizer.foreign(str(session_id), params)
            if not drafts:
                await events.notice(
                    "foreign_session",
                    f"update for session {session_id!r}, not this session; not attributed to it",
                    method="session/update",
                    severity="info",
                    raw=params,
                )
            await events.drafts(drafts)
            return
        turn = events.turn
        late = events.last_turn if turn is None else (turn if turn.answered else None)
        if late is not None:
            late.late_updates += 1
        # The normalizer places each draft in its turn by the agent's ids (and notices a
        # late turn once); an update with no ids is late when its turn already answered.
        drafts = self.normalizer.update(params, now_ms=self.now_ms(), answered=late is not None)
        if drafts:  # most chunks only add to a coalescing message
            await events.drafts(drafts, defer=True)

    # ------------------------------------------------------- human decisions

    def _context(self, msg_id: JsonRpcId, *, stale: bool = False) -> RequestContext:
        turn = self.events.last_turn if stale else self.events.turn
        return RequestContext(
            run_id=self.events.run_id,
            connection_id=self.connection_id,
            jsonrpc_id=msg_id,
            session_id=self.events.agent_session_id,
            turn_id=turn.turn_id if turn else None,
            workspace=str(self.workspace),
        )

    async def _refuse(self, kind: Any, msg_id: JsonRpcId, exc: InvalidDocument, raw: Any) -> None:
        ctx = self._context(msg_id)
        await self.requests.refuse(
            kind,
            str(exc),
            ctx,
            self.events.for_turn(ctx.turn_id),
            raw=self.events.redactor.value(raw),
        )

    async def permission(self, msg_id: JsonRpcId, params: JsonValue) -> Awaitable[JsonObject]:
        self._session(acp_params.object_params(params))
        tool_call = params.get("toolCall")
        if not isinstance(tool_call, dict):
            raise RpcError.invalid_params("toolCall must be an object")
        known = self.normalizer.tools.get(acp_params.required_text(tool_call, "toolCallId"))
        if known is None:
            known = await self._seed_tool(tool_call)
        try:
            document = permission_document(
                params,
                self.events.redactor,
                known_title=known.title if known else None,
                known_kind=known.kind if known else None,
            )
        except InvalidDocument as exc:
            await self._refuse("permission", msg_id, exc, params)
            raise RpcError.invalid_params(str(exc)) from exc
        return await self._admit(msg_id, document)

    async def _seed_tool(self, tool_call: dict[str, Any]) -> Any:
        """A permission for a tool call never announced (Codex asks first): its ``toolCall``
        starts the tool record, so the call has its title and kind and counts as a call."""
        tool_call_id = tool_call.get("toolCallId")
        if not isinstance(tool_call_id, str) or not tool_call_id or self.events.turn is None:
            return None
        update = {"sessionUpdate": "tool_call", "status": "pending", **tool_call}
        params = {"sessionId": self.events.agent_session_id, "update": update}
        await self.events.drafts(self.normalizer.update(params, now_ms=self.now_ms()))
        return self.normalizer.tools.get(tool_call_id)

    async def elicitation(self, msg_id: JsonRpcId, params: JsonValue) -> Awaitable[JsonObject]:
        try:
            document = elicitation_document(params, self.events.redactor)
        except InvalidDocument as exc:
            await self._refuse("elicitation", msg_id, exc, params)
            raise RpcError.invalid_params(str(exc)) from exc
        return await self._admit(msg_id, document)

    async def _admit(
        self, msg_id: JsonRpcId, document: RequestDocument
    ) -> Awaitable[dict[str, Any]]:
        """The one path of every human-decision request: fence and ledger now (arrival
        order), then the reply, once decided (:meth:`_settle`)."""
        turn = self.events.turn
        if turn is None or turn.done:
            ctx = self._context(msg_id, stale=True)
            await self.requests.refuse(
                document.kind,
                "arrived after its turn ended: stale, never attributed to another turn",
                ctx,
                self.events.for_turn(ctx.turn_id),
                document=document,
            )
            return _ready(replies.cancelled_reply(document))
        ctx = self._context(msg_id)
        emit = self.events.for_turn(ctx.turn_id)
        try:
            admission = await self.requests.admit(document, ctx, emit)
        except PayloadTooLarge as exc:
            raise RpcError.invalid_params(str(exc)) from exc
        if not admission.waits:  # decided already: the reply is ready too
            return _ready(
                self._replied(msg_id, RequestBroker.reply(admission.document, admission.record))
            )
        return self._settle(msg_id, admission, ctx.turn_id)

    async def _settle(
        self, msg_id: JsonRpcId, admission: Admission, turn_id: str | None
    ) -> dict[str, Any]:
        """Wait for the human's decision (the stream goes on meanwhile); the reply."""
        return self._replied(
            msg_id, await self.requests.settle(admission, self.events.for_turn(turn_id))
        )

    def _replied(self, msg_id: JsonRpcId, resolution: Resolution) -> dict[str, Any]:
        """The reply for a decided request, remembered until ``delivered`` is recorded."""
        if resolution.record is not None:
            self._answered[msg_id] = resolution.record
            if self.approvals is not None:
                self.approvals.decided(resolution.record)
        return resolution.reply

    # ------------------------------------------------------ fs and terminals

    def _session(self, params: Any) -> None:
        """``sessionId``: a string (else invalid params) naming this session or one the
        agent sent updates for (else resource not found)."""
        session_id = acp_params.session_id(params)
        own = self.events.agent_session_id
        if own is not None and session_id != own and session_id not in self._other_sessions:
            raise RpcError.not_found(f"session {session_id!r} is not open on this connection")

    def _remember_session(self, session_id: str) -> None:
        self._other_sessions[session_id] = None
        self._other_sessions.move_to_end(session_id)
        while len(self._other_sessions) > MAX_KNOWN_SESSIONS:
            self._other_sessions.popitem(last=False)

    async def fs(self, method: str, params: JsonValue) -> JsonValue:
        self._session(acp_params.object_params(params))
        try:
            if method == "fs/read_text_file":
                return await self._read(params)
            written = client_fs.write_text_file(self.workspace, params)
            self.events.stats.files_written.add(display_path(self.workspace, written))
            await self._file_written(written, params)
            return {}  # WriteTextFileResponse is an object, never null (ACP schema)
        except SecurityError as exc:
            await self._path_refused(method, str(params.get("path")), str(exc))
            raise _refusal(exc) from exc
        except OSError as exc:
            raise RpcError.internal(f"{method} failed: {exc.strerror}") from exc

    async def _read(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return client_fs.read_text_file(self.workspace, params)
        except RpcError as exc:
            if exc.code != jsonrpc.RESOURCE_NOT_FOUND or self.missing_file_reads != "empty":
                raise
        if not self._empty_answered:  # once per session: it is how this agent works
            self._empty_answered = True
            await self.events.notice(
                "compatibility",
                "fs/read_text_file of a file that is not there answered with empty content, "
                "not resource-not-found: this agent fails on an error answer to the read it "
                f"makes before writing a new file ({display_path(self.workspace, params['path'])})",
                method="fs/read_text_file",
                severity="info",
            )
        return {"content": ""}

    async def terminal(self, method: str, params: JsonValue) -> Awaitable[JsonValue]:
        """``create``, ``output`` and ``release`` change or read the terminals now (arrival
        order); waiting for an exit (``wait_for_exit``, ``kill``'s grace, ``release``'s
        stop) is the awaitable."""
        self._session(acp_params.object_params(params))
        try:
            return await self._terminal(method, params)
        except SecurityError as exc:
            await self._path_refused(method, str(params.get("cwd")), str(exc))
            raise _refusal(exc) from exc

    async def _terminal(self, method: str, params: dict[str, Any]) -> Awaitable[Any]:
        terminals = self.terminals
        if method == "terminal/create":
            result = await terminals.create(params)
            if self.approvals is not None:
                argv = [params.get("command"), *(params.get("args") or [])]
                command = self.events.redactor.text(" ".join(str(p) for p in argv))
                turn = self.events.turn
                await self.approvals.client_terminal(command, turn.turn_id if turn else None)
            await self.events.notice(
                "terminal",
                f"terminal/create {params.get('command')!r} as {result['terminalId']}",
                method=method,
                severity="info",
            )
            return _ready(result)
        if method == "terminal/output":
            return _ready(await terminals.output(params))
        if method == "terminal/release":
            return terminals.release(params)  # gone now; its process is stopped after
        if method == "terminal/kill":
            return terminals.kill(params)
        return terminals.wait_for_exit(params)

    async def _file_written(self, written: Any, params: dict[str, Any]) -> None:
        """A client fs write is an event (path, size, digest) and an audited mutation."""
        data = str(params.get("content", "")).encode("utf-8", errors="surrogatepass")
        turn = self.events.attributed
        turn_id = turn.turn_id if turn else None
        await self.events.emit(
            FileWritten(
                path=display_path(self.workspace, written),
                bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            ),
            turn_id=turn_id,
        )
        if self.approvals is not None:
            await self.approvals.client_write(str(written), turn_id)

    async def _path_refused(self, method: str, path: str, reason: str) -> None:
        await self.events.emit(
            SecurityPathRefused(
                control="workspace-containment",
                subject=f"{method} {display_path(self.workspace, path)}",
                reason=clip_text(self.events.redactor.text(reason)),
            )
        )

    # --------------------------------------------------------------- vendors

    async def vendor(
        self, method: str, params: JsonValue, *, has_id: bool, msg_id: JsonRpcId = -1
    ) -> Awaitable[JsonValue]:
        """The provider's handler runs now (its events in arrival order); a request it
        routes to a human waits in the awaitable."""
        outcome = self.normalizer.extension.vendor_method(
            method,
            params if isinstance(params, dict) else {},
            has_id=has_id,
            ctx=self.normalizer.context,
        )
        if outcome is None:
            await self.events.notice(
                "unclassified",
                f"unknown agent method {method!r}"
                + (" (answered method-not-found)" if has_id else ""),
                method=method,
                raw=params,
            )
            if has_id:
                raise RpcError.method_not_found(method)
            return _ready(None)
        await self.events.drafts([Draft(p) for p in outcome.payloads])
        if outcome.route == "human" and has_id:
            if outcome.request is None:
                raise LocalProtocolError(
                    f"{method}: the provider routed it to a human without a document"
                )
            return await self._admit(msg_id, outcome.request)
        if isinstance(outcome.result, ErrorReply):
            raise RpcError(outcome.result.code, outcome.result.message)
        return _ready(outcome.result if outcome.result is not None else {})


def _refusal(exc: SecurityError) -> RpcError:
    """A security refusal, as the agent is told: invalid params (the schema has no code
    for a refusal), the reason first."""
    return RpcError(jsonrpc.INVALID_PARAMS, f"Invalid params: refused: {exc}")


def _ready(value: Any) -> asyncio.Future[Any]:
    """An answer that needs no waiting (a done future: dropping it warns of nothing)."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future
