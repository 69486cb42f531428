"""The fast-forward loop skips only waits nothing but a timer can end.

Each case runs on its own :class:`FastForwardLoop` through ``asyncio.Runner`` and checks
wall time (``time.monotonic``) against loop time: a skip where something was live would
fire a timeout early (the test fails), a wait not skipped where the loop was idle takes
the full wall time (the test fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from baton.testing.clock import FastForwardLoop, fast_forward_loop

T = TypeVar("T")


def run(main: Callable[[FastForwardLoop], Awaitable[T]]) -> T:
    with asyncio.Runner(loop_factory=fast_forward_loop) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, FastForwardLoop)
        return runner.run(main(loop))  # type: ignore[arg-type]


def test_an_idle_wait_is_skipped_and_the_clock_moves_by_it() -> None:
    async def main(loop: FastForwardLoop) -> tuple[float, float]:
        start = loop.time()
        await asyncio.sleep(30)
        return loop.time() - start, loop.skipped

    wall = time.monotonic()
    elapsed, skipped = run(main)
    assert time.monotonic() - wall < 5
    assert elapsed >= 30 and skipped >= 29


def test_a_timeout_fires_at_its_time_on_the_loop_clock() -> None:
    async def main(loop: FastForwardLoop) -> float:
        start = loop.time()
        try:
            async with asyncio.timeout(1800):
                await asyncio.Event().wait()
        except TimeoutError:
            return loop.time() - start
        raise AssertionError("the timeout did not fire")

    assert 1800 <= run(main) < 1805


def test_a_live_process_pipe_keeps_real_time() -> None:
    async def main(loop: FastForwardLoop) -> float:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(0.3)", stdout=asyncio.subprocess.PIPE
        )
        wall = time.monotonic()
        await asyncio.sleep(0.2)
        waited = time.monotonic() - wall
        await proc.communicate()
        assert loop.skipped == 0
        return waited

    assert run(main) >= 0.19


def test_an_executor_job_is_never_overtaken_by_a_timer() -> None:
    async def main(loop: FastForwardLoop) -> None:
        async with asyncio.timeout(5):
            await asyncio.to_thread(time.sleep, 0.3)
        assert loop.skipped == 0

    run(main)


def test_a_woken_thread_counts_as_live_until_it_answers() -> None:
    """The store writer's shape: parked on an Event, woken by the loop, answers later."""

    async def main(loop: FastForwardLoop) -> None:
        wake = threading.Event()
        answer: asyncio.Future[str] = loop.create_future()

        def worker() -> None:
            wake.wait()
            time.sleep(0.3)  # work after the wake-up, before the answer
            loop.call_soon_threadsafe(answer.set_result, "done")
            wake.clear()
            wake.wait()  # parked again: idle

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        await asyncio.sleep(10)  # the worker is parked: skipped
        assert loop.skipped >= 9
        skipped = loop.skipped
        wake.set()
        async with asyncio.timeout(5):
            assert await answer == "done"
        assert loop.skipped - skipped < 1, "skipped while the woken thread worked"
        await asyncio.sleep(10)  # parked again
        assert loop.skipped - skipped >= 9

    run(main)


def test_a_thread_in_a_timed_wait_keeps_real_time() -> None:
    async def main(loop: FastForwardLoop) -> None:
        thread = threading.Thread(target=threading.Event().wait, args=(0.5,), daemon=True)
        thread.start()
        wall = time.monotonic()
        await asyncio.sleep(0.2)
        assert time.monotonic() - wall >= 0.19 and loop.skipped == 0
        thread.join()

    run(main)


@dataclass
class _Bell:
    """A listening FIFO (the store doorbell's shape) with a reader on the loop."""

    path: Path
    keep_fd: int  # the listener's own write end, so the FIFO never reports EOF
    rung: asyncio.Event


