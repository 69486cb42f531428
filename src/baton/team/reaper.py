"""The death watch: when ``baton up`` dies, everything it started dies within a second.

Three layers, because each alone has a hole:

1. **pdeathsig** (:mod:`baton.acp.process`): every agent process is started with
   ``PR_SET_PDEATHSIG = SIGKILL``, so the kernel kills the agent itself when baton
   dies, however it dies. It reaches only that one process, not what the agent
   started (an MCP server, a shell step in its own process group).
2. **this reaper**: a small process started by the daemon in its own session,
   holding the read end of a pipe whose only write end is the daemon's. It
   learns each agent's session id (agents run in their own session) and, the
   moment the pipe reports end-of-file (the daemon exited, even by SIGKILL), it
   SIGKILLs every process of those sessions (found in ``/proc``) and every role
   MCP server of this project's store (agents start those in sessions of their
   own; their command line names the store), repeating until none is left
   (bounded), then exits.
3. **the role MCP servers' own pidfd watch** on their daemon, and their write
   tools' refusal once it is gone (:mod:`baton.coordination.mcp_server`), for
   whatever runs outside those sessions (a server an agent started with
   ``setsid``).

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

__all__ = ["Reaper", "kill_sessions", "main", "session_members"]

_SWEEP_FOR = 1.0
"""Seconds the reaper keeps sweeping a session (children forked during the kill)."""


_ROLE_MCP = b"baton.coordination.role_mcp"


def session_members(sessions: set[int], store: str | None = None) -> list[int]:
    """Live pids in one of ``sessions``, or role MCP servers of ``store`` (from ``/proc``)."""
    found = []
    me = os.getpid()
    marker = ("\0" + store + "\0").encode() if store else None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) <= 3 or fields[0] in ("Z", "X"):
            continue
        if int(fields[3]) in sessions:
            found.append(int(entry.name))
        elif marker is not None:
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if _ROLE_MCP in cmdline and marker in b"\0" + cmdline:
                found.append(int(entry.name))
    return found


def kill_sessions(
    sessions: set[int], *, store: str | None = None, sweep_for: float = _SWEEP_FOR
) -> int:
    """SIGKILL every process of ``sessions`` (and ``store``'s role MCP servers) until none is left."""
    killed = 0
    deadline = time.monotonic() + sweep_for
    while True:
        members = session_members(sessions, store)
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
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the daemon's to handle
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
    kill_sessions(sessions, store=store)
    return 0


class Reaper:
    """The daemon's handle on its reaper process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._watched: set[int] = set()

    @classmethod
    async def start(cls, store: Path | None = None) -> Reaper:
        """Start the reaper; ``store``: also end that store's role MCP servers."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "baton.team.reaper",
            *(["--store", str(store)] if store is not None else []),
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
        """Kill ``session_id``'s processes when this daemon dies (a few bytes on a pipe)."""
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
