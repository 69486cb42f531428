"""The agent process: its own process group, an explicit env, stderr always drained.

Every agent is started with ``start_new_session=True`` so that it and everything it
spawns (npm launchers start native children) share one process group, which
:meth:`AgentProcess.terminate` signals as a whole: close stdin, wait, SIGTERM the
group, wait, SIGKILL the group. stderr is read continuously into a
:class:`~baton.acp.stderr_ring.StderrRing` so a chatty agent can never block on a
full pipe. On Linux the agent also gets ``PR_SET_PDEATHSIG = SIGKILL``: if baton
dies (even by SIGKILL) the kernel kills the agent at once (the team loop's reaper,
:mod:`baton.team.reaper`, then ends the rest of its session).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from baton.acp.stderr_ring import StderrRing
from baton.errors import AgentNotInstalled, AgentStartError
from baton.lifeline import preexec_die_with_parent
from baton.procgroup import exited_within, group_alive, signal_group, start_group, stop_group

__all__ = [
    "READ_CHUNK",
    "AgentProcess",
    "resolve_command",
]

READ_CHUNK = 256 * 1024


def resolve_command(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Resolve ``argv[0]`` on the *agent's* PATH, or raise :class:`AgentNotInstalled`."""
    if not argv:
        raise AgentStartError("empty agent command")
    exe = argv[0]
    if os.sep in exe:
        if not os.access(exe, os.X_OK):
            raise AgentNotInstalled(f"agent command {exe!r} is not an executable file")
        return list(argv)
    found = shutil.which(exe, path=env.get("PATH", os.defpath))
    if found is None:
        raise AgentNotInstalled(f"agent command {exe!r} not found on PATH")
    return [found, *argv[1:]]


class AgentProcess:
    """A running agent process group with pipes; owns its stderr drain task.

    The subprocess :class:`~baton.acp.transport.AgentTransport`.
    """

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        stderr: StderrRing,
        *,
        close_grace: float = 2.0,
        kill_grace: float = 0.5,
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.pgid = proc.pid
        self.stderr = stderr
        self.close_grace = close_grace
        self.kill_grace = kill_grace
        self._stderr_task: asyncio.Task[None] | None = None

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stderr_ring: StderrRing | None = None,
        close_grace: float = 2.0,
        kill_grace: float = 0.5,
        inherit_stderr: bool = False,
    ) -> AgentProcess:
        """Start ``argv`` in its own process group; its stderr fills a ring, or goes to
        ours with ``inherit_stderr`` (``baton agents login``: the agent's login hints)."""
        command = resolve_command(argv, env)
        try:
            proc = await start_group(
                command,
                env=env,
                cwd=cwd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None if inherit_stderr else asyncio.subprocess.PIPE,
                preexec_fn=preexec_die_with_parent(os.getpid()),
            )
        except OSError as exc:
            raise AgentStartError(f"could not start {command[0]}: {exc}") from exc
        self = cls(
            proc, stderr_ring or StderrRing(), close_grace=close_grace, kill_grace=kill_grace
        )
        assert proc.stdin is not None
        # Writes complete only once handed to the OS: "delivered" means in the pipe.
        transport = proc.stdin.transport
        if isinstance(transport, asyncio.WriteTransport):
            transport.set_write_buffer_limits(high=0)
        if not inherit_stderr:
            self._stderr_task = asyncio.create_task(self._drain_stderr(), name=f"stderr-{proc.pid}")
        return self

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.proc.stdout is not None
        return self.proc.stdout

    @property
    def stdin(self) -> asyncio.StreamWriter:
        assert self.proc.stdin is not None
        return self.proc.stdin

    @property
    def reader(self) -> asyncio.StreamReader:
        return self.stdout

    @property
    def writer(self) -> asyncio.StreamWriter:
        return self.stdin

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    @property
    def exit_grace(self) -> float:
        return self.close_grace

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        reader = self.proc.stderr
        while True:
            chunk = await reader.read(READ_CHUNK)
            if not chunk:
                return
            self.stderr.append(chunk)

    async def wait_exited(self) -> int | None:
        """Wait for the leader process itself to exit.

        ``Process.wait()`` (3.11) also waits for every pipe to close, so a grandchild
        that inherited stdout would keep it blocked after the agent died. A pidfd
        becomes readable at exit whatever the pipes do (Linux ≥ 5.3); elsewhere this
        falls back to ``Process.wait()``.
        """
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            return await self.proc.wait()
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def on_exit() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(fd, on_exit)
        try:
            await exited
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        # asyncio's child watcher reaps the process and records its code right after.
        for _ in range(100):
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        return self.proc.returncode

    async def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the leader to exit; ``None`` on timeout."""
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None

    def group_alive(self) -> bool:
        """Whether any live (non-zombie) process of the group still exists."""
        return group_alive(self.pgid)

    async def terminate(self, grace: float = 2.0) -> int | None:
        """Stop the whole group: EOF, then :func:`~baton.procgroup.stop_group`. Idempotent."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        if self.proc.returncode is None:
            await self.wait(grace)
        await stop_group(self.pgid, exited_within(self.proc), grace=grace)
        code = self.proc.returncode
        if self._stderr_task is not None and not self._stderr_task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), grace)
            except TimeoutError:
                # Something outside the group holds the stderr pipe open; stop reading.
                self._stderr_task.cancel()
        return code

    async def close(self) -> int | None:
        """The transport's polite stop, each step bounded by ``close_grace``."""
        return await self.terminate(self.close_grace)

    async def kill(self) -> int | None:
        """The transport's hard stop, each step bounded by ``kill_grace``."""
        return await self.terminate(self.kill_grace)

    def kill_now(self) -> None:
        """Last-resort synchronous kill (interpreter shutdown paths)."""
        signal_group(self.pgid, signal.SIGKILL)
