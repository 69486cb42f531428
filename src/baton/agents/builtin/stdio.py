"""The process's protocol streams: ACP owns the original stdin/stdout, nothing else may touch them.

`claim_stdio` moves the protocol onto private descriptors and points fds 0 and 1 at
``/dev/null`` and stderr, so a stray ``print``, a library or an inherited child can never
corrupt the stream. Pipes are driven by asyncio; regular files (redirected input in a shell)
fall back to plain reads and writes.
"""

import asyncio
import os
import sys
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Input", "Output", "claim_stdio", "open_input", "open_output"]

READ_SIZE = 1 << 16


class Input(Protocol):
    """Bytes from the client; ``b""`` at end of input."""

    async def read(self) -> bytes: ...


class Output(Protocol):
    """Bytes to the client: ``write`` queues in call order, ``drain`` waits for room."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


def claim_stdio() -> tuple[int, int]:
    """Take fds 0/1 for the protocol and return private copies of them."""
    sys.stdout.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_in, protocol_out


async def open_input(fd: int) -> Input:
    """Read ``fd`` through the event loop when it is a pipe or tty, else with a thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_SIZE * 4)
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(fd, "rb", buffering=0, closefd=False),
        )
    except ValueError:
        return _FileInput(fd=fd)
    return _PipeInput(reader=reader)


async def open_output(fd: int) -> Output:
    """Write ``fd`` through the event loop when it is a pipe, else directly."""
    loop = asyncio.get_running_loop()
    file = os.fdopen(fd, "wb", buffering=0, closefd=False)
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, file)
    except ValueError:
        return _FileOutput(fd=fd)
    return _PipeOutput(writer=asyncio.StreamWriter(transport, protocol, None, loop))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _PipeInput:
    reader: asyncio.StreamReader

    async def read(self) -> bytes:
        return await self.reader.read(READ_SIZE)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _FileInput:
    fd: int

    async def read(self) -> bytes:
        return await asyncio.to_thread(os.read, self.fd, READ_SIZE)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _PipeOutput:
    writer: asyncio.StreamWriter

    def write(self, data: bytes) -> None:
        if self.writer.transport.is_closing():
            raise BrokenPipeError("the client closed our stdout")
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _FileOutput:
    fd: int

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    async def drain(self) -> None:
        return None
