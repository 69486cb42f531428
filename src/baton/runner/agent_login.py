"""Logins made with ``baton agents login``: where they live and who uses them.

An agent that logs in (Claude's ``/login``, Codex's ChatGPT login, Cursor's ``agent login``)
keeps its tokens under its own HOME/config dir. baton gives every launch a private root, so
a login made in the user's shell is invisible to it, and one made in an ephemeral root is
gone after the run. ``baton agents login NAME`` therefore logs in inside the profile's
*login root*, ``$XDG_STATE_HOME/baton/logins/<profile>`` (by default
``~/.local/state/baton/logins/<profile>``), a persistent private root with the same layout
as any launch root; afterwards every launch of that profile that asks for no persistent
root of its own uses the login root, so the agent finds (and refreshes) its own tokens.

The login itself is the agent's: ACP terminal authentication (``authMethods`` entries of
``type: "terminal"``: baton re-runs the agent's command with the method's ``args``/``env``
on the user's terminal, exit 0 meaning success), else an agent-driven ``authenticate``.
``login.json`` in the root records which method was used and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import baton
from baton.acp.connection import JsonRpcConnection, NoDeferral
from baton.acp.jsonrpc import Request, RpcError
from baton.acp.process import AgentProcess
from baton.agent_profile import AgentProfile
from baton.errors import ConfigError, FrameHandlingError
from baton.events.bounds import clip_text
from baton.fsutil import atomic_write
from baton.jsontypes import JsonObject, JsonValue
from baton.security.paths import sanitize_id

__all__ = [
    "LOGIN_RECORD",
    "AuthMethod",
    "auth_methods",
    "authenticate",
    "choose_method",
    "logged_in_root",
    "login_record",
    "login_root",
    "logins_dir",
    "record_login",
    "terminal_login_argv",
]

LOGIN_RECORD: Final = "login.json"

logger = logging.getLogger(__name__)


def logins_dir(environ: Mapping[str, str]) -> Path:
    state = environ.get("XDG_STATE_HOME") or str(
        Path(environ.get("HOME") or Path.home()) / ".local" / "state"
    )
    return Path(state).expanduser() / "baton" / "logins"


def login_root(profile: AgentProfile, environ: Mapping[str, str]) -> Path:
    """The profile's login root (it may not exist yet)."""
    return logins_dir(environ) / sanitize_id(profile.name)


def logged_in_root(profile: AgentProfile, environ: Mapping[str, str]) -> Path | None:
    """The login root when the profile has logged in (launches then use it), else ``None``."""
    return login_root(profile, environ) if login_record(profile, environ) is not None else None


def login_record(profile: AgentProfile, environ: Mapping[str, str]) -> JsonObject | None:
    """What ``baton agents login`` recorded for the profile, or ``None`` (never logged in)."""
    try:
        data = json.loads((login_root(profile, environ) / LOGIN_RECORD).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ------------------------------------------------------------------------ the login


@dataclass(frozen=True, slots=True)
class AuthMethod:
    """One entry of ``initialize.authMethods``."""

    id: str
    name: str
    type: str
    """``agent`` (call ``authenticate``), ``terminal`` (re-run the command), ``env_var``…"""
    description: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    variables: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: JsonValue) -> AuthMethod | None:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str):
            return None
        raw_args, raw_env = raw.get("args"), raw.get("env")
        args: list[Any] = raw_args if isinstance(raw_args, list) else []
        env: Mapping[str, Any] = raw_env if isinstance(raw_env, Mapping) else {}
        variables = [v.get("name") for v in raw.get("vars") or [] if isinstance(v, Mapping)]
        return cls(
            id=clip_text(raw["id"], 120),
            name=clip_text(str(raw.get("name") or raw["id"]), 200),
            type=str(raw.get("type") or "agent"),
            description=clip_text(str(raw.get("description") or ""), 400),
            args=tuple(str(a) for a in args)[:32],
            env={str(k): str(v) for k, v in list(env.items())[:32]},
            variables=tuple(str(v) for v in variables if isinstance(v, str)),
        )


class _Quiet(NoDeferral):
    """An inbound handler that answers nothing: the login handshake needs no client methods."""

    async def on_notification(self, method: str, params: Any) -> None:
        return None

    async def on_request(self, request: Request) -> Awaitable[Any]:
        raise RpcError.method_not_found(request.method)

    async def on_protocol_error(self, error: Any) -> None:
        return None

    async def on_fault(self, error: FrameHandlingError) -> None:
        logger.warning("%s", error)


@contextlib.asynccontextmanager
async def _acp(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> AsyncIterator[Any]:
    """The agent as an ACP peer; its stderr goes to the user's terminal (login hints)."""
    process = await AgentProcess.spawn(argv, env=env, cwd=cwd, inherit_stderr=True)
    conn = JsonRpcConnection(process.stdout, process.stdin, _Quiet())
    reader = asyncio.create_task(conn.run())
    try:
        yield conn
    finally:
        await process.terminate(grace=3.0)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


_INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "auth": {"terminal": True},
        "_meta": {"terminal-auth": True},
    },
    "clientInfo": {"name": "baton", "title": "baton agents login", "version": baton.__version__},
}


async def auth_methods(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, *, timeout: float
) -> list[AuthMethod]:
    """What the agent offers for logging in (``initialize`` with terminal auth advertised)."""
    async with _acp(argv, env, cwd) as conn:
        result = await conn.request("initialize", _INITIALIZE, timeout=timeout)
    raw = result.get("authMethods") if isinstance(result, Mapping) else None
    methods = [AuthMethod.parse(m) for m in raw or []]
    return [m for m in methods if m is not None]


async def authenticate(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, method: AuthMethod, *, timeout: float
) -> None:
    """An agent-driven login: ``authenticate {methodId}`` (the agent may print a URL)."""
    async with _acp(argv, env, cwd) as conn:
        await conn.request("initialize", _INITIALIZE, timeout=timeout)
        await conn.request("authenticate", {"methodId": method.id}, timeout=timeout)


def terminal_login_argv(argv: Sequence[str], method: AuthMethod) -> list[str]:
    """ACP terminal auth: the agent's own command again, with the method's arguments."""
    return [*argv, *method.args]


def choose_method(methods: Sequence[AuthMethod], wanted: str | None) -> AuthMethod:
    """``wanted`` by id, else the first terminal method, else the first agent method."""
    if wanted is not None:
        for method in methods:
            if method.id == wanted:
                return method
        known = ", ".join(m.id for m in methods) or "none"
        raise ConfigError(f"the agent offers no login method {wanted!r} (offered: {known})")
    for kind in ("terminal", "agent"):
        for method in methods:
            if method.type == kind:
                return method
    offered = "; ".join(
        f"{m.id} ({m.type}{': ' + ', '.join(m.variables) if m.variables else ''})" for m in methods
    )
    raise ConfigError(
        "the agent offers no interactive login"
        + (
            f" (offered: {offered}); bind the named variables as credentials instead"
            if offered
            else ""
        )
    )


def record_login(root: Path, method: AuthMethod) -> None:
    data = {
        "method": method.id,
        "type": method.type,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(root / LOGIN_RECORD, (json.dumps(data) + "\n").encode())
