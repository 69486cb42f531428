"""The ``terminal/*`` client methods: commands the agent runs through baton.

Each terminal is its own process group in the workspace (cwd contained), with the
agent's private environment plus what the agent asked for, and output kept to the
agent's ``outputByteLimit`` from the end (ACP truncates from the beginning).
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

from baton.acp.jsonrpc import RpcError
from baton.procgroup import exited_within, stop_group
from baton.security.paths import resolve_inside

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

    async def create(self, params: Mapping[str, Any]) -> dict[str, Any]:
        command = params.get("command")
        if not isinstance(command, str) or not command:
            raise RpcError.invalid_params("command must be a non-empty string")
        args = params.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise RpcError.invalid_params("args must be a list of strings")
        if len(self._terminals) >= MAX_TERMINALS:
            raise RpcError.invalid_params(f"at most {MAX_TERMINALS} open terminals; release one")
        cwd = self.workspace
        if isinstance(params.get("cwd"), str):
            cwd = resolve_inside(self.workspace, params["cwd"], must_exist=True, regular_file=False)
        env = dict(self.env)
        for item in params.get("env") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value", ""))
        limit = params.get("outputByteLimit")
        limit = limit if isinstance(limit, int) and limit > 0 else DEFAULT_OUTPUT_LIMIT
        argv = [command, *args] if args or " " not in command else ["/bin/sh", "-c", command]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=str(cwd),
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise RpcError.invalid_params(f"cannot run {command!r}: {exc}") from exc
        terminal_id = f"term-{uuid.uuid4().hex[:12]}"
        terminal = _Terminal(proc=proc, limit=limit)
        terminal.reader = asyncio.create_task(self._read(terminal))
        self._terminals[terminal_id] = terminal
        return {"terminalId": terminal_id}

    async def _read(self, terminal: _Terminal) -> None:
        assert terminal.proc.stdout is not None
        while chunk := await terminal.proc.stdout.read(65536):
            terminal.append(chunk)

    def _get(self, params: Mapping[str, Any]) -> _Terminal:
        terminal = self._terminals.get(str(params.get("terminalId")))
        if terminal is None:
            raise RpcError(-32002, f"unknown terminal {params.get('terminalId')!r}")
        return terminal

    async def output(self, params: Mapping[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        result: dict[str, Any] = {
            "output": terminal.output.decode("utf-8", errors="replace"),
            "truncated": terminal.truncated,
        }
        status = terminal.exit_status()
        if status is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self, params: Mapping[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        await terminal.proc.wait()
        if terminal.reader is not None:
            await terminal.reader
        status = terminal.exit_status()
        assert status is not None
        return status

    async def kill(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """ACP ``terminal/kill``: the command's whole group, now (the terminal stays)."""
        terminal = self._get(params)
        await stop_group(terminal.proc.pid, exited_within(terminal.proc), grace=5, term=False)
        return {}

    def release(self, params: Mapping[str, Any]) -> Awaitable[dict[str, Any]]:
        """ACP ``terminal/release``: the terminal is gone now (in arrival order: a later
        ``terminal/output`` no longer finds it); the awaitable stops its command."""
        terminal = self._get(params)
        terminal_id = str(params.get("terminalId"))
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
