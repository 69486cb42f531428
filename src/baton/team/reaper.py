"""The death watch: when ``baton up`` dies, everything it started dies within a second.

Three layers, because each alone has a hole:

1. **pdeathsig** (:mod:`baton.acp.process`): every agent process is started with
   ``PR_SET_PDEATHSIG = SIGKILL``, so the kernel kills the agent itself when baton
   dies, however it dies. It reaches only that one process, not what the agent
   started (an MCP server, a shell step in its own process group).
2. **this reaper**: a small process started by the team loop in its own session,
   holding the read end of a pipe whose only write end is the team loop's. It
   learns each agent's session id (agents run in their own session) and, the
   moment the pipe reports end-of-file (the team loop exited, even by SIGKILL), it
   SIGKILLs every process of those sessions (found in ``/proc``) and every MCP
   shim of this team loop's endpoint (their command line names the hub's socket) or
   per-slot role MCP server of this project's store (``role_mcp``, whose command
   line names the store); agents may start those in sessions of their own. It
   repeats until none is left (bounded), then exits.
3. **the MCP side's own watch**: a shim's socket closes when the team loop dies
   (:mod:`baton.role_tools.stdio_shim` exits on end-of-file); a per-slot server
   holds a pidfd on its team loop, and its write tools refuse once it is gone
   (:mod:`baton.role_tools.server`), for whatever runs outside those
   sessions (a shim an agent started with ``setsid``).

Run as ``python -m baton.team.reaper``; :class:`Reaper` starts and feeds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from baton.lifeline import processes

__all__ = ["Reaper", "kill_sessions", "main", "session_members"]

_SWEEP_FOR = 1.0
"""Seconds the reaper keeps sweeping a session (children forked during the kill)."""


_ROLE_MCP = b"baton.role_tools.slot_server"
_SHIM = b"stdio_shim.py"


def _markers(store: str | None, socket: str | None) -> list[tuple[bytes, bytes]]:
    """(program, argument) pairs naming this team loop's MCP processes on a command line."""
    found = []
    if store:
        found.append((_ROLE_MCP, ("\0" + store + "\0").encode()))
    if socket:
        found.append((_SHIM, ("\0" + socket + "\0").encode()))
    return found


def session_members(
    sessions: set[int], store: str | None = None, socket: str | None = None
) -> list[int]:
    """Live pids in one of ``sessions``, or MCP shims/servers of ``socket``/``store``."""
    found = []
    me = os.getpid()
    markers = _markers(store, socket)
    for pid, stat in processes():
        if pid == me or not stat.live:
            continue
        if stat.session in sessions:
            found.append(pid)
        elif markers:
            try:
                cmdline = b"\0" + Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if any(prog in cmdline and arg in cmdline for prog, arg in markers):
                found.append(pid)
    return found


def kill_sessions(
    sessions: set[int],
    *,
    store: str | None = None,
    socket: str | None = None,
    sweep_for: float = _SWEEP_FOR,
) -> int:
    """SIGKILL every process of ``sessions`` (and the team loop's MCP processes) until none is left."""
    killed = 0
    deadline = time.monotonic() + sweep_for
    while True:
        members = session_members(sessions, store, socket)
        if not members:
            return killed
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    """Read session ids from stdin until end-of-file, then kill those sessions."""
    args = sys.argv[1:] if argv is None else argv
    store = args[args.index("--store") + 1] if "--store" in args else None
    socket = args[args.index("--socket") + 1] if "--socket" in args else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the team loop's to handle
    sessions: set[int] = set()
    stream = sys.stdin.buffer
    while True:
        line = stream.readline()
        if not line:
            break
        with contextlib.suppress(ValueError):
            sid = int(line.strip())
            if sid > 1:
                sessions.add(sid)
    kill_sessions(sessions, store=store, socket=socket)
    return 0


class Reaper:
    """The team loop's handle on its reaper process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._watched: set[int] = set()

    @classmethod
    async def start(cls, store: Path | None = None, socket: Path | None = None) -> Reaper:
        """Start the reaper; also end ``store``'s role MCP servers and ``socket``'s shims."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "baton.team.reaper",
            *(["--store", str(store)] if store is not None else []),
            *(["--socket", str(socket)] if socket is not None else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        return cls(proc)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def watch(self, session_id: int) -> None:
        """Kill ``session_id``'s processes when this team loop dies (a few bytes on a pipe)."""
        if session_id in self._watched or self._proc.stdin is None:
            return
        self._watched.add(session_id)
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._proc.stdin.write(f"{session_id}\n".encode())

    async def close(self) -> None:
        """Sessions were closed normally: end the reaper (it sweeps them once more)."""
        if self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.close()
        try:
            await asyncio.wait_for(self._proc.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()


if __name__ == "__main__":
    sys.exit(main())
