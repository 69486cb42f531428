"""What carries an agent's bytes: the :class:`AgentTransport` seam, the httpx way.

A session talks JSON-RPC over a duplex byte stream and needs to know when the other
end is gone; nothing else about how the agent runs. :class:`AgentTransport` is that
contract. baton ships three:

* :class:`~baton.acp.process.AgentProcess` (here as :data:`spawn_subprocess`): the
  agent is a process in its own group with an explicit env; the production path;
* :func:`baton.testing.in_memory`: a Python agent object on the other end, no process;
* :func:`baton.testing.replay`: a recorded NDJSON wire trace played back.

The framing, the connection and everything above run unchanged over each of them, so
a test over the in-memory pair exercises the same code as a real agent does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from baton.acp.process import AgentProcess
from baton.acp.stderr_ring import StderrRing

__all__ = [
    "AgentTransport",
    "ByteReader",
    "ByteWriter",
    "Launch",
    "SubprocessLauncher",
    "TransportFactory",
    "spawn_subprocess",
]


class ByteReader(Protocol):
    """The agent's output (``asyncio.StreamReader`` satisfies it)."""

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes; ``b""`` once the agent's end is closed."""
        ...


class ByteWriter(Protocol):
    """The agent's input (``asyncio.StreamWriter`` satisfies it).

    ``drain()`` returns once the bytes were handed to the other end (for a process:
    accepted by the pipe), which is what "delivered" means for a request's answer.
    """

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def is_closing(self) -> bool: ...

    def close(self) -> None: ...


class AgentTransport(Protocol):
    """One live connection to one agent: its bytes, its stderr, its lifetime."""

    @property
    def reader(self) -> ByteReader: ...

    @property
    def writer(self) -> ByteWriter: ...

    @property
    def stderr(self) -> StderrRing:
        """The agent's diagnostic output, bounded (empty where there is none)."""
        ...

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it ended, else ``None``."""
        ...

    @property
    def exit_grace(self) -> float:
        """Seconds the session lets the reader drain after the agent ended."""
        ...

    async def wait_exited(self) -> int | None:
        """Wait until the agent itself ended (not merely its output closed)."""
        ...

    async def wait(self, timeout: float | None = None) -> int | None:
        """The exit status within ``timeout`` seconds, else ``None``."""
        ...

    async def close(self) -> int | None:
        """End the agent politely (EOF, then harder); idempotent; its exit status."""
        ...

    async def kill(self) -> int | None:
        """End the agent now: it ignored ``session/cancel``, or baton is leaving."""
        ...


@dataclass(frozen=True, slots=True)
class Launch:
    """How the session wants its agent started: what a factory turns into a transport."""

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path = Path()


TransportFactory = Callable[[Launch], Awaitable[AgentTransport]]
"""Starts one agent for a session; ``AgentSession.open(transport=...)`` takes one."""


@dataclass(frozen=True, slots=True)
class SubprocessLauncher:
    """The production factory: each agent a process group (see :mod:`baton.acp.process`).

    ``close_grace`` is how long each step of a polite stop waits (EOF, SIGTERM, SIGKILL),
    ``kill_grace`` the same for :meth:`AgentTransport.kill`; both also bound how long
    the reader may drain after the agent died while a grandchild holds its pipes.
    """

    close_grace: float = 2.0
    kill_grace: float = 0.5

    async def __call__(self, launch: Launch) -> AgentTransport:
        return await AgentProcess.spawn(
            launch.argv,
            env=launch.env,
            cwd=launch.cwd,
            close_grace=self.close_grace,
            kill_grace=self.kill_grace,
        )


spawn_subprocess = SubprocessLauncher()
"""The default transport factory."""