@contextlib.contextmanager
def _bell(loop: FastForwardLoop, directory: Path, *, private: Path | None) -> Iterator[_Bell]:
    directory.mkdir(exist_ok=True)
    path = directory / "listener.fifo"
    os.mkfifo(path, 0o600)
    read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    bell = _Bell(path, os.open(path, os.O_WRONLY | os.O_NONBLOCK), asyncio.Event())

    def on_ring() -> None:
        os.read(read_fd, 512)
        bell.rung.set()

    loop.add_reader(read_fd, on_ring)
    if private is not None:
        private.mkdir(exist_ok=True)
        loop.mark_private(private)
    try:
        yield bell
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)
        os.close(bell.keep_fd)


def test_a_private_fifo_nobody_is_writing_does_not_keep_real_time(tmp_path: Path) -> None:
    async def main(loop: FastForwardLoop) -> None:
        with _bell(loop, tmp_path / "bell", private=tmp_path / "bell"):
            wall = time.monotonic()
            await asyncio.sleep(3)
            assert time.monotonic() - wall < 1 and loop.skipped >= 2.9

    run(main)


def test_a_fifo_outside_the_private_directories_keeps_real_time(tmp_path: Path) -> None:
    async def main(loop: FastForwardLoop) -> None:
        with _bell(loop, tmp_path / "other", private=tmp_path / "bell"):
            wall = time.monotonic()
            await asyncio.sleep(0.2)
            assert time.monotonic() - wall >= 0.19 and loop.skipped == 0

    run(main)


async def _rung_after(loop: FastForwardLoop, bell: _Bell, why: str) -> None:
    """Wait (up to 600 s of loop time) for the ring; it must come before any jump."""
    start = loop.time()
    async with asyncio.timeout(600):
        await bell.rung.wait()
    assert loop.time() - start < 5 and loop.skipped < 5, why


def test_a_thread_about_to_ring_a_private_fifo_keeps_real_time(tmp_path: Path) -> None:
    """The FIFO is vouched for, not its writers: a ringer that has not parked is live."""

    async def main(loop: FastForwardLoop) -> None:
        park = threading.Event()
        with _bell(loop, tmp_path / "bell", private=tmp_path / "bell") as bell:

            def ringer() -> None:
                time.sleep(0.2)  # live: real time
                os.write(bell.keep_fd, b"topic\n")
                park.wait()  # parked, with its ring unread

            thread = threading.Thread(target=ringer, daemon=True)
            thread.start()
            await _rung_after(loop, bell, "the clock jumped while a thread was about to ring")
            park.set()
            thread.join()

    run(main)


def test_a_ring_left_in_a_private_fifo_is_read_before_the_clock_jumps(tmp_path: Path) -> None:
    """A thread rings and parks while the loop is busy: idle, but with a ring to read."""

    async def main(loop: FastForwardLoop) -> None:
        rang, park = threading.Event(), threading.Event()
        with _bell(loop, tmp_path / "bell", private=tmp_path / "bell") as bell:

            def ringer() -> None:
                os.write(bell.keep_fd, b"topic\n")
                rang.set()
                park.wait()

            thread = threading.Thread(target=ringer, daemon=True)
            thread.start()
            rang.wait()  # the loop is busy here: the ring waits in the FIFO
            await _rung_after(loop, bell, "the clock jumped over a ring waiting to be read")
            park.set()
            thread.join()

    run(main)


def test_a_child_ringing_a_private_fifo_keeps_real_time_until_it_exits(tmp_path: Path) -> None:
    """``baton answer``'s shape: another process rings, and is watched until it exits."""

    async def main(loop: FastForwardLoop) -> None:
        with _bell(loop, tmp_path / "bell", private=tmp_path / "bell") as bell:
            ring = (
                "import os, time; time.sleep(0.3); "
                f"os.write(os.open({str(bell.path)!r}, os.O_WRONLY | os.O_NONBLOCK), b't\\n')"
            )
            child = await asyncio.create_subprocess_exec(sys.executable, "-c", ring)
            try:
                await _rung_after(loop, bell, "the clock jumped while the child that rings ran")
                assert await child.wait() == 0
            finally:
                if child.returncode is None:
                    child.kill()
                    await child.wait()

    run(main)
