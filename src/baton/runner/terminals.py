"""The ``terminal/*`` client methods: commands the agent runs through baton.

Each terminal is its own process group in the workspace (cwd contained), with the
agent's private environment plus what the agent asked for, and output kept to the
agent's ``outputByteLimit`` from the end (ACP truncates from the beginning).

Errors carry ACP's code for the case (:mod:`baton.acp.params`): a terminal id that is not
open, a ``cwd`` or a command that does not exist: *resource not found* (-32002); params
that do not fit: *invalid params* (-32602). A ``cwd`` outside the workspace is a refusal
(:class:`~baton.errors.SecurityError`), which the caller reports.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.acp import params as acp_params
from baton.acp.jsonrpc import RpcError
from baton.jsontypes import JsonMapping, JsonObject
from baton.procgroup import exited_within, start_group, stop_group
from baton.security.paths import display_path, resolve_inside

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "MAX_TERMINALS",
    "TerminalManager",
]

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
MAX_TERMINALS = 32


@dataclass(slots=True)
class _Terminal:
    proc: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    def append(self, chunk: bytes) -> None:
        self.output += chunk
        if len(self.output) > self.limit:
            del self.output[: len(self.output) - self.limit]
            # Cut on a UTF-8 boundary: drop leading continuation bytes.
            while self.output and (self.output[0] & 0xC0) == 0x80:
                del self.output[0]
            self.truncated = True

    def exit_status(self) -> dict[str, Any] | None:
        code = self.proc.returncode
        if code is None:
            return None
        if code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}


class TerminalManager:
    """Terminals of one agent connection; all are killed when the session closes."""

    def __init__(self, workspace: Path, env: Mapping[str, str]) -> None:
        self.workspace = workspace
        self.env = dict(env)
        self._terminals: dict[str, _Terminal] = {}
        self._released: OrderedDict[str, str] = OrderedDict()
        """The last output of released terminals (bounded), for tool events naming them."""

    async def create(self, params: JsonMapping) -> JsonObject:
        command = acp_params.required_text(params, "command", non_empty=True)
        args = acp_params.string_array(params, "args")
        env = dict(self.env)
        env.update(_env_variables(params))
        limit = acp_params.optional_uint(params, "outputByteLimit") or DEFAULT_OUTPUT_LIMIT
        cwd = self._cwd(acp_params.optional_text(params, "cwd"))
        if len(self._terminals) >= MAX_TERMINALS:
            raise RpcError.invalid_params(f"at most {MAX_TERMINALS} open terminals; release one")
        argv = [command, *args] if args or " " not in command else ["/bin/sh", "-c", command]
        try:
            proc = await start_group(
                argv,
                env=env,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except FileNotFoundError:
            raise RpcError.not_found(f"command {command!r} not found") from None
        except OSError as exc:
            raise RpcError.invalid_params(f"cannot run {command!r}: {exc.strerror}") from exc
        terminal_id = f"term-{uuid.uuid4().hex[:12]}"
        terminal = _Terminal(proc=proc, limit=limit)
        terminal.reader = asyncio.create_task(self._read(terminal))
        self._terminals[terminal_id] = terminal
        return {"terminalId": terminal_id}

    def _cwd(self, cwd: str | None) -> Path:
        """The command's directory: the workspace, or one inside it that exists."""
        if cwd is None:
            return self.workspace
        path = resolve_inside(self.workspace, cwd, must_exist=False, regular_file=False)
        if not path.exists():
            shown = display_path(self.workspace, path)
            raise RpcError.not_found(f"cwd {shown} does not exist in the workspace")
        if not path.is_dir():
            raise RpcError.invalid_params(
                f"cwd {display_path(self.workspace, path)} is not a directory"
            )
        return path

    async def _read(self, terminal: _Terminal) -> None:
        assert terminal.proc.stdout is not None
        while chunk := await terminal.proc.stdout.read(65536):
            terminal.append(chunk)

    def _get(self, params: Mapping[str, Any]) -> _Terminal:
        terminal_id = acp_params.required_text(params, "terminalId")
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            gone = "was released" if terminal_id in self._released else "is not open here"
            raise RpcError.not_found(f"terminal {terminal_id!r} {gone}")
        return terminal

    async def output(self, params: JsonMapping) -> JsonObject:
        terminal = self._get(params)
        result: dict[str, Any] = {
            "output": terminal.output.decode("utf-8", errors="replace"),
            "truncated": terminal.truncated,
        }
        status = terminal.exit_status()
        if status is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self, params: JsonMapping) -> JsonObject:
        terminal = self._get(params)
        await terminal.proc.wait()
        if terminal.reader is not None:
            await terminal.reader
        status = terminal.exit_status()
        assert status is not None
        return status

    async def kill(self, params: JsonMapping) -> JsonObject:
        """ACP ``terminal/kill``: the command's whole group, now (the terminal stays)."""
        terminal = self._get(params)
        await stop_group(terminal.proc.pid, exited_within(terminal.proc), grace=5, term=False)
        return {}

    def release(self, params: JsonMapping) -> Awaitable[JsonObject]:
        """ACP ``terminal/release``: the terminal is gone now (in arrival order: a later
        ``terminal/output`` no longer finds it); the awaitable stops its command."""
        terminal = self._get(params)
        terminal_id = str(params["terminalId"])
        del self._terminals[terminal_id]
        return self._released_after_stop(terminal_id, terminal)

    async def _released_after_stop(self, terminal_id: str, terminal: _Terminal) -> dict[str, Any]:
        await self._stop(terminal)
        self._released[terminal_id] = terminal.output.decode("utf-8", errors="replace")
        while len(self._released) > MAX_TERMINALS:
            self._released.popitem(last=False)
        return {}

    def knows(self, terminal_id: str) -> bool:
        """Whether baton created this terminal (open or released)."""
        return terminal_id in self._terminals or terminal_id in self._released

    def output_of(self, terminal_id: str) -> str | None:
        """A baton terminal's output so far (or at release), ``None`` for one it never made."""
        terminal = self._terminals.get(terminal_id)
        if terminal is not None:
            return terminal.output.decode("utf-8", errors="replace")
        return self._released.get(terminal_id)

    @staticmethod
    async def _stop(terminal: _Terminal) -> None:
        await stop_group(terminal.proc.pid, exited_within(terminal.proc), grace=5, term=False)
        if terminal.reader is not None:
            terminal.reader.cancel()
            await asyncio.wait([terminal.reader])

    async def close(self) -> None:
        terminals = list(self._terminals.values())
        self._terminals.clear()
        await asyncio.gather(*(self._stop(terminal) for terminal in terminals))


def _env_variables(params: Mapping[str, Any]) -> dict[str, str]:
    """``env``: an array of ``{name, value}`` string pairs (ACP ``EnvVariable``)."""
    out: dict[str, str] = {}
    for index, item in enumerate(acp_params.optional_array(params, "env") or []):
        name = item.get("name") if isinstance(item, Mapping) else None
        value = item.get("value") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise RpcError.invalid_params(f"env[{index}] must be {{name, value}}, two strings")
        out[name] = value
    return out
