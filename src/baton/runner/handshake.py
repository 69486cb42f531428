"""Opening an ACP session on a fresh connection: initialize, resume/load/new, settings.

``initialize`` (protocol version checked), then the recovery ways the caller allows
and the agent advertises (``session/resume``, then ``session/load``; a failed way is
a ``provider.notice`` and the next is tried), else ``session/new``; then the profile's
mode/model/config through what the agent advertises
(:func:`baton.runner.settings.apply_settings`); then who approves in the effective mode
is verified (:class:`~baton.runner.approvals.ApprovalGuard`: a self-approving mode is
refused here unless the profile says ``agent_approves``). A JSON-RPC error answering
``session/new`` is a :class:`~baton.errors.SessionRejected`. The result says how the
session was opened, for ``session.started`` (the effective mode, and who approves).
The ``mcpServers`` may depend on the ``initialize`` answer (:data:`McpServers`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from baton.acp.client import AcpClient, OpenedSession
from baton.acp.messages import PROTOCOL_VERSION, AgentCapabilities, InitializeAnswer
from baton.agent_profile import AgentProfile
from baton.errors import RemoteCallError, SessionRejected
from baton.events.bounds import bounded_value, clip_text
from baton.events.model import SessionStarted
from baton.runner.client_methods import ClientMethods
from baton.runner.session_events import SessionEvents
from baton.runner.settings import apply_settings

if TYPE_CHECKING:
    from baton.runner.approvals import ApprovalGuard

__all__ = ["McpServers", "Opened", "SessionHow", "handshake"]

SessionHow = Literal["new", "load", "resume"]

McpServers = (
    Sequence[Mapping[str, Any]]
    | Callable[[InitializeAnswer], Awaitable[Sequence[Mapping[str, Any]]]]
)
"""The ``mcpServers`` a session is opened with, or how to choose them from the agent's
``initialize`` answer (e.g. an HTTP entry only for an agent advertising
``mcpCapabilities.http``): asked once, after ``initialize``, before any session call."""

_METHODS: dict[SessionHow, str] = {"resume": "session/resume", "load": "session/load"}


@dataclass(slots=True)
class Opened:
    """How the session came to be, as ``session.started`` reports it."""

    initialized: InitializeAnswer
    session_id: str
    how: SessionHow
    result: dict[str, Any] = field(default_factory=dict)
    replayed: int = 0
    current_mode: str | None = None
    """The effective mode after baton's settings, as the agent advertises it."""
    approval: str | None = None
    """Who approves mutations in it (``asks``, ``read_only``, ``self_approves``, ``unknown``)."""

    def started(self, agent: str) -> SessionStarted:
        init = self.initialized
        modes = self.result.get("modes") or {}
        return SessionStarted(
            agent=agent,
            how=self.how,
            agent_session_id=self.session_id,
            cwd=".",
            protocol_version=init.protocol_version or PROTOCOL_VERSION,
            agent_info=init.agent_info,
            modes=[bounded_value(m) for m in modes.get("availableModes", [])][:64],
            current_mode=self.current_mode or modes.get("currentModeId"),
            config_options=[bounded_value(o) for o in self.result.get("configOptions") or []][:64],
            replayed_updates=self.replayed,
            approval=self.approval,
        )


async def handshake(
    client: AcpClient,
    profile: AgentProfile,
    *,
    cwd: str,
    mcp_servers: McpServers,
    resume_session_id: str | None,
    recovery: Sequence[SessionHow],
    events: SessionEvents,
    inbound: ClientMethods,
    approvals: ApprovalGuard | None = None,
) -> Opened:
    """Initialize and open (or reopen) the session; raises typed errors only."""
    init = await client.initialize(
        client_meta=profile.client_meta, timeout=profile.initialize_timeout
    )
    servers = [
        dict(entry) for entry in (await mcp_servers(init) if callable(mcp_servers) else mcp_servers)
    ]
    opened: OpenedSession | None = None
    how: SessionHow = "new"
    if resume_session_id:
        for way in _ways(recovery, init.capabilities):
            method = _METHODS[way]
            inbound.replaying, inbound.replayed = way == "load", 0
            try:
                opened = await client.reopen_session(
                    method,
                    session_id=resume_session_id,
                    cwd=cwd,
                    mcp_servers=servers,
                    timeout=profile.session_timeout,
                    meta=profile.session_meta,
                )
            except RemoteCallError as exc:
                await events.notice(
                    "session_recovery",
                    f"{method} for {resume_session_id} failed ({exc.remote_message}); "
                    "trying the next way",
                    method=method,
                )
                continue
            finally:
                inbound.replaying = False
            how = way
            break
        else:
            if not _ways(recovery, init.capabilities):
                await events.notice(
                    "session_recovery",
                    "the agent supports neither session/resume nor session/load; starting fresh",
                )
    if opened is None:
        try:
            opened = await client.new_session(
                cwd=cwd,
                mcp_servers=servers,
                timeout=profile.session_timeout,
                meta=profile.session_meta,
            )
        except RemoteCallError as exc:
            raise SessionRejected(
                f"{profile.name} refused session/new: "
                f"{clip_text(events.redactor.text(exc.remote_message))} (code {exc.code})",
                code=exc.code,
                method="session/new",
            ) from exc
        how = "new"
    events.agent_session_id = opened.session_id
    result = dict(opened.result)
    await apply_settings(
        profile,
        opened.session_id,
        result,
        call=client.call,
        notice=lambda summary: events.notice(
            "config_skipped", summary, method="session/set_config_option"
        ),
    )
    ready = Opened(init, opened.session_id, how, result, inbound.replayed if how == "load" else 0)
    if approvals is not None:
        await approvals.start(result)
        ready.current_mode, ready.approval = approvals.current_mode(), approvals.klass
    return ready


def _ways(recovery: Sequence[SessionHow], caps: AgentCapabilities | None) -> list[SessionHow]:
    """The recovery ways the caller allows, in its order, that the agent advertises."""
    if caps is None:
        return []
    advertised = {"resume": caps.resume, "load": caps.load_session}
    return [way for way in recovery if advertised.get(way, False)]
