"""The wire tap inside baton's process: any transport, its bytes recorded as they pass.

:func:`tapping` wraps a transport factory; the session then reads and writes through the
tap, which appends each line to a log in :mod:`tests.support.wiretap`'s format (so
:func:`~tests.support.wiretap.read_tap` loads it): ``client`` lines in the order baton
wrote them, ``agent`` lines in the order baton read them. Unlike the tap process it puts
nothing between baton and the agent, so it works over the in-memory transport, and a test
that only reads the wire need not be about processes.
"""

from __future__ import annotations

from pathlib import Path

from baton.acp.stderr_ring import StderrRing
from baton.acp.transport import AgentTransport, ByteReader, ByteWriter, Launch, TransportFactory
from tests.support.wiretap import Recorder

__all__ = ["TappedTransport", "tapping"]


class _Lines:
    """Cuts one direction's bytes into lines for the recorder."""

    def __init__(self, recorder: Recorder, direction: str) -> None:
        self._recorder = recorder
        self._direction = direction
        self._partial = b""

    def feed(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._recorder.line(self._direction, line)


class _Reader:
    def __init__(self, inner: ByteReader, lines: _Lines) -> None:
        self._inner = inner
        self._lines = lines

    async def read(self, n: int = -1) -> bytes:
        data = await self._inner.read(n)
        self._lines.feed(data)
        return data


class _Writer:
    def __init__(self, inner: ByteWriter, lines: _Lines) -> None:
        self._inner = inner
        self._lines = lines

    def write(self, data: bytes) -> None:
        self._lines.feed(data)
        self._inner.write(data)

    async def drain(self) -> None:
        await self._inner.drain()

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def close(self) -> None:
        self._inner.close()


class TappedTransport:
    """``inner`` with its reader and writer tapped; everything else is ``inner``'s."""

    def __init__(self, inner: AgentTransport, recorder: Recorder) -> None:
        self.inner = inner
        self._recorder = recorder
        self._reader = _Reader(inner.reader, _Lines(recorder, "agent"))
        self._writer = _Writer(inner.writer, _Lines(recorder, "client"))

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

    async def wait_exited(self) -> int | None:
        return await self.inner.wait_exited()

    async def wait(self, timeout: float | None = None) -> int | None:
        return await self.inner.wait(timeout)

    async def close(self) -> int | None:
        try:
            return await self.inner.close()
        finally:
            self._recorder.close()

    async def kill(self) -> int | None:
        return await self.inner.kill()


def tapping(factory: TransportFactory, log: Path) -> TransportFactory:
    """``factory``, each transport it starts recording to ``log``."""

    async def start(launch: Launch) -> AgentTransport:
        return TappedTransport(await factory(launch), Recorder(str(log)))

    return start
