"""The in-memory transport: a Python agent object on the other end, no process.

``AgentSession.open(profile, ..., transport=in_memory(MyAgent))`` runs the session
over a pair of bounded in-memory pipes whose other end is served by an
:class:`InMemoryAgent` in the same event loop. Framing, the connection, the client
methods and the turn driver run exactly as they do over a real process; only the
process is gone, so a test starts in microseconds and cannot leak a child.

An agent is anything with ``async def serve(self, end: AgentEnd) -> int | None``:
read the client's messages from ``end``, write answers to it, return an exit status.
:class:`ScenarioAgent` is one: it runs the fake agent's scenario scripts
(:mod:`baton.testing.scenarios`), the same ones the subprocess fake agent runs.

The pipes behave like OS pipes where baton depends on it: writes wait for room
(64 KiB), ``drain()`` returns once the other end has the bytes, closing one end is
EOF for the other, and writing to a closed end fails with ``BrokenPipeError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from baton.acp.pipes import PIPE_CAPACITY, MemoryPipe
from baton.acp.stderr_ring import StderrRing
from baton.acp.transport import AgentTransport, Launch, TransportFactory
from baton.jsontypes import JsonObject
from baton.testing.scenarios import (
    Call,
    Cancel,
    Deliver,
    Exit,
    Hang,
    JoinStderrFlood,
    Options,
    Pause,
    Raw,
    ScenarioCore,
    Send,
    StartTurn,
    Stderr,
    TurnScript,
    WaitCancel,
    dumps,
    flood_block,
)
from baton.testing.scripts import run_turn

__all__ = [
    "KILLED",
    "AgentEnd",
    "InMemoryAgent",
    "InMemoryTransport",
    "MemoryPipe",
    "ScenarioAgent",
    "in_memory",
]

PROCESS_SCENARIOS = frozenset({"spawn-grandchild", "replay"})
"""Scenarios that only make sense as a real process (``replay`` has :func:`replay`)."""

KILLED = -9
"""The exit status of an in-memory agent that was killed (as a process killed by SIGKILL)."""


class AgentEnd:
    """The agent's side of an in-memory connection."""

    def __init__(
        self, launch: Launch, inbox: MemoryPipe, outbox: MemoryPipe, stderr: StderrRing
    ) -> None:
        self.launch = launch
        self._inbox = inbox
        self._outbox = outbox
        self.stderr = stderr
        self._buffer = bytearray()
        self._eof = False
        self.exit_code: int | None = None
        self._task: asyncio.Task[None] | None = None

    async def receive_line(self) -> bytes | None:
        """The client's next line (without its newline), ``None`` once it closed its end."""
        while (newline := self._buffer.find(b"\n")) < 0:
            chunk = b"" if self._eof else await self._inbox.read(256 * 1024)
            if not chunk:
                self._eof = True
                if not self._buffer:
                    return None
                line, self._buffer = bytes(self._buffer), bytearray()
                return line
            self._buffer += chunk
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        return line

    async def write(self, data: bytes) -> None:
        """Raw bytes to the client, in pipe-sized pieces (a huge line waits for the reader)."""
        with memoryview(data) as view:
            for start in range(0, len(view), PIPE_CAPACITY):
                self._outbox.write(view[start : start + PIPE_CAPACITY])
                await self._outbox.drain()

    async def send(self, message: JsonObject) -> None:
        await self.write(dumps(message))

    def write_stderr(self, data: bytes) -> None:
        self.stderr.append(data)

    def exit(self, code: int) -> None:
        """End the agent now with ``code``, as a process calling ``_exit`` would."""
        self.exit_code = code
        if self._task is not None:
            self._task.cancel()


class InMemoryAgent(Protocol):
    async def serve(self, end: AgentEnd) -> int | None:
        """Talk to the client until done; the return value is the exit status (``None``: 0)."""
        ...


class InMemoryTransport:
    """An :class:`~baton.acp.transport.AgentTransport` whose agent is a coroutine."""

    def __init__(self, agent: InMemoryAgent, launch: Launch, *, close_grace: float = 0.5) -> None:
        self._to_client = MemoryPipe()
        self._to_agent = MemoryPipe()
        self._stderr = StderrRing()
        self.close_grace = close_grace
        self.failure: BaseException | None = None
        """An exception the agent object raised (its traceback is also in stderr)."""
        self._returncode: int | None = None
        self._exited = asyncio.Event()
        self.end = AgentEnd(launch, self._to_agent, self._to_client, self._stderr)
        self._task = asyncio.create_task(self._serve(agent), name="in-memory-agent")
        self.end._task = self._task

    async def _serve(self, agent: InMemoryAgent) -> None:
        code: int | None = KILLED
        try:
            code = await agent.serve(self.end)
        except asyncio.CancelledError:
            code = KILLED if self.end.exit_code is None else self.end.exit_code
        except Exception as exc:  # a test agent's bug: visible, like a crashed process
            self.failure = exc
            self._stderr.append("".join(traceback.format_exception(exc)).encode())
            code = 1
        finally:
            self._returncode = 0 if code is None else code
            self._to_client.close()
            self._to_agent.break_()
            self._exited.set()

    @property
    def reader(self) -> MemoryPipe:
        return self._to_client

    @property
    def writer(self) -> MemoryPipe:
        return self._to_agent

    @property
    def stderr(self) -> StderrRing:
        return self._stderr

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def exit_grace(self) -> float:
        return self.close_grace

    async def wait_exited(self) -> int | None:
        await self._exited.wait()
        return self._returncode

    async def wait(self, timeout: float | None = None) -> int | None:
        try:
            async with asyncio.timeout(timeout):
                return await self.wait_exited()
        except TimeoutError:
            return None

    async def close(self) -> int | None:
        """EOF to the agent; if it does not end within ``close_grace``, kill it."""
        self._to_agent.close()
        code = await self.wait(self.close_grace)
        return code if code is not None else await self.kill()

    async def kill(self) -> int | None:
        if not self._task.done():
            self._task.cancel()
        return await self.wait_exited()


