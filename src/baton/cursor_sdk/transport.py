"""The ``cursor-sdk`` transport: a Cursor SDK bridge process behind an ACP face.

An :class:`~baton.acp.transport.AgentTransport` like a spawned ACP agent, so the runner
opens, prompts, cancels, times out and kills a Cursor SDK agent exactly as it does an
ACP one:

* the **bridge** (the command of the profile: the verified bundled bridge, or another
  bridge binary such as baton's scripted one) is an
  :class:`~baton.acp.process.AgentProcess`: its own process group, the private launch
  environment (private HOME/XDG/TMPDIR, the state root), parent-death signal, stderr
  drained into the ring (which also finds the ready line), TERM then KILL of the whole
  group. The MCP servers the bridge starts are its children, in the same group: no
  orphan bridge and no orphan MCP server, ever. ``CURSOR_API_KEY`` is taken out of
  the bridge's environment and sent per request instead;
* the **face** (:class:`~baton.cursor_sdk.face.CursorSdkFace`) is the ACP agent, served
  over in-memory pipes in baton's loop by a :class:`~baton.acp.connection.JsonRpcConnection`;
* the runner's bytes go through those pipes; when the bridge exits, the runner's side
  reads EOF, as from an agent's stdout.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from baton.acp.connection import JsonRpcConnection
from baton.acp.pipes import MemoryPipe
from baton.acp.process import AgentProcess
from baton.acp.stderr_ring import StderrRing
from baton.acp.transport import Launch
from baton.aiotasks import cancel_and_wait
from baton.cursor_sdk.discovery import BridgeEndpoint, ReadyLineReader, parse_ready_line
from baton.cursor_sdk.face import CursorSdkFace, FaceSettings
from baton.errors import AgentStartError

__all__ = ["API_KEY_VAR", "CursorSdkLauncher", "CursorSdkTransport"]

API_KEY_VAR: Final = "CURSOR_API_KEY"


class CursorSdkTransport:
    """One bridge process and the ACP face in front of it (see the module docstring)."""

    def __init__(self, process: AgentProcess, face: CursorSdkFace) -> None:
        self.process = process
        self.face = face
        self._to_runner = MemoryPipe()
        self._to_face = MemoryPipe()
        face.conn = JsonRpcConnection(self._to_face, self._to_runner, face)
        self._tasks = [
            asyncio.create_task(face.conn.run(), name="cursor-sdk-face"),
            asyncio.create_task(self._drain_stdout(), name="cursor-sdk-stdout"),
            asyncio.create_task(self._end_on_exit(), name="cursor-sdk-exit"),
        ]

    # -------------------------------------------------------------- the stream

    @property
    def reader(self) -> MemoryPipe:
        return self._to_runner

    @property
    def writer(self) -> MemoryPipe:
        return self._to_face

    @property
    def stderr(self) -> StderrRing:
        return self.process.stderr

    # ---------------------------------------------------------------- lifetime

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def exit_grace(self) -> float:
        return self.process.exit_grace

    async def wait_exited(self) -> int | None:
        return await self.process.wait_exited()

    async def wait(self, timeout: float | None = None) -> int | None:
        return await self.process.wait(timeout)

    async def close(self) -> int | None:
        """Release the agent and shut the bridge down politely, then stop its group."""
        await self.face.close(polite=self.process.returncode is None)
        return await self._stop(self.process.close_grace)

    async def kill(self) -> int | None:
        """Stop the bridge's whole group now (it ignored a cancel, or baton is leaving)."""
        code = await self._stop(self.process.kill_grace)
        await self.face.close(polite=False)
        return code

    async def _stop(self, grace: float) -> int | None:
        code = await self.process.terminate(grace)
        self._to_runner.close()
        await cancel_and_wait(self._tasks)
        return code

    async def _end_on_exit(self) -> None:
        """The bridge is gone: the runner reads EOF, as from an agent's stdout."""
        await self.process.wait_exited()
        self._to_runner.close()

    async def _drain_stdout(self) -> None:
        """The bridge writes nothing to stdout; read it anyway, so it can never block."""
        while await self.process.stdout.read(64 * 1024):
            pass


@dataclass(frozen=True, slots=True)
class CursorSdkLauncher:
    """The transport factory of a ``cursor-sdk`` profile (``model`` and ``mode`` its own)."""

    model: str
    mode: str
    close_grace: float = 2.0
    kill_grace: float = 0.5

    async def __call__(self, launch: Launch) -> CursorSdkTransport:
        env = dict(launch.env)
        api_key = env.pop(API_KEY_VAR, None) or None
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[BridgeEndpoint] = loop.create_future()
        lines = ReadyLineReader()

        def on_stderr(data: bytes) -> None:
            line = lines.feed(data)
            if ready.done():
                return
            if lines.overflow:
                ready.set_exception(AgentStartError("the bridge's ready line is too long"))
            elif line is not None:
                try:
                    ready.set_result(parse_ready_line(line))
                except AgentStartError as exc:
                    ready.set_exception(exc)

        face = CursorSdkFace(
            FaceSettings(model=self.model, mode=self.mode, api_key=api_key),
            ready=ready,
            cwd=launch.cwd,
        )
        argv = [*launch.argv, "--workspace", str(launch.cwd)]
        process = await AgentProcess.spawn(
            argv,
            env=env,
            cwd=launch.cwd,
            stderr_ring=StderrRing(on_data=on_stderr),
            close_grace=self.close_grace,
            kill_grace=self.kill_grace,
        )
        # A bridge that exits before its ready line ends the face's pipes like any agent's
        # stdout: the runner reports the exit with the bridge's stderr (its reason).
        return CursorSdkTransport(process, face)
