"""The gates before an agent process is started, and how it is started.

Workspace admission and the pinned distribution run before anything is resolved or
launched, and every refusal is a ``security.*`` event before it is an exception.
:func:`transport_for` chooses how the session talks to the agent: ACP over the agent's
stdio (a process group), or the ``cursor-sdk`` transport (a Cursor SDK bridge behind an
ACP face, :mod:`baton.cursor_sdk`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from baton.acp.transport import TransportFactory, spawn_subprocess
from baton.agent_profile import AgentProfile
from baton.errors import SecurityError
from baton.events.bounds import clip_text
from baton.events.model import SecurityPinMismatch
from baton.providers.cursor_sdk.tables import DEFAULT_MODEL
from baton.runner.emitter import EventEmitter
from baton.security.admission import admit
from baton.security.distribution import verify_before_launch

__all__ = [
    "admit_or_refuse",
    "transport_for",
    "verified_argv",
]


async def verified_argv(
    profile: AgentProfile, state_dir: Path, environ: Mapping[str, str], emitter: EventEmitter
) -> list[str]:
    """A pinned profile launches its verified executable, or not at all."""
    argv = profile.argv()
    try:
        verified = verify_before_launch(profile, state_dir, environ)
    except SecurityError as exc:
        await emitter.emit(
            SecurityPinMismatch(
                control="pinned-distribution", subject=profile.name, reason=clip_text(str(exc))
            )
        )
        raise
    if verified is None:
        return argv
    return [str(verified.executable), *verified.launch_args, *argv[1:]]


def transport_for(profile: AgentProfile) -> TransportFactory:
    """How a session of ``profile`` starts its agent (``profile.transport``)."""
    if profile.transport == "cursor-sdk":
        # Imported here: the optional transport costs every other session ~40 ms of start.
        from baton.cursor_sdk import CursorSdkLauncher

        return CursorSdkLauncher(model=profile.model or DEFAULT_MODEL, mode=profile.mode or "ask")
    return spawn_subprocess


async def admit_or_refuse(profile: AgentProfile, workspace: Path, emitter: EventEmitter) -> None:
    """Workspace admission before anything is resolved or launched; refusals are events."""
    verdict = admit(
        workspace, profile.admission, allow_workspace_config=profile.allow_workspace_config
    )
    for payload in verdict.events():
        await emitter.emit(payload)
    verdict.raise_if_refused()
