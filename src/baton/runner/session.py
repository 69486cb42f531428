"""One agent and its ACP session: the runner's public unit, a small facade.

``AgentSession.open()`` admits the workspace, verifies a pinned distribution,
prepares the private launch environment, starts the agent through a transport
(a process by default; :mod:`baton.testing` ships in-memory and replay ones),
and opens the session (:mod:`.handshake`). ``prompt()`` runs exactly one turn to
exactly one terminal event (:mod:`.turn_driver`); ``cancel()`` asks the agent to
stop and ``kill()`` stops it when it will not. What the agent calls or notifies is
answered by :mod:`.client_methods`; events are stamped by :mod:`.session_events`; who
approves mutations is checked and audited by :mod:`.approvals`.
No provider is special-cased: providers differ only by their profile and their
:class:`~baton.events.extension.ProviderExtension`.

The session's own life is a table (:mod:`.session_state`): ``opening → ready ⇄
prompting → closed``. Calling ``prompt()`` during a turn or after ``close()`` is a
:class:`~baton.errors.UsageError` (a bug in the caller), not the agent's fault.

Length: ``open()`` is one ordered sequence (admission, pin, launch, handshake, then the
worktree mode and the budget meter wired in) that a reader must see whole; every step's
work lives in the modules named above.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

from baton.acp.client import AcpClient
from baton.acp.connection import JsonRpcConnection
from baton.acp.messages import InitializeAnswer
from baton.acp.process import AgentProcess
from baton.acp.transport import AgentTransport, Launch, TransportFactory
from baton.agent_profile import AgentProfile
from baton.aiotasks import cancel_and_wait
from baton.config import agent_roots_dir
from baton.errors import (
    AgentError,
    AgentExited,
    AgentTimeout,
    ConfigError,
    SecurityError,
)
from baton.events.acp_normalizer import AcpNormalizer
from baton.events.bounds import clip_text
from baton.events.extension import ProviderExtension
from baton.events.model import HarnessDiagnostic, SessionClosed, SessionFailed
from baton.jsontypes import JsonMapping, JsonObject
from baton.providers.approval import ApprovalVerdict
from baton.providers.registry import extension_for
from baton.providers.worktree_modes import in_worktree
from baton.runner.agent_login import logged_in_root
from baton.runner.approvals import ApprovalGuard
from baton.runner.budget_plan import BudgetPlan
from baton.runner.budget_watch import BudgetWatch
from baton.runner.client_methods import ClientMethods
from baton.runner.emitter import EventEmitter
from baton.runner.handshake import McpServers, Opened, SessionHow, handshake
from baton.runner.launch import admit_or_refuse, transport_for, verified_argv
from baton.runner.requests_broker import RequestBroker
from baton.runner.session_events import SessionEvents, SessionStats
from baton.runner.session_state import TABLE, SessionEvent, SessionState
from baton.runner.terminals import TerminalManager
from baton.runner.turn import CancelCause, Turn
from baton.runner.turn_driver import CANCEL_GRACE_SECONDS, TurnDriver, TurnOutcome, now_ms
from baton.security.launch_env import LaunchEnvironment, prepare_launch
from baton.security.paths import display_path
from baton.security.redact import Redactor

__all__ = [
    "CANCEL_GRACE_SECONDS",
    "AgentSession",
    "SessionHow",
    "SessionState",
    "SessionStats",
    "TurnOutcome",
]

log = logging.getLogger(__name__)


"""Every legal move of a session; anything absent is a :class:`UsageError`."""


class AgentSession:
    """A live ACP session with one agent."""

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
        argv: Sequence[str],
        isolated: bool = False,
        budget: BudgetPlan | None = None,
    ) -> None:
        self.profile = profile
        self.workspace = workspace
        self.emitter = emitter
        self.requests = requests
        self.redactor = redactor
        self.launch = launch
        self.argv = list(argv)
        self.state = SessionState.OPENING
        self.connection_id = uuid.uuid4().hex
        self.normalizer = AcpNormalizer(
            redaction=redactor,
            display_path=partial(display_path, workspace),
            extension=extension,
            workspace=str(workspace),
        )
        self.events = SessionEvents(emitter, redactor)
        self.terminals = TerminalManager(workspace, launch.env)
        self.approvals = ApprovalGuard(
            profile=profile,
            workspace=workspace,
            events=self.events,
            terminals=self.terminals,
            strict=lambda: requests.policy.audit == "strict",
            isolated=isolated,
        )
        self.events.watch = self.approvals
        self.budget: BudgetWatch | None = None
        """The session's usage ledger and budget meter (with a store)."""
        if budget is not None and emitter.store is not None:
            self.budget = BudgetWatch.for_session(
                budget,
                profile,
                launch.bound_secret_values,
                events=self.events,
                normalizer=self.normalizer,
            )
            self.events.meter = self.budget
        self.inbound = ClientMethods(
            events=self.events,
            normalizer=self.normalizer,
            requests=requests,
            terminals=self.terminals,
            workspace=workspace,
            connection_id=self.connection_id,
            now_ms=now_ms,
            approvals=self.approvals,
            missing_file_reads=profile.missing_file_reads,
        )
        self.transport: AgentTransport | None = None
        self.conn: JsonRpcConnection | None = None
        self.client: AcpClient | None = None
        self.turns: TurnDriver | None = None
        self.opened: Opened | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ opening

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
        mcp_servers: McpServers = (),
        resume_session_id: str | None = None,
        recovery: Sequence[SessionHow] = ("resume", "load"),
        persistent_root: Path | None = None,
        transport: TransportFactory | None = None,
        isolated: bool = False,
        budget: BudgetPlan | None = None,
    ) -> AgentSession:
        """Admit, launch, handshake and create/resume a session, or raise a typed error.

        ``transport``: how the agent is started; by default the profile's
        (:func:`~.launch.transport_for`). ``isolated``: ``workspace`` is a task tree's own
        worktree (the team loop says so, never for the user's checkout): the profile runs as
        :func:`~baton.providers.worktree_modes.in_worktree` makes it (the family's edit mode,
        its edits audited by the worktree rule). ``budget``: meter the session's usage (the
        ledger) against these budgets. Every refusal and failure is also an event in the
        stream.
        """
        if isolated:
            profile = in_worktree(profile)
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
                # After `baton agents login`, the profile's login root holds its tokens.
                persistent_root=persistent_root or logged_in_root(profile, env_in),
            )
        except (ConfigError, SecurityError) as exc:
            await emitter.emit(
                SessionFailed(error_type=type(exc).__name__, message=clip_text(str(exc)))
            )
            raise
        self = cls(
            profile,
            workspace=workspace,
            emitter=emitter,
            requests=requests,
            extension=extension if extension is not None else extension_for(profile.family),
            redactor=Redactor(launch.bound_secret_values),
            launch=launch,
            argv=argv,
            isolated=isolated,
            budget=budget,
        )
        try:
            await self._start(
                transport or transport_for(profile), mcp_servers, resume_session_id, recovery
            )
        except (AgentError, ConfigError, SecurityError) as exc:
            await self._failed(exc)
            raise
        finally:
            if self.state is SessionState.OPENING:
                await self._shutdown()
        return self

    async def _start(
        self,
        factory: TransportFactory,
        mcp_servers: McpServers,
        resume_session_id: str | None,
        recovery: Sequence[SessionHow],
    ) -> None:
        transport = await factory(Launch(self.argv, self.launch.env, self.workspace))
        self.transport = transport
        self.conn = JsonRpcConnection(transport.reader, transport.writer, self.inbound)
        self.client = AcpClient(self.conn, agent_name=self.profile.name)
        self.turns = TurnDriver(
            client=self.client,
            transport=transport,
            events=self.events,
            normalizer=self.normalizer,
            requests=self.requests,
            replies_settled=self.inbound.replies_settled,
            approvals=self.approvals,
            replies_written=self.inbound.replies_written,
            stall_timeout=self.profile.stall_timeout,
            budget=self.budget,
        )
        self.approvals.cancel = self.cancel
        self._tasks = [
            asyncio.create_task(self.conn.run(), name="acp-reader"),
            asyncio.create_task(self._watch_exit(), name="acp-exit-watch"),
        ]
        self.opened = await handshake(
            self.client,
            self.profile,
            cwd=str(self.workspace),
            mcp_servers=mcp_servers,
            resume_session_id=resume_session_id,
            recovery=recovery,
            events=self.events,
            inbound=self.inbound,
            approvals=self.approvals,
        )
        self._move(SessionEvent.OPENED)
        await self.events.emit(self.opened.started(self.profile.name))
        await self.approvals.started()
        if self.budget is not None:
            await self.budget.opened(self.opened)

    async def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, AgentTimeout):
            await self.events.emit(
                HarnessDiagnostic(
                    category="timeout",
                    summary=f"{exc.operation} got no answer within {exc.seconds:g}s",
                    stderr_preview=self.stderr_preview(),
                )
            )
        await self.events.emit(
            SessionFailed(
                error_type=type(exc).__name__,
                message=clip_text(self.redactor.text(str(exc))),
                auth_methods=list(getattr(exc, "auth_methods", ())),
                stderr_preview=self.stderr_preview(),
            )
        )

    def _move(self, event: SessionEvent) -> None:
        self.state = TABLE.next(self.state, event)

    # ------------------------------------------------------------------- facade

    @property
    def agent_session_id(self) -> str | None:
        return self.events.agent_session_id

    @property
    def how(self) -> SessionHow:
        return self.opened.how if self.opened else "new"

    @property
    def initialize_result(self) -> InitializeAnswer | None:
        return self.opened.initialized if self.opened else None

    @property
    def session_result(self) -> JsonObject:
        return self.opened.result if self.opened else {}

    @property
    def approval(self) -> ApprovalVerdict | None:
        """Who approves mutations in the session's effective mode (checked at start)."""
        return self.approvals.verdict

    @property
    def stats(self) -> SessionStats:
        return self.events.stats

    @property
    def turn(self) -> Turn | None:
        return self.events.turn

    @property
    def process(self) -> AgentProcess | None:
        """The agent's process (a Cursor SDK transport's bridge), when there is one."""
        if isinstance(self.transport, AgentProcess):
            return self.transport
        # A transport in front of a process (the Cursor SDK's face before its bridge) says
        # which, without the runner importing that optional transport at every start.
        behind = getattr(self.transport, "process", None)
        return behind if isinstance(behind, AgentProcess) else None

    @property
    def returncode(self) -> int | None:
        return self.transport.returncode if self.transport else None

    def stderr_preview(self) -> str:
        return self.turns.stderr_preview() if self.turns else ""

    # -------------------------------------------------------------------- turns

    async def prompt(
        self, prompt: str | Sequence[JsonMapping], *, timeout: float | None = None
    ) -> TurnOutcome:
        """Run one turn to its single terminal event and return how it ended."""
        self._move(SessionEvent.PROMPT)
        try:
            if self.conn is None or self.conn.closed or self.turns is None:
                raise AgentExited("the agent session is not running", returncode=self.returncode)
            limit = self.profile.turn_timeout if timeout is None else timeout
            return await self.turns.run(prompt, timeout=limit)
        finally:
            if self.state is SessionState.PROMPTING:
                self._move(SessionEvent.TURN_ENDED)

    async def cancel(self, reason: str = "cancelled by the user") -> None:
        """Ask the agent to stop the current turn (ACP ``session/cancel``)."""
        if self.turns is not None:
            await self.turns.cancel(reason, CancelCause.USER)

    async def kill(self, reason: str) -> None:
        """Stop the agent now (it ignored cancel, or we are leaving)."""
        if self.turns is not None:
            await self.turns.kill(reason)

    # ------------------------------------------------------------------ closing

    async def close(self, reason: str = "closed by baton") -> None:
        """End the session and release everything; idempotent."""
        if self.state is SessionState.CLOSED:
            return
        if self.turns is not None:
            await self.turns.cancel("the session is closing", CancelCause.CLOSING)
        await self._shutdown()
        # Text held back at a read's end (it might have been half a secret) is kept now.
        await self.events.drafts(self.normalizer.flush())
        await self.events.emit(SessionClosed(reason=reason, exit_code=self.returncode))

    async def _shutdown(self) -> None:
        if self.state is SessionState.CLOSED:
            return
        self._move(SessionEvent.CLOSE)
        if self.budget is not None:
            self.budget.close()
        await self.terminals.close()
        if self.transport is not None:
            await self.transport.close()
        await cancel_and_wait(self._tasks)
        self.launch.cleanup()

    async def _watch_exit(self) -> None:
        assert self.transport is not None and self.conn is not None
        transport, conn = self.transport, self.conn
        code = await transport.wait_exited()
        # Give the reader a moment to deliver what the agent wrote before it ended.
        await asyncio.wait(self._tasks[:1], timeout=transport.exit_grace)
        conn.fail_pending(
            AgentExited(
                f"the agent exited with code {code}",
                returncode=code,
                stderr_preview=self.stderr_preview(),
            )
        )
