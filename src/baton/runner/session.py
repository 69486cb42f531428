"""One agent process and its ACP session: launch, handshake, turns, shutdown.

:class:`AgentSession` is the runner's public unit. ``open()`` admits the
workspace, prepares the private launch environment, spawns the agent in its own
process group, negotiates the protocol and creates (or resumes/loads) a session.
``prompt()`` runs exactly one turn to exactly one terminal event; ``cancel()``
asks the agent to stop and ``kill()`` stops its process group when it will not.
Everything the agent emits flows through the normalizer into the emitter in
arrival order. No provider is special-cased here: providers differ only by their
profile and their :class:`~baton.providers.extension.ProviderExtension`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import acp.schema as acp_schema
from pydantic import ValidationError

import baton
from baton.acp import jsonrpc
from baton.acp.connection import ConnectionClosed, JsonRpcConnection, protocol_error_text
from baton.acp.framing import FrameError
from baton.acp.jsonrpc import JsonRpcId, Request, RpcError
from baton.acp.process import AgentProcess
from baton.config import agent_roots_dir
from baton.errors import (
    AgentError,
    AgentExited,
    AgentTimeout,
    AuthRequired,
    ConfigError,
    RemoteCallError,
    RemoteProtocolError,
    SecurityError,
)
from baton.events.acp_normalizer import AcpNormalizer, Draft
from baton.events.bounds import DIAGNOSTIC_PREVIEW_BYTES, bounded_value, clip_text
from baton.events.model import (
    HarnessDiagnostic,
    Payload,
    ProviderNotice,
    SecurityPathRefused,
    SessionClosed,
    SessionFailed,
    SessionStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnSubmitted,
    UsageReported,
)
from baton.providers.extension import ProviderExtension
from baton.providers.profile import AgentProfile
from baton.providers.registry import ErrorReply, extension_for
from baton.requests import replies
from baton.requests.errors import InvalidDocument, PayloadTooLarge
from baton.requests.ledger import RequestRecord
from baton.requests.model import RequestDocument
from baton.runner import client_fs
from baton.runner.emitter import EventEmitter
from baton.runner.launch import admit_or_refuse, verified_argv
from baton.runner.request_documents import (
    elicitation_document,
    permission_document,
    vendor_document,
)
from baton.runner.requests_broker import RequestBroker, RequestContext
from baton.runner.settings import apply_settings
from baton.runner.terminals import TerminalManager
from baton.runner.turn import Turn
from baton.security.launch_env import LaunchEnvironment, prepare_launch
from baton.security.paths import display_path
from baton.security.redact import Redactor

PROTOCOL_VERSION = 1
CANCEL_GRACE_SECONDS = 5.0
EXIT_GRACE_SECONDS = 2.0

SessionHow = Literal["new", "load", "resume"]


def _now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended; mirrors the one terminal event."""

    turn_id: str
    status: Literal["completed", "failed", "cancelled"]
    stop_reason: str | None = None
    error: str | None = None
    tool_calls: int = 0
    usage: UsageReported | None = None
    """The turn's reported token usage; ``None`` when the agent reported none."""
    files_written: tuple[str, ...] = ()
    """Workspace-relative files the agent wrote through ``fs/write_text_file``."""


@dataclass(slots=True)
class SessionStats:
    turns: int = 0
    tool_calls: int = 0
    files_written: set[str] = field(default_factory=set)
    usage_available: bool = False


T = TypeVar("T")


class _TurnEvents:
    """The turn's events for the request broker: emit one, or commit a change with its
    events in one transaction (:meth:`EventEmitter.commit`)."""

    def __init__(self, session: AgentSession, turn_id: str | None) -> None:
        self._session = session
        self._turn_id = turn_id

    async def __call__(self, payload: Payload) -> None:
        s = self._session
        await s.emitter.emit(payload, session_id=s.agent_session_id, turn_id=self._turn_id)

    async def commit(self, payloads: Any, fn: Callable[[Any], T]) -> T:
        s = self._session
        return await s.emitter.commit(
            payloads, fn, session_id=s.agent_session_id, turn_id=self._turn_id
        )


