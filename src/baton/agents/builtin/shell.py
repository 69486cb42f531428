"""Running one execute step: own process group, merged output streamed and bounded, killable.

The child gets a new process group (so it can be signalled as a whole) in the agent's own
session (so whoever ends the agent's session, e.g. baton's reaper when ``baton up`` dies, ends
the step too), stdin from ``/dev/null`` and one pipe for stdout and stderr. Its exit is awaited by a thread of its own
with ``waitid(WNOWAIT)``, not asyncio's ``Process.wait()`` (which on 3.11 also waits for the
pipe to close, so a background child holding it would hang the step). The exited leader stays
a zombie until the group is cleaned up, which keeps its pid, the group id, from being reused
while we signal the group: whatever is left of it gets SIGTERM and, after a grace period,
SIGKILL. Only then is the leader reaped.
"""

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from baton.procgroup import signal_group, stop_group

__all__ = ["OUTPUT_CAP", "UPDATE_INTERVAL", "CommandResult", "OutputTail", "run_command"]

log = logging.getLogger(__name__)

OUTPUT_CAP = 256 * 1024
UPDATE_INTERVAL = 0.1
_EOF_WAIT = 1.0


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended; ``output`` is the bounded text (see `OutputTail.text`)."""

    exit_code: int | None
    signal: str | None
    duration_ms: int
    output_bytes: int
    output: str
    timed_out: bool = False
    cancelled: bool = False
    error: str | None = None


class OutputTail:
    """The last `cap` bytes of a stream, plus the total count (no I/O)."""

    def __init__(self, cap: int = OUTPUT_CAP) -> None:
        self._cap = cap
        self._buffer = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        """Append data, forgetting what falls out of the window."""
        self.total += len(data)
        self._buffer += data
        if len(self._buffer) > 2 * self._cap:
            del self._buffer[: -self._cap]

    def text(self) -> str:
        """The kept output as text, headed by a note when earlier output was cut."""
        kept = bytes(self._buffer[-self._cap :])
        text = kept.decode("utf-8", "replace")
        if self.total > len(kept):
            return f"[output truncated: showing the last {len(kept)} of {self.total} bytes]\n{text}"
        return text


async def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    timeout: float,
    kill_grace: float,
    cancel: asyncio.Event,
    on_output: Callable[[str], Awaitable[None]],
) -> CommandResult:
    """Run ``argv`` to completion, timeout or cancellation; ``on_output`` gets the text so far.

    ``on_output`` is called at most once per `UPDATE_INTERVAL`; the result carries the final
    text, so the last change may only appear there.
    """
    started = time.monotonic()
    try:
        # Popen, not asyncio's subprocess: see the module docstring; the fork itself is quick.
        process = subprocess.Popen(  # noqa: ASYNC220
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,
        )
    except OSError as exc:
        return CommandResult(
            None, None, _since(started), 0, "", error=f"cannot start {argv[0]}: {exc}"
        )
    assert process.stdout is not None
    tail = OutputTail()
    changed = asyncio.Event()
    loop = asyncio.get_running_loop()
    eof: asyncio.Future[None] = loop.create_future()
    transport, _ = await loop.connect_read_pipe(
        lambda: _Collector(tail, changed, eof), process.stdout
    )
    exited = _exit_future(process.pid)
    streamer = asyncio.create_task(_stream(tail, changed, on_output))
    try:
        ending = await _wait(exited, cancel, timeout)
        await _stop_group(process.pid, exited, eof, kill_grace)
    finally:
        if exited.done():
            process.wait()  # a zombie by now: reaped at once
        else:
            signal_group(process.pid, signal.SIGKILL)
            exited.add_done_callback(lambda _: process.wait())
        streamer.cancel()
        await asyncio.wait([streamer])
        transport.close()
    code = process.returncode
    return CommandResult(
        exit_code=code if code is not None and code >= 0 else None,
        signal=_signal_name(-code) if code is not None and code < 0 else None,
        duration_ms=_since(started),
        output_bytes=tail.total,
        output=tail.text(),
        timed_out=ending == "timeout",
        cancelled=ending == "cancelled",
    )


class _Collector(asyncio.Protocol):
    def __init__(
        self, tail: OutputTail, changed: asyncio.Event, eof: "asyncio.Future[None]"
    ) -> None:
        self._tail = tail
        self._changed = changed
        self._eof = eof

    def data_received(self, data: bytes) -> None:
        self._tail.add(data)
        self._changed.set()

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self._eof.done():
            self._eof.set_result(None)


def _exit_future(pid: int) -> "asyncio.Future[None]":
    """A future set, by a daemon thread, once ``pid`` has exited (it is left unreaped)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not future.done():
            future.set_result(None)

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):  # reaped elsewhere: exited all the same
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle)

    threading.Thread(target=wait, name=f"wait-{pid}", daemon=True).start()
    return future


async def _stream(
    tail: OutputTail, changed: asyncio.Event, on_output: Callable[[str], Awaitable[None]]
) -> None:
    """Report new output, at most once per interval (the trailing change is reported too)."""
    while True:
        await changed.wait()
        changed.clear()
        await on_output(tail.text())
        await asyncio.sleep(UPDATE_INTERVAL)


async def _wait(
    exited: "asyncio.Future[None]", cancel: asyncio.Event, timeout: float
) -> Literal["exited", "cancelled", "timeout"]:
    cancelled = asyncio.create_task(cancel.wait())
    waiting: list[asyncio.Future[Any]] = [exited, cancelled]
    try:
        await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        cancelled.cancel()
    if exited.done():
        return "exited"
    return "cancelled" if cancel.is_set() else "timeout"


async def _stop_group(
    pgid: int, exited: "asyncio.Future[None]", eof: "asyncio.Future[None]", grace: float
) -> None:
    """End the leader if it still runs, then any leftovers, then collect the last output."""

    async def leader_exited(seconds: float) -> bool:
        await asyncio.wait([exited], timeout=seconds)
        return exited.done()

    await stop_group(pgid, leader_exited, grace=grace)
    await exited
    await asyncio.wait([eof], timeout=_EOF_WAIT)
    if not eof.done():
        log.warning("process group %d: output pipe still open; giving up on it", pgid)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
