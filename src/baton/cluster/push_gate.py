"""Fenced git pushes: a role actor's agent pushes only while the actor's epoch holds.

A push is a side effect the holder never sees on the agent's wire: the agent runs
``git push`` in its own terminal. So the actor puts a hooks directory in front of
every ``git`` the agent runs (``core.hooksPath``, given through ``GIT_CONFIG_*`` in
the agent's environment: the checkout's own configuration is not touched), whose
``pre-push`` asks the actor over a private unix socket. The actor answers through
its :class:`~baton.cluster.fence_guard.EpochGuard`, the same store-transaction check
as every other act: a stale copy (a partitioned host that came back) is refused,
the refusal is recorded as ``cluster.fenced_out`` and its agent is stopped.

The checkout's own hooks keep working: each one present when the actor starts is
forwarded to (``pre-push`` after the gate allowed), from its ``core.hooksPath`` when
the checkout configured one, else from ``.git/hooks``. The hook fails closed: no
gate, a wrong key, a timeout or a malformed answer refuse the push.

The gate bounds what it reads (:data:`REQUEST_LIMIT`) and compares the key in
constant time; the socket lives in a 0700 directory of the actor's own. Closing the
gate removes the socket; the actor removes the whole folder once its agent's process
group is gone (:meth:`PushGate.remove`), never before: were it gone while a process of
the agent lived, its git would run no hook and push unasked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "GATE_ENV",
    "KEY_ENV",
    "REQUEST_LIMIT",
    "GitGate",
    "PushGate",
    "agent_git_env",
    "original_hooks_dir",
    "write_hooks",
]

GATE_ENV: Final = "BATON_PUSH_GATE"
KEY_ENV: Final = "BATON_PUSH_GATE_KEY"
REQUEST_LIMIT: Final = 16 * 1024
"""A push request is a remote's name and URL: anything longer is refused unread."""
ANSWER_TIMEOUT_S: Final = 30.0

Check = Callable[[str], Awaitable[bool]]
"""``EpochGuard.check``: True when the act may go ahead."""


def agent_git_env(env: Mapping[str, str], *, hooks: Path, socket: Path, key: str) -> dict[str, str]:
    """``env`` plus the variables that put ``hooks`` in front of every ``git`` it runs.

    ``GIT_CONFIG_COUNT`` entries already in ``env`` are kept; ours is appended, so it
    wins over an earlier ``core.hooksPath`` of the same list.
    """
    out = dict(env)
    try:
        count = int(out.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    count = max(count, 0)
    out[f"GIT_CONFIG_KEY_{count}"] = "core.hooksPath"
    out[f"GIT_CONFIG_VALUE_{count}"] = str(hooks)
    out["GIT_CONFIG_COUNT"] = str(count + 1)
    out[GATE_ENV] = str(socket)
    out[KEY_ENV] = key
    return out


def original_hooks_dir(workspace: Path) -> Path | None:
    """Where the checkout's own hooks live (its ``core.hooksPath``, else ``.git/hooks``)."""
    git = shutil.which("git")
    if git is None:
        return None

    def ask(*args: str) -> str | None:
        done = subprocess.run(
            [git, "-C", str(workspace), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        )
        value = done.stdout.strip()
        return value if done.returncode == 0 and value else None

    configured = ask("config", "--get", "core.hooksPath")
    if configured is not None:
        path = Path(os.path.expanduser(configured))
        if not path.is_absolute():
            top = ask("rev-parse", "--show-toplevel")
            path = Path(top or workspace) / path
        return path
    common = ask("rev-parse", "--path-format=absolute", "--git-common-dir")
    return None if common is None else Path(common) / "hooks"


def write_hooks(directory: Path, *, original: Path | None, python: str = sys.executable) -> Path:
    """The hooks directory the agent's git uses: the gate's ``pre-push``, and a forwarder
    for every hook the checkout has now (``original``)."""
    hooks = directory / "hooks"
    hooks.mkdir(mode=0o700, exist_ok=True)
    present = (
        sorted(p.name for p in original.iterdir() if _runnable(p) and "." not in p.name)
        if original is not None and original.is_dir()
        else []
    )
    for name in {*present, "pre-push"}:
        lines = ["#!/bin/sh"]
        if name == "pre-push":
            lines.append(f'{shlex.quote(python)} -I -m baton.cluster.push_hook "$@" || exit 1')
        if name in present and original is not None:
            target = shlex.quote(str(original / name))
            lines.append(f'exec {target} "$@"')
        lines.append("exit 0")
        path = hooks / name
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o700)
    return hooks


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass
class GitGate:
    """What the actor gives its agent: the hooks directory, the socket and the key."""

    directory: Path
    hooks: Path
    socket: Path
    key: str

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        return agent_git_env(env, hooks=self.hooks, socket=self.socket, key=self.key)


class PushGate:
    """The actor's side: one unix socket answering ``pre-push`` through ``check``."""

    def __init__(self, check: Check) -> None:
        self._check = check
        self._server: asyncio.Server | None = None
        self.gate: GitGate | None = None
        self.asked: list[tuple[str, bool]] = []
        """(act, allowed) of every request that reached the check."""

    async def start(self, workspace: Path) -> GitGate:
        directory = Path(tempfile.mkdtemp(prefix="baton-gate-"))  # 0700, the actor's own
        key = secrets.token_urlsafe(24)
        original = await asyncio.to_thread(original_hooks_dir, workspace)
        hooks = await asyncio.to_thread(write_hooks, directory, original=original)
        socket = directory / "gate.sock"
        self._server = await asyncio.start_unix_server(
            lambda r, w: self._answer(r, w, key), path=str(socket), limit=REQUEST_LIMIT + 1
        )
        self.gate = GitGate(directory, hooks, socket, key)
        return self.gate

    async def _answer(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: str
    ) -> None:
        try:
            verdict = await self._verdict(reader, key)
            writer.write((json.dumps(verdict) + "\n").encode())
            await writer.drain()
        except (TimeoutError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _verdict(self, reader: asyncio.StreamReader, key: str) -> dict[str, object]:
        try:
            line = await asyncio.wait_for(reader.readline(), ANSWER_TIMEOUT_S)
        except ValueError:  # longer than the stream's limit
            return {"allow": False, "reason": "request too long"}
        if len(line) > REQUEST_LIMIT or not line.endswith(b"\n"):
            return {"allow": False, "reason": "request too long or unterminated"}
        try:
            request = json.loads(line)
        except ValueError:
            return {"allow": False, "reason": "malformed request"}
        if not isinstance(request, dict) or not all(
            isinstance(request.get(k), str) for k in ("key", "remote")
        ):
            return {"allow": False, "reason": "malformed request"}
        if not hmac.compare_digest(request["key"].encode(), key.encode()):
            return {"allow": False, "reason": "wrong gate key"}
        act = f"git push {request['remote'][:200]}"
        allowed = await self._check(act)
        self.asked.append((act, allowed))
        if not allowed:
            return {"allow": False, "reason": "this session's placement is no longer current"}
        return {"allow": True}

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self.gate is not None:
            # The hooks stay: a hooks path that vanished would let a surviving git push
            # without asking; without the socket the hook refuses.
            with contextlib.suppress(OSError):
                self.gate.socket.unlink()

    def remove(self) -> None:
        """Remove the gate's folder, once no process of the agent is left (nothing that
        could still run ``git`` with its hooks path): no folder is left per actor."""
        if self.gate is not None:
            shutil.rmtree(self.gate.directory, ignore_errors=True)
