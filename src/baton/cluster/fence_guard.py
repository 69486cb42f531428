"""The holder's fence on its agent's wire: no side effect without the slot's epoch.

Everything a role actor does *for* its agent starts from a JSON-RPC request the
agent sends (``fs/write_text_file``, ``terminal/create``,
``session/request_permission``, vendor methods) and ends with the answer the
client sends back (a permission answer is what lets an agent run a tool
itself). :func:`fenced_transport` wraps the agent's transport so that

* an agent request reaches the client only after :meth:`EpochGuard.check`
  confirmed, in a store transaction, that this holder's epoch still holds the
  slot's live lease (the line's newline is withheld until then: the connection
  frames on it, so it cannot act on a half-checked line);
* an answer to the agent is written only after the same check.

A refused check is recorded (``cluster.fenced_out`` in the holder's run), the
agent sees its input closed and the holder stops it: a stale copy (a partitioned
host that came back) never acts twice for a slot. What stays outside: the
window between a passed check and the client's act (milliseconds; the
coordinator only re-places after the lease ran out or the host was declared
dead) and what an agent does without asking (bounded by the holder's watchdog).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Final

from baton.acp.stderr_ring import StderrRing
from baton.acp.transport import AgentTransport, ByteReader, ByteWriter, Launch, TransportFactory
from baton.cluster.placement import FencedOut
from baton.events.model import ClusterFencedOut

__all__ = ["EpochGuard", "FencedTransport", "fenced_transport", "frame_act"]

PARSE_LIMIT: Final = 1 << 20
"""Lines longer than this are not parsed to see what they are: they are checked anyway."""


class EpochGuard:
    """One holder's check: its slot, its epoch, what to do once refused (stop the agent).

    After the first refusal every later check refuses at once (the holder is stale
    for good: only a new placement, i.e. a new holder, may act again).
    """

    def __init__(
        self,
        fence: Callable[[str], Awaitable[None]],
        *,
        slot: str,
        epoch: int,
        record: Callable[[ClusterFencedOut], Awaitable[None]],
        on_refused: Callable[[str], Awaitable[None]],
    ) -> None:
        self._fence = fence
        self.slot = slot
        self.epoch = epoch
        self._record = record
        self._on_refused = on_refused
        self.refused: FencedOut | None = None
        self.checks = 0

    async def check(self, act: str) -> bool:
        """True when ``act`` may go ahead; False (recorded, agent stopping) when fenced out."""
        if self.refused is not None:
            return False
        self.checks += 1
        try:
            await self._fence(act)
        except FencedOut as exc:
            self.refused = exc
            try:
                await self._record(
                    ClusterFencedOut(slot=self.slot, epoch=self.epoch, act=act, reason=str(exc))
                )
            finally:
                await self._on_refused(str(exc))
            return False
        return True

    async def require(self, act: str) -> None:
        """:meth:`check`, raising :class:`FencedOut` when refused (reports to the driver)."""
        if not await self.check(act):
            assert self.refused is not None
            raise FencedOut(str(self.refused))


def frame_act(line: bytes) -> str | None:
    """What a frame asks for, when it is a side effect: ``request <method>`` for a request,
    ``answer <id>`` for a response; ``None`` for a notification. Unparsed (too long,
    not JSON) frames are acts too: they might be either."""
    if len(line) > PARSE_LIMIT:
        return "frame (not parsed)"
    try:
        message = json.loads(line)
    except ValueError:
        return "frame (not JSON)"
    if not isinstance(message, dict):
        return "frame (not an object)"
    method = message.get("method")
    if "id" not in message:
        return None if isinstance(method, str) else "frame (no id, no method)"
    if isinstance(method, str):
        return f"request {method[:200]}"
    return f"answer {str(message.get('id'))[:64]}"


class _FencedReader:
    """The agent's output, each request's newline released only after its check."""

    def __init__(self, inner: ByteReader, guard: EpochGuard) -> None:
        self._inner = inner
        self._guard = guard
        self._line = bytearray()
        self._long = False

    def _act(self) -> str | None:
        line = b"" if self._long else bytes(self._line).strip()
        act = "frame (not parsed)" if self._long else (frame_act(line) if line else None)
        self._line.clear()
        self._long = False
        return act

    async def read(self, n: int = -1) -> bytes:
        if self._guard.refused is not None:
            return b""
        chunk = await self._inner.read(n)
        out = bytearray()
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:end])
            act = self._act()
            # The agent's answers to the client's own requests act on nothing.
            if (
                act is not None
                and not act.startswith("answer")
                and not await self._guard.check(act)
            ):
                return bytes(out)  # what was checked; EOF from now on
            out += chunk[start : end + 1]
            start = end + 1
        self._keep(chunk[start:])
        out += chunk[start:]  # no newline yet: the connection cannot act on it
        return bytes(out)

    def _keep(self, part: bytes) -> None:
        if self._long or not part:
            return
        self._line += part
        if len(self._line) > PARSE_LIMIT:
            self._line.clear()
            self._long = True


class _FencedWriter:
    """The agent's input: an answer is written only after its check (at ``drain``)."""

    def __init__(self, inner: ByteWriter, guard: EpochGuard) -> None:
        self._inner = inner
        self._guard = guard
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        for line in data.splitlines():
            act = frame_act(line) if line.strip() else None
            if act is not None and act.startswith("answer") and not await self._guard.check(act):
                raise ConnectionResetError(f"fenced out: {self._guard.refused}")
        if data:
            self._inner.write(data)
        await self._inner.drain()

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def close(self) -> None:
        self._inner.close()


class FencedTransport:
    """An :class:`AgentTransport` whose side-effect frames pass :class:`EpochGuard` first."""

    def __init__(self, inner: AgentTransport, guard: EpochGuard) -> None:
        self.inner = inner
        self._reader = _FencedReader(inner.reader, guard)
        self._writer = _FencedWriter(inner.writer, guard)

    @property
    def reader(self) -> ByteReader:
        return self._reader

    @property
    def writer(self) -> ByteWriter:
        return self._writer

    @property
    def stderr(self) -> StderrRing:
        return self.inner.stderr

    @property
    def returncode(self) -> int | None:
        return self.inner.returncode

    @property
    def exit_grace(self) -> float:
        return self.inner.exit_grace

    @property
    def pid(self) -> int | None:
        pid = getattr(self.inner, "pid", None)
        return pid if isinstance(pid, int) else None

    async def wait_exited(self) -> int | None:
        return await self.inner.wait_exited()

    async def wait(self, timeout: float | None = None) -> int | None:
        return await self.inner.wait(timeout)

    async def close(self) -> int | None:
        return await self.inner.close()

    async def kill(self) -> int | None:
        return await self.inner.kill()


def fenced_transport(
    inner: TransportFactory,
    guard: EpochGuard,
    started: Callable[[AgentTransport], None] | None = None,
) -> TransportFactory:
    """``inner``'s agents, fenced by ``guard``; ``started`` sees the raw transport (to kill)."""

    async def factory(launch: Launch) -> AgentTransport:
        transport = await inner(launch)
        if started is not None:
            started(transport)
        return FencedTransport(transport, guard)

    return factory