class AgentSession:
    """A live ACP session with one agent process."""

    def __init__(
        self,
        profile: AgentProfile,
        *,
        workspace: Path,
        emitter: EventEmitter,
        requests: RequestBroker,
        extension: ProviderExtension | None,
        redactor: Redactor,
        launch: LaunchEnvironment,
    ) -> None:
        self.profile = profile
        self.workspace = workspace
        self.emitter = emitter
        self.requests = requests
        self.redactor = redactor
        self.launch = launch
        self.normalizer = AcpNormalizer(
            redaction=redactor,
            display_path=partial(display_path, workspace),
            extension=extension,
            workspace=str(workspace),
        )
        self.process: AgentProcess | None = None
        self.conn: JsonRpcConnection | None = None
        self.terminals = TerminalManager(workspace, launch.env)
        self.agent_session_id: str | None = None
        self.how: SessionHow = "new"
        self.initialize_result: acp_schema.InitializeResponse | None = None
        self.session_result: dict[str, Any] = {}
        self.stats = SessionStats()
        self.connection_id = uuid.uuid4().hex
        self._reader: asyncio.Task[None] | None = None
        self._exit_watch: asyncio.Task[None] | None = None
        self._turn: Turn | None = None
        self._last_turn: Turn | None = None
        self._replaying = False
        self._replayed = 0
        self._answered: dict[JsonRpcId, RequestRecord] = {}
        self._late_noticed: set[str] = set()
        self._prompt_future: asyncio.Future[Any] | None = None
        self._closed = False
        self.recovery: tuple[SessionHow, ...] = ("resume", "load")
        self._files_at_turn_start: frozenset[str] = frozenset()
        self.argv: list[str] = profile.argv()

    # ================================================================== opening

    @classmethod
    async def open(
        cls,
        profile: AgentProfile,
        *,
        workspace: Path,
        emitter: EventEmitter,
        requests: RequestBroker,
        state_dir: Path,
        extension: ProviderExtension | None = None,
        environ: Mapping[str, str] | None = None,
        secrets_file: Path | None = None,
        mcp_servers: Sequence[Mapping[str, Any]] = (),
        resume_session_id: str | None = None,
        recovery: Sequence[SessionHow] = ("resume", "load"),
        persistent_root: Path | None = None,
    ) -> AgentSession:
        """Admit, launch, handshake and create/resume a session, or raise a typed error.

        Every refusal and failure is also an event in the stream.
        """
        workspace = workspace.resolve()
        env_in = os.environ if environ is None else environ
        await admit_or_refuse(profile, workspace, emitter)
        argv = await verified_argv(profile, state_dir, env_in, emitter)
        try:
            launch = prepare_launch(
                profile,
                workspace=workspace,
                base_dir=agent_roots_dir(state_dir, workspace, env_in),
                environ=env_in,
                secrets_file=secrets_file,
                persistent_root=persistent_root,
            )
        except (ConfigError, SecurityError) as exc:
            await emitter.emit(
                SessionFailed(error_type=type(exc).__name__, message=clip_text(str(exc)))
            )
            raise
        redactor = Redactor(launch.bound_secret_values)
        self = cls(
            profile,
            workspace=workspace,
            emitter=emitter,
            requests=requests,
            extension=extension if extension is not None else extension_for(profile.family),
            redactor=redactor,
            launch=launch,
        )
        self.recovery = tuple(recovery)
        self.argv = argv
        try:
            await self._start(mcp_servers, resume_session_id)
        except BaseException as exc:
            if isinstance(exc, AgentError | ConfigError | SecurityError):
                await self.emitter.emit(
                    SessionFailed(
                        error_type=type(exc).__name__,
                        message=clip_text(self.redactor.text(str(exc))),
                        auth_methods=list(getattr(exc, "auth_methods", ())),
                        stderr_preview=self.stderr_preview(),
                    )
                )
            await self._shutdown("open failed")
            raise
        return self

    async def _start(
        self, mcp_servers: Sequence[Mapping[str, Any]], resume_session_id: str | None
    ) -> None:
        self.process = await AgentProcess.spawn(self.argv, env=self.launch.env, cwd=self.workspace)
        self.conn = JsonRpcConnection(self.process.stdout, self.process.stdin, _Handler(self))
        self._reader = asyncio.create_task(self.conn.run(), name="acp-reader")
        self._exit_watch = asyncio.create_task(self._watch_exit(), name="acp-exit-watch")
        init = await self._initialize()
        self.initialize_result = init
        caps = init.agent_capabilities
        servers = [dict(s) for s in mcp_servers]
        result: dict[str, Any] | None = None
        if resume_session_id:
            result = await self._resume_or_load(resume_session_id, servers, caps)
        if result is None:
            result = await self._call(
                "session/new",
                acp_schema.NewSessionRequest(cwd=str(self.workspace), mcp_servers=[]).model_dump(
                    by_alias=True, exclude_none=True
                )
                | {"mcpServers": servers},
                timeout=self.profile.session_timeout,
            )
            parsed = _parse(acp_schema.NewSessionResponse, result, "session/new")
            self.agent_session_id = parsed.session_id
            self.how = "new"
        self.session_result = result or {}
        await self._apply_settings()
        await self.emitter.emit(self._started_payload(), session_id=self.agent_session_id)

    async def _initialize(self) -> acp_schema.InitializeResponse:
        request = acp_schema.InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=acp_schema.ClientCapabilities(
                fs=acp_schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
                field_meta=dict(self.profile.client_meta) or None,
            ),
            client_info=acp_schema.Implementation(
                name="baton", title="baton", version=baton.__version__
            ),
        ).model_dump(by_alias=True, exclude_none=True)
        raw = await self._call("initialize", request, timeout=self.profile.initialize_timeout)
        init: acp_schema.InitializeResponse = _parse(
            acp_schema.InitializeResponse, raw, "initialize"
        )
        if init.protocol_version != PROTOCOL_VERSION:
            raise RemoteProtocolError(
                f"agent speaks ACP protocol version {init.protocol_version}; "
                f"baton speaks {PROTOCOL_VERSION}"
            )
        return init

    async def _resume_or_load(
        self,
        session_id: str,
        servers: list[dict[str, Any]],
        caps: acp_schema.AgentCapabilities | None,
    ) -> dict[str, Any] | None:
        """``session/resume`` → ``session/load``; ``None`` means start fresh."""
        params = {"sessionId": session_id, "cwd": str(self.workspace), "mcpServers": servers}
        session_caps = caps.session_capabilities if caps else None
        attempts: list[tuple[str, SessionHow]] = []
        for how in self.recovery:
            if how == "resume" and session_caps is not None and session_caps.resume is not None:
                attempts.append(("session/resume", "resume"))
            elif how == "load" and caps is not None and caps.load_session:
                attempts.append(("session/load", "load"))
        for method, how in attempts:
            self._replaying = how == "load"
            self._replayed = 0
            try:
                result = await self._call(method, params, timeout=self.profile.session_timeout)
            except RemoteCallError as exc:
                await self._notice(
                    "session_recovery",
                    f"{method} for {session_id} failed ({exc.remote_message}); trying the next way",
                    method=method,
                )
                continue
            finally:
                self._replaying = False
            self.agent_session_id = session_id
            self.how = how
            return result if isinstance(result, dict) else {}
        if not attempts:
            await self._notice(
                "session_recovery",
                "the agent supports neither session/resume nor session/load; starting fresh",
            )
        return None

    async def _apply_settings(self) -> None:
        """Set the profile's mode/model/config through what the agent advertises."""
        if self.agent_session_id is None:
            return
        await apply_settings(
            self.profile,
            self.agent_session_id,
            self.session_result,
            call=self._call,
            notice=self._settings_notice,
        )

    async def _settings_notice(self, summary: str) -> None:
        await self._notice("config_skipped", summary, method="session/set_config_option")

    def _started_payload(self) -> SessionStarted:
        init = self.initialize_result
        modes = self.session_result.get("modes") or {}
        return SessionStarted(
            agent=self.profile.name,
            how=self.how,
            agent_session_id=self.agent_session_id or "",
            cwd=".",
            protocol_version=init.protocol_version if init else PROTOCOL_VERSION,
            agent_info=(
                init.agent_info.model_dump(by_alias=True, exclude_none=True)
                if init and init.agent_info
                else None
            ),
            modes=[bounded_value(m) for m in modes.get("availableModes", [])][:64],
            current_mode=modes.get("currentModeId"),
            config_options=[
                bounded_value(o) for o in self.session_result.get("configOptions") or []
            ][:64],
            replayed_updates=self._replayed,
        )

    # ==================================================================== turns

    @property
    def turn(self) -> Turn | None:
        return self._turn

    async def prompt(
        self, prompt: str | Sequence[Mapping[str, Any]], *, timeout: float | None = None
    ) -> TurnOutcome:
        """Run one turn to its single terminal event and return how it ended."""
        if self._turn is not None:
            raise AgentError("a turn is already running in this session; baton does not queue")
        if self.conn is None or self.conn.closed or self.agent_session_id is None:
            raise AgentExited("the agent session is not running", returncode=self.returncode)
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        data = text.encode("utf-8", errors="surrogatepass")
        turn = Turn(turn_id=f"turn-{uuid.uuid4().hex[:12]}", started_ms=_now_ms())
        self._turn = turn
        self._files_at_turn_start = frozenset(self.stats.files_written)
        self.stats.turns += 1
        session_id = self.agent_session_id
        await self._emit_drafts(self.normalizer.begin_turn(session_id, turn.turn_id))
        await self.emitter.emit(
            TurnSubmitted(
                prompt_preview=clip_text(self.redactor.text(text), 400),
                prompt_bytes=len(data),
                prompt_sha256=hashlib.sha256(data).hexdigest(),
            ),
            session_id=session_id,
            turn_id=turn.turn_id,
        )
        tool_calls_before = self.normalizer.tool_calls
        limit = self.profile.turn_timeout if timeout is None else timeout
        assert self.conn is not None
        request = await self.conn.send_request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}
        )
        self._prompt_future = request
        outcome: TurnCompleted | TurnFailed | TurnCancelled
        try:
            outcome = await self._await_prompt(turn, request, limit)
        except asyncio.CancelledError:
            # The caller is going away: never leave the agent running a turn.
            await self.kill("the caller was cancelled")
            outcome = TurnCancelled(
                reason="baton was interrupted", duration_ms=turn.elapsed_ms(_now_ms()), forced=True
            )
            await self._finish_turn(turn, outcome, None, tool_calls_before)
            raise
        usage = None
        if request.done() and not request.cancelled() and request.exception() is None:
            result = request.result()
            usage = result.get("usage") if isinstance(result, dict) else None
        return await self._finish_turn(turn, outcome, usage, tool_calls_before)

    async def _await_prompt(
        self, turn: Turn, request: asyncio.Future[Any], limit: float
    ) -> TurnCompleted | TurnFailed | TurnCancelled:
        done, _ = await asyncio.wait({request}, timeout=limit)
        timed_out = not done
        if timed_out:
            turn.cancel_requested = turn.cancel_requested or f"turn timeout after {limit:g}s"
            await self._send_cancel()
            done, _ = await asyncio.wait({request}, timeout=CANCEL_GRACE_SECONDS)
            if not done:
                await self.kill(f"the agent ignored session/cancel for {CANCEL_GRACE_SECONDS:g}s")
                with contextlib.suppress(BaseException):
                    await request
            return TurnFailed(
                error_type="AgentTimeout",
                message=(
                    f"the turn exceeded its {limit:g}s limit; "
                    + ("the agent stopped on session/cancel" if done else "its process was killed")
                ),
                duration_ms=turn.elapsed_ms(_now_ms()),
                stderr_preview=self.stderr_preview(),
            )
        try:
            result = request.result()
        except RemoteCallError as exc:
            if turn.cancel_requested and turn.cancel_requested.startswith("killed"):
                return self._cancelled(turn, forced=True)
            error_type = "AuthRequired" if exc.code == jsonrpc.AUTH_REQUIRED else "RemoteCallError"
            return TurnFailed(
                error_type=error_type,
                message=clip_text(self.redactor.text(str(exc))),
                duration_ms=turn.elapsed_ms(_now_ms()),
                stderr_preview=self.stderr_preview(),
            )
        except AgentExited as exc:
            if turn.cancel_requested and turn.cancel_requested.startswith("killed"):
                return self._cancelled(turn, forced=True)
            code = await self._exit_code_soon()
            return TurnFailed(
                error_type="AgentExited",
                message=f"the agent exited during the turn (exit code {code})"
                if code is not None
                else f"the agent closed its connection during the turn: {exc}",
                duration_ms=turn.elapsed_ms(_now_ms()),
                stderr_preview=self.stderr_preview(),
            )
        try:
            parsed = _parse(acp_schema.PromptResponse, result, "session/prompt")
        except RemoteProtocolError as exc:
            return TurnFailed(
                error_type="RemoteProtocolError",
                message=clip_text(str(exc)),
                duration_ms=turn.elapsed_ms(_now_ms()),
            )
        if parsed.stop_reason == "cancelled":
            return self._cancelled(turn, forced=False)
        return TurnCompleted(stop_reason=parsed.stop_reason, duration_ms=turn.elapsed_ms(_now_ms()))

    def _cancelled(self, turn: Turn, *, forced: bool) -> TurnCancelled:
        reason = turn.cancel_requested or "the agent cancelled the turn"
        return TurnCancelled(reason=reason, duration_ms=turn.elapsed_ms(_now_ms()), forced=forced)

    async def _finish_turn(
        self,
        turn: Turn,
        outcome: TurnCompleted | TurnFailed | TurnCancelled,
        usage: Any,
        tool_calls_before: int,
    ) -> TurnOutcome:
        turn.finish(outcome)
        files_before = set(self._files_at_turn_start)
        session_id = self.agent_session_id
        await self._cancel_pending_asks(turn, f"the turn ended ({outcome.TYPE})")
        drafts = self.normalizer.flush()
        if not isinstance(outcome, TurnCompleted):
            settled = self.normalizer.tools.settle_open(
                "cancelled" if isinstance(outcome, TurnCancelled) else "failed", _now_ms()
            )
            drafts.extend(Draft(p) for p in settled)
        drafts.extend(self.normalizer.end_turn(usage))
        turn_usage = next(
            (
                d.payload
                for d in drafts
                if isinstance(d.payload, UsageReported)
                and d.payload.available
                and d.payload.scope == "turn"
            ),
            None,
        )
        await self._emit_drafts(drafts)
        await self.emitter.emit(outcome, session_id=session_id, turn_id=turn.turn_id)
        self.stats.usage_available = self.stats.usage_available or self.normalizer.usage_reported
        tool_calls = self.normalizer.tool_calls - tool_calls_before
        self.stats.tool_calls += tool_calls
        self._last_turn = turn
        self._turn = None
        status: Literal["completed", "failed", "cancelled"]
        status = {"turn.completed": "completed", "turn.failed": "failed"}.get(  # type: ignore[assignment]
            outcome.TYPE, "cancelled"
        )
        return TurnOutcome(
            turn_id=turn.turn_id,
            status=status,
            stop_reason=outcome.stop_reason if isinstance(outcome, TurnCompleted) else None,
            error=outcome.message if isinstance(outcome, TurnFailed) else None,
            tool_calls=tool_calls,
            usage=turn_usage,
            files_written=tuple(sorted(self.stats.files_written - files_before)),
        )

    async def cancel(self, reason: str = "cancelled by the user") -> None:
        """Ask the agent to stop the current turn (ACP ``session/cancel``)."""
        turn = self._turn
        if turn is None or turn.done:
            return
        turn.cancel_requested = turn.cancel_requested or reason
        await self._cancel_pending_asks(turn, reason)
        await self._send_cancel()

    async def _send_cancel(self) -> None:
        if self.conn is None or self.conn.closed or self.agent_session_id is None:
            return
        with contextlib.suppress(ConnectionClosed):
            await self.conn.notify("session/cancel", {"sessionId": self.agent_session_id})

    async def kill(self, reason: str) -> None:
        """Stop the agent's whole process group now (it ignored cancel, or we are leaving)."""
        if self._turn is not None:
            self._turn.cancel_requested = f"killed: {reason}"
        if self.process is not None:
            await self.process.terminate(grace=0.5)
        await self.emitter.emit(
            HarnessDiagnostic(
                category="killed",
                summary=clip_text(reason),
                stderr_preview=self.stderr_preview(),
                exit_code=self.returncode,
            ),
            session_id=self.agent_session_id,
            turn_id=self._turn.turn_id if self._turn else None,
        )

    # ================================================================ closing

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process else None

    def stderr_preview(self) -> str:
        if self.process is None:
            return ""
        ring = self.process.stderr
        return self.redactor.preview(
            ring.tail(ring.capacity),
            DIAGNOSTIC_PREVIEW_BYTES,
            whole=ring.total_bytes <= ring.capacity,
        )

    async def close(self, reason: str = "closed by baton") -> None:
        """End the session and release everything; idempotent."""
        if self._closed:
            return
        if self._turn is not None:
            await self.cancel("the session is closing")
        await self._shutdown(reason)
        await self.emitter.emit(
            SessionClosed(reason=reason, exit_code=self.returncode),
            session_id=self.agent_session_id,
        )

    async def _shutdown(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        await self.terminals.close()
        if self.process is not None:
            await self.process.terminate(grace=EXIT_GRACE_SECONDS)
        for task in (self._reader, self._exit_watch):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._reader, self._exit_watch):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self.launch.cleanup()

    async def _watch_exit(self) -> None:
        assert self.process is not None and self.conn is not None
        code = await self.process.wait_exited()
        # Give the reader a moment to deliver what the agent wrote before exiting.
        reader = self._reader
        if reader is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(reader), EXIT_GRACE_SECONDS)
        self.conn.fail_pending(
            AgentExited(
                f"the agent exited with code {code}",
                returncode=code,
                stderr_preview=self.stderr_preview(),
            )
        )

    async def _exit_code_soon(self) -> int | None:
        if self.process is None:
            return None
        return await self.process.wait(EXIT_GRACE_SECONDS)

    # ================================================================= helpers

    async def _call(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        assert self.conn is not None
        try:
            return await self.conn.request(method, params, timeout=timeout)
        except RemoteCallError as exc:
            if exc.code == jsonrpc.AUTH_REQUIRED and method != "session/prompt":
                methods = []
                if self.initialize_result is not None:
                    methods = [m.id for m in self.initialize_result.auth_methods or []]
                raise AuthRequired(
                    f"{self.profile.name} requires authentication for {method} "
                    f"({exc.remote_message}); advertised methods: {', '.join(methods) or 'none'}",
                    auth_methods=methods,
                ) from exc
            raise
        except AgentTimeout:
            await self.emitter.emit(
                HarnessDiagnostic(
                    category="timeout",
                    summary=f"{method} got no answer within {timeout:g}s",
                    stderr_preview=self.stderr_preview(),
                ),
                session_id=self.agent_session_id,
            )
            raise

    async def _emit_drafts(self, drafts: Sequence[Any]) -> None:
        turn = self._turn or self._last_turn
        await self.emitter.emit_drafts(
            drafts, session_id=self.agent_session_id, turn_id=turn.turn_id if turn else None
        )

    async def _notice(
        self,
        category: str,
        summary: str,
        *,
        method: str | None = None,
        severity: Literal["info", "warning", "error"] = "warning",
        raw: Any = None,
    ) -> None:
        turn = self._turn or self._last_turn
        await self.emitter.emit(
            ProviderNotice(
                category=category,
                severity=severity,
                summary=clip_text(self.redactor.text(summary)),
                method=method,
            ),
            session_id=self.agent_session_id,
            turn_id=turn.turn_id if turn else None,
            raw=bounded_value(self.redactor.value(raw)) if raw is not None else None,
        )

    async def _cancel_pending_asks(self, turn: Turn, reason: str) -> None:
        """Open requests of this turn are cancelled; their waiters answer ``cancelled``."""
        await self.requests.cancel_turn(turn.turn_id, reason, self._emitter_for(turn.turn_id))

    def _emitter_for(self, turn_id: str | None) -> _TurnEvents:
        return _TurnEvents(self, turn_id)

    def _request_context(self, msg_id: JsonRpcId) -> RequestContext:
        turn = self._turn
        return RequestContext(
            run_id=self.emitter.run_id,
            connection_id=self.connection_id,
            jsonrpc_id=msg_id,
            session_id=self.agent_session_id,
            turn_id=turn.turn_id if turn else None,
            workspace=str(self.workspace),
        )

    # ============================================================ inbound calls

    async def handle_update(self, params: Any) -> None:
        if self._replaying:
            self._replayed += 1
            return
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if self.agent_session_id is not None and session_id not in (None, self.agent_session_id):
            drafts = self.normalizer.foreign(str(session_id), params)
            if not drafts:
                await self._notice(
                    "foreign_session",
                    f"update for session {session_id!r}, not this session; not attributed to it",
                    method="session/update",
                    severity="info",
                    raw=params,
                )
            await self._emit_drafts(drafts)
            return
        turn = self._turn
        answered = self._prompt_future is not None and self._prompt_future.done()
        late_turn = self._last_turn if turn is None else (turn if answered else None)
        if late_turn is not None:
            last = late_turn
            last.late_updates += 1
            if last.turn_id not in self._late_noticed:
                self._late_noticed.add(last.turn_id)
                await self._notice(
                    "late_update",
                    "the agent sent updates after its prompt response; attributed to that turn",
                    method="session/update",
                    severity="info",
                )
        await self._emit_drafts(self.normalizer.update(params, now_ms=_now_ms()))

    async def handle_permission(self, msg_id: JsonRpcId, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict) or not isinstance(params.get("toolCall"), dict):
            raise RpcError.invalid_params("toolCall is required")
        known = self.normalizer.tools.get(str(params["toolCall"].get("toolCallId", "")))
        try:
            document = permission_document(
                params,
                self.redactor,
                known_title=known.title if known else None,
                known_kind=known.kind if known else None,
            )
        except InvalidDocument as exc:
            await self.requests.refuse(
                "permission",
                str(exc),
                self._request_context(msg_id),
                self._emitter_for(self._turn.turn_id if self._turn else None),
                raw=self.redactor.value(params),
            )
            raise RpcError.invalid_params(str(exc)) from exc
        return await self._resolve(msg_id, document)

    async def _resolve(self, msg_id: JsonRpcId, document: RequestDocument) -> dict[str, Any]:
        """The one path of every human-decision request: fence, ledger, reply."""
        ctx = self._request_context(msg_id)
        turn = self._turn
        emit = self._emitter_for(ctx.turn_id)
        if turn is None or turn.done:
            last = self._last_turn
            await self.requests.refuse(
                document.kind,
                "arrived after its turn ended: stale, never attributed to another turn",
                RequestContext(**{**ctx.__dict__, "turn_id": last.turn_id if last else None}),
                self._emitter_for(last.turn_id if last else None),
                document=document,
            )
            return replies.cancelled_reply(document)
        try:
            resolution = await self.requests.resolve(document, ctx, emit)
        except PayloadTooLarge as exc:
            raise RpcError.invalid_params(str(exc)) from exc
        if resolution.record is not None:
            self._answered[msg_id] = resolution.record
        return resolution.reply

    async def response_written(self, msg_id: JsonRpcId, ok: bool) -> None:
        """Exactly once: ``delivered`` only after the reply reached the agent's pipe."""
        record = self._answered.pop(msg_id, None)
        if record is not None and ok:
            await self.requests.delivered(record, self._emitter_for(record.turn_id))

    async def handle_fs(self, method: str, params: Any) -> Any:
        if not isinstance(params, dict):
            raise RpcError.invalid_params("params must be an object")
        try:
            if method == "fs/read_text_file":
                return client_fs.read_text_file(self.workspace, params)
            written = client_fs.write_text_file(self.workspace, params)
            self.stats.files_written.add(display_path(self.workspace, written))
            return None
        except SecurityError as exc:
            await self._path_refused(method, str(params.get("path")), str(exc))
            raise RpcError(-32602, f"refused: {exc}") from exc
        except OSError as exc:
            raise RpcError(jsonrpc.INTERNAL_ERROR, f"{method} failed: {exc.strerror}") from exc

    async def handle_terminal(self, method: str, params: Any) -> Any:
        if not isinstance(params, dict):
            raise RpcError.invalid_params("params must be an object")
        try:
            if method == "terminal/create":
                result = await self.terminals.create(params)
                await self._notice(
                    "terminal",
                    f"terminal/create {params.get('command')!r} as {result['terminalId']}",
                    method=method,
                    severity="info",
                )
                return result
            handler = {
                "terminal/output": self.terminals.output,
                "terminal/wait_for_exit": self.terminals.wait_for_exit,
                "terminal/kill": self.terminals.kill,
                "terminal/release": self.terminals.release,
            }[method]
            return await handler(params)
        except SecurityError as exc:
            await self._path_refused(method, str(params.get("cwd")), str(exc))
            raise RpcError(-32602, f"refused: {exc}") from exc

    async def _path_refused(self, method: str, path: str, reason: str) -> None:
        turn = self._turn or self._last_turn
        await self.emitter.emit(
            SecurityPathRefused(
                control="workspace-containment",
                subject=f"{method} {display_path(self.workspace, path)}",
                reason=clip_text(self.redactor.text(reason)),
            ),
            session_id=self.agent_session_id,
            turn_id=turn.turn_id if turn else None,
        )

    async def handle_vendor(
        self, method: str, params: Any, *, has_id: bool, msg_id: JsonRpcId = -1
    ) -> Any:
        ctx = self.normalizer.context
        outcome = self.normalizer.extension.vendor_method(
            method, params if isinstance(params, dict) else {}, has_id=has_id, ctx=ctx
        )
        if outcome is None:
            await self._notice(
                "unclassified",
                f"unknown agent method {method!r}"
                + (" (answered method-not-found)" if has_id else ""),
                method=method,
                raw=params,
            )
            if has_id:
                raise RpcError.method_not_found(method)
            return None
        await self._emit_drafts([Draft(p) for p in outcome.payloads])
        if outcome.route == "human" and has_id:
            try:
                document = vendor_document(method, self.redactor.value(outcome.request))
            except InvalidDocument as exc:
                rctx = self._request_context(msg_id)
                await self.requests.refuse(
                    "question" if "question" in method else "plan",
                    str(exc),
                    rctx,
                    self._emitter_for(rctx.turn_id),
                    raw=self.redactor.value(params),
                )
                raise RpcError.invalid_params(str(exc)) from exc
            return await self._resolve(msg_id, document)
        if isinstance(outcome.result, ErrorReply):
            raise RpcError(outcome.result.code, outcome.result.message)
        return outcome.result if outcome.result is not None else {}

    async def handle_elicitation(self, msg_id: JsonRpcId, params: Any) -> dict[str, Any]:
        try:
            document = elicitation_document(params, self.redactor)
        except InvalidDocument as exc:
            ctx = self._request_context(msg_id)
            await self.requests.refuse(
                "elicitation",
                str(exc),
                ctx,
                self._emitter_for(ctx.turn_id),
                raw=self.redactor.value(params),
            )
            raise RpcError.invalid_params(str(exc)) from exc
        return await self._resolve(msg_id, document)

    async def protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        turn = self._turn or self._last_turn
        await self.emitter.emit(
            HarnessDiagnostic(
                category="protocol",
                summary=clip_text(self.redactor.text(protocol_error_text(error))),
                stderr_preview=self.redactor.text(error.preview)
                if isinstance(error, FrameError)
                else "",
            ),
            session_id=self.agent_session_id,
            turn_id=turn.turn_id if turn else None,
        )


_FS_METHODS = frozenset({"fs/read_text_file", "fs/write_text_file"})
_TERMINAL_METHODS = frozenset(
    {
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
)


class _Handler:
    """Routes inbound agent messages to the session, in arrival order."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session

    async def on_notification(self, method: str, params: Any) -> None:
        if method == "session/update":
            await self.session.handle_update(params)
        elif method == "$/cancel_request":
            await self.session._notice(
                "cancel_request",
                "agent withdrew a request",
                method=method,
                severity="info",
                raw=params,
            )
        else:
            await self.session.handle_vendor(method, params, has_id=False)

    def on_request(self, request: Request) -> Any:
        method = request.method
        session = self.session
        if method == "session/request_permission":
            return session.handle_permission(request.id, request.params)
        if method in _FS_METHODS:
            return session.handle_fs(method, request.params)
        if method in _TERMINAL_METHODS:
            return session.handle_terminal(method, request.params)
        if method == "elicitation/create":
            return session.handle_elicitation(request.id, request.params)
        return session.handle_vendor(method, request.params, has_id=True, msg_id=request.id)

    async def on_protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        await self.session.protocol_error(error)

    async def on_response_written(self, request_id: JsonRpcId, ok: bool) -> None:
        await self.session.response_written(request_id, ok)

    async def on_batch_end(self) -> None:
        await self.session._emit_drafts(self.session.normalizer.flush_ready())


def _parse(model: Any, raw: Any, method: str) -> Any:
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise RemoteProtocolError(
            f"{method}: the agent's answer does not match the ACP schema: "
            f"{exc.errors()[0].get('msg', exc)}"
        ) from exc