AgentSource = InMemoryAgent | Callable[[], InMemoryAgent]
"""An agent object, or a factory making one per launch (a class is such a factory)."""


def in_memory(agent: AgentSource, *, close_grace: float = 0.5) -> TransportFactory:
    """A transport factory whose agents run in this event loop.

    ``agent`` is an agent object (used for every launch) or a zero-argument factory
    (a fresh agent per launch, as a fresh process would be).
    """

    async def connect(launch: Launch) -> AgentTransport:
        instance = agent() if callable(agent) else agent
        return InMemoryTransport(instance, launch, close_grace=close_grace)

    return connect


class ScenarioAgent:
    """The fake agent's scenarios in memory: the asyncio driver of :class:`ScenarioCore`."""

    def __init__(self, scenario: str = "ok", **options: Any) -> None:  # Any: Options' fields
        self.core = ScenarioCore(Options(scenario=scenario, **options))
        if scenario in PROCESS_SCENARIOS or self.core.options.grandchild_keeps_stdio:
            raise ValueError(
                f"scenario {scenario!r} needs a process: use the subprocess transport"
                + (" (or baton.testing.replay for a trace)" if scenario == "replay" else "")
            )
        self._end: AgentEnd | None = None
        self._next_id = 0
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._turns: set[asyncio.Task[None]] = set()

    async def serve(self, end: AgentEnd) -> int | None:
        self._end = end
        core = self.core
        if core.stderr_flood is not None:
            _flood(end, core.stderr_flood)
        try:
            while (line := await end.receive_line()) is not None:
                await self._receive(line)
            if core.survives_eof:
                await asyncio.Event().wait()  # only a kill ends it
        finally:
            # The client closed its end (or we are killed): turns end with the "process".
            for task in self._turns:
                task.cancel()
            if self._turns:
                await asyncio.wait(self._turns)
        for task in self._turns:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error
        return 0

    async def _receive(self, line: bytes) -> None:
        assert self._end is not None
        for action in self.core.on_line(line):
            if isinstance(action, Send):
                await self._end.send(action.message)
            elif isinstance(action, StartTurn):
                action.turn.waker = asyncio.Event()
                task = asyncio.create_task(self._run_turn(action.turn), name="fake-turn")
                self._turns.add(task)
            elif isinstance(action, Cancel):
                action.turn.waker.set()
            elif isinstance(action, Deliver):
                future = self._pending.pop(action.request_id, None)
                if future is not None and not future.done():
                    future.set_result(action.message)

    async def _run_turn(self, turn: TurnScript) -> None:
        script = run_turn(self.core, turn)
        reply: Any = None
        while True:
            try:
                action = script.send(reply)
            except StopIteration:
                return
            reply = await self._perform(turn, action)

    async def _perform(self, turn: TurnScript, action: Any) -> Any:
        end = self._end
        assert end is not None
        if isinstance(action, Send):
            await end.send(action.message)
        elif isinstance(action, Raw):
            await end.write(action.data)
        elif isinstance(action, Call):
            rid = self._next_id
            self._next_id += 1
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._pending[rid] = future
            await end.send(action.message(rid))
            return await future
        elif isinstance(action, Stderr):
            end.write_stderr(action.data)
        elif isinstance(action, WaitCancel):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(turn.waker.wait(), action.timeout)
        elif isinstance(action, Hang):
            await asyncio.Event().wait()
        elif isinstance(action, Exit):
            end.exit(action.code)
            await asyncio.Event().wait()  # the exit cancels this turn
        elif isinstance(action, JoinStderrFlood):
            pass  # the in-memory flood was written at start
        elif isinstance(action, Pause):
            await asyncio.sleep(action.seconds)
        return None


def _flood(end: AgentEnd, total: int) -> None:
    block = flood_block()
    for _ in range(total // len(block)):
        end.write_stderr(block)
    end.write_stderr(block[: total % len(block)])
